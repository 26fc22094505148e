import PushfanAPNsModel
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `/v1/apps/{app}/devices/{device}/tokens/{kind}`: a device's tokens of other kinds than
/// alert (VoIP, Live Activity push-to-start and update, widgets…), registered and removed with
/// the application or the master secret and listed with the master secret. The alert token is
/// the device's own (`PUT /v1/apps/{app}/devices/{device}`). Also Notificare's Live Activity
/// calls, `POST /live-activity` and `DELETE /live-activity/{activity}/{device}`, which register
/// an activity's update token under the activity's id.
enum TokenRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore) {
        let path = "/v1/apps/{app}/devices/{device}/tokens"
        router.add("PUT", path + "/{kind}", Route(roles: [.application, .master]) { call in
            let kind = try Self.kind(call.parameter("kind"))
            let token = try KindToken.read(try APIService.jsonObject(call.request), kind: kind)
            let created = try await store.tokens.register(app: call.parameter("app"), deviceID: call.parameter("device"), token, now: store.clock.wallMillis)
            return .json(created ? 201 : 200, ["device": .string(call.parameter("device")), "kind": .string(kind.rawValue), "created": .bool(created)])
        })
        router.add("DELETE", path + "/{kind}", Route(roles: [.application, .master]) { call in
            let kind = try Self.kind(call.parameter("kind"))
            let scope = KindToken.scopeName(of: kind).flatMap { call.request.query[$0] } ?? ""
            guard try await store.tokens.remove(app: call.parameter("app"), deviceID: call.parameter("device"), kind: kind, scope: scope) else {
                throw APIError.notFound("device \(call.parameter("device")) has no such \(kind.rawValue) token")
            }
            return HTTPResponse(status: 204)
        })
        router.add("GET", path, Route(roles: [.master]) { call in
            let (app, device) = (call.parameter("app"), call.parameter("device"))
            guard try await store.devices.get(app: app, deviceID: device) != nil else { throw APIError.notFound("app \(app) has no device \(device)") }
            return .json(200, ["device": .string(device), "tokens": .array(try await store.tokens.list(app: app, deviceID: device).map(json))])
        })

        // Notificare's SDK: `activity` is the id the app chose for the activity; its update
        // token is kept under it, for update campaigns addressed to that activity.
        router.add("POST", "/live-activity", Route(roles: [.application, .master]) { call in
            let body = try APIService.jsonObject(call.request)
            let token = KindToken(kind: .liveActivityUpdate, token: try BodyFields.text(body, "token"), scope: try BodyFields.text(body, "activity"))
            _ = try await store.tokens.register(app: call.parameter("app"), deviceID: try BodyFields.text(body, "deviceID"), token, now: store.clock.wallMillis)
            return .json(200, ["message": "live activity registered"])
        })
        // An end for an activity the device never registered is not an error: the SDK does
        // not know what the server kept.
        router.add("DELETE", "/live-activity/{activity}/{device}", Route(roles: [.application, .master]) { call in
            try await store.tokens.remove(app: call.parameter("app"), deviceID: call.parameter("device"), kind: .liveActivityUpdate, scope: call.parameter("activity"))
            return .json(200, ["message": "live activity ended"])
        })
    }

    /// A kind from the path: any but alert.
    private static func kind(_ text: String) throws -> APNsTokenKind {
        guard let kind = APNsTokenKind(rawValue: text), kind != .alert else {
            let kinds = APNsTokenKind.allCases.filter { $0 != .alert }.map(\.rawValue).joined(separator: ", ")
            throw APIError(
                400, "invalid_input",
                text == "alert" ? "kind: the alert token is the device's own (PUT /v1/apps/{app}/devices/{device})" : "kind: one of \(kinds), got \(text.debugDescription)",
                field: "kind")
        }
        return kind
    }

    static func json(_ stored: StoredKindToken) -> JSONValue {
        var object = stored.token.members
        object["kind"] = .string(stored.token.kind.rawValue)
        object["environment"] = .string(stored.token.environment?.rawValue ?? "production")
        (object["status"], object["created"], object["last_seen"]) = (.string(stored.status), .int(stored.createdAt), .int(stored.lastSeenAt))
        object["expires_at"] = stored.token.expiresAt.map { .int($0) } ?? .null
        object["invalid_reason"] = stored.invalidReason.map { .string($0) } ?? .null
        return .object(object)
    }
}
