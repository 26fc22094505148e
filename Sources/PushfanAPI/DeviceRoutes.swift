import PushfanCore
import PushfanStore

/// `/v1/apps/{app}/devices/{device}`: register or update (the application or the master
/// secret), unregister (either), read (master).
enum DeviceRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore) {
        let path = "/v1/apps/{app}/devices/{device}"
        router.add("PUT", path, Route(roles: [.application, .master]) { call in
            let body = try APIService.requireJSON(call.request)
            let registration = try DeviceJSONReader.registration(json: body, deviceID: call.parameter("device"))
            let result: RegistrationResult
            do {
                result = try await store.devices.register(app: call.parameter("app"), registration)
            } catch let error as StoreError where error.code == .invalidInput && error.message.hasPrefix("device token") {
                // The token's rules speak of "device token"; the field is `token`.
                throw APIError(400, "invalid_input", error.message, field: "token")
            }
            var answer: [String: JSONValue] = ["device": .string(registration.deviceID), "created": .bool(result.created)]
            if !result.tokenMovedFrom.isEmpty { answer["token_moved_from"] = .array(result.tokenMovedFrom.map { .string($0) }) }
            return .json(result.created ? 201 : 200, .object(answer))
        })
        router.add("DELETE", path, Route(roles: [.application, .master]) { call in
            guard try await store.devices.unregister(app: call.parameter("app"), deviceID: call.parameter("device")) else {
                throw APIError.notFound("app \(call.parameter("app")) has no device \(call.parameter("device"))")
            }
            return HTTPResponse(status: 204)
        })
        router.add("GET", path, Route(roles: [.master]) { call in
            guard let device = try await store.devices.get(app: call.parameter("app"), deviceID: call.parameter("device")) else {
                throw APIError.notFound("app \(call.parameter("app")) has no device \(call.parameter("device"))")
            }
            return .json(200, json(device))
        })
    }

    static func json(_ device: DeviceRecord) -> JSONValue {
        func text(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
        var object: [String: JSONValue] = [
            "device_id": .string(device.deviceID), "token": .string(device.token), "environment": .string(device.environment.rawValue),
            "locale": text(device.locale), "timezone": text(device.timezone), "app_version": text(device.appVersion),
            "os_version": text(device.osVersion), "tags": .array(device.tags.map { .string($0) }), "attributes": .object(device.attributes),
            "status": .string(device.status.rawValue), "last_seen": .int(device.lastSeenAt), "created": .int(device.createdAt),
        ]
        object["quiet_hours"] = device.quietHours.map {
            .object(["start": .string(QuietHours.text($0.start)), "end": .string(QuietHours.text($0.end))])
        } ?? .null
        return .object(object)
    }
}
