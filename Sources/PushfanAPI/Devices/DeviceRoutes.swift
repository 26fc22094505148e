import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport

/// `/v1/apps/{app}/devices/{device}`: register or update (the application or the master
/// secret), unregister (either), read (master). The application secret ships in every copy
/// of the app, so with it a token held by another device id moves only when the caller names
/// that registration (`?previous_device_id=`): knowing a token is not owning the device. The
/// master secret moves tokens freely, and only it is told which devices lost one. In the
/// same way, with the application secret a device's user (`user_id`) changes only in a
/// registration that brings the device's own token (`UserRoutes`).
enum DeviceRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore, logger: Logger) {
        addTraitRoutes(to: &router, store: store)
        let path = "/v1/apps/{app}/devices/{device}"
        router.add("PUT", path, Route(roles: [.application, .master]) { call in
            let body = try APIService.requireJSON(call.request)
            let registration = try DeviceJSONReader.registration(json: body, deviceID: call.parameter("device"))
            let app = call.parameter("app")
            let result: RegistrationResult
            do {
                // Checked first, so that bad input is a 400 whoever holds the token.
                let validated = try Validation.device(registration, now: store.clock.wallMillis)
                if call.role == .application {
                    let claim = ApplicationClaim(previousDeviceID: call.request.query["previous_device_id"])
                    switch try await store.devices.register(app: app, validated: validated, claim: claim) {
                    case .success(let registered): result = registered
                    case .failure(.tokenRegisteredElsewhere):
                        throw APIError(
                            409, "token_registered_elsewhere",
                            "this token is registered to another device of the app; to move it here, name that registration as ?previous_device_id= (or register with the master secret)")
                    case .failure(.userChangeNeedsDevice): throw UserRoutes.changeNeedsDevice
                    }
                } else {
                    result = try await store.devices.register(app: app, validated: validated)
                }
            } catch let error as StoreError where error.code == .invalidInput && error.message.hasPrefix("device token") {
                // The token's rules speak of "device token"; the field is `token`.
                throw APIError(400, "invalid_input", error.message, field: "token")
            }
            var answer: [String: JSONValue] = ["device": .string(registration.deviceID), "created": .bool(result.created)]
            if !result.tokenMovedFrom.isEmpty {
                logger.notice("devices.token_moved", ["app": app, "to": registration.deviceID, "from": result.tokenMovedFrom.joined(separator: ","), "by": call.role?.rawValue ?? ""])
                if call.role == .master { answer["token_moved_from"] = .array(result.tokenMovedFrom.map { .string($0) }) }
            }
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

    /// One trait of a device changed: read, changed, written back unless the device was
    /// registered again meanwhile (then read again, a few times). Only an active device: an
    /// invalid or unregistered one is not revived by a tag.
    static func change(
        _ store: DeviceStore, _ call: RouteCall, _ edit: (inout DeviceRegistration) throws -> Void
    ) async throws -> HTTPResponse {
        let (app, id) = (call.parameter("app"), call.parameter("device"))
        for _ in 0..<3 {
            guard let record = try await store.devices.get(app: app, deviceID: id) else { throw APIError.notFound("app \(app) has no device \(id)") }
            guard record.status == .active else {
                throw APIError(409, "device_inactive", "device \(id) is \(record.status.rawValue); register it again to change it")
            }
            var registration = DeviceRegistration(record)
            try edit(&registration)
            guard try await store.devices.rewrite(app: app, registration, unchangedSince: record) else { continue }
            guard let updated = try await store.devices.get(app: app, deviceID: id) else { throw APIError.notFound("app \(app) has no device \(id)") }
            return .json(200, json(updated))
        }
        throw APIError(409, "device_changing", "device \(id) was registered again while it was being changed, three times; try again", headers: ["Retry-After": "1"])
    }

    static func addTraitRoutes(to router: inout Router<Route>, store: DeviceStore) {
        let path = "/v1/apps/{app}/devices/{device}"
        let roles: Set<AppRole> = [.application, .master]
        router.add("PUT", path + "/tags/{tag}", Route(roles: roles) { call in
            try await change(store, call) { if !$0.tags.contains(call.parameter("tag")) { $0.tags.append(call.parameter("tag")) } }
        })
        router.add("DELETE", path + "/tags/{tag}", Route(roles: roles) { call in
            try await change(store, call) { registration in registration.tags.removeAll { $0 == call.parameter("tag") } }
        })
        router.add("PATCH", path + "/attributes", Route(roles: roles) { call in
            let members = try APIService.jsonObject(call.request)
            if call.role == .application, members[Users.attribute] != nil { throw UserRoutes.changeNeedsDevice }
            return try await change(store, call) { registration in
                for (key, value) in members {
                    // `nil` would be JSON null here (`JSONValue` is nil-literal expressible).
                    if value == .null { registration.attributes.removeValue(forKey: key) } else { registration.attributes[key] = value }
                }
            }
        })
        router.add("PUT", path + "/quiet_hours", Route(roles: roles) { call in
            let members = try APIService.jsonObject(call.request)
            guard case .string(let start)? = members["start"], case .string(let end)? = members["end"] else {
                throw APIError(400, "invalid_input", "quiet_hours: start and end are required, like \"22:00\" and \"07:00\"", field: "start")
            }
            let window = try Validation.quietHours(start: start, end: end)
            return try await change(store, call) { $0.quietHours = window }
        })
        router.add("DELETE", path + "/quiet_hours", Route(roles: roles) { call in try await change(store, call) { $0.quietHours = nil } })
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
