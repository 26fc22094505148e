import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `/v1/apps/{app}/users/{user}`: an app's users (`Users`). Reading a user and setting its
/// aliases take the master secret. Linking a device to a user, or unlinking it, takes the
/// master secret, or the application secret with the device's own token in the body: the
/// application secret ships in every copy of the app, and knowing a device id is not being
/// that device.
enum UserRoutes {
    static let changeNeedsDevice = APIError(
        403, "user_change_needs_device",
        "with the application secret a device changes its user only by proving it is that device: register it with its own token, or link it with {\"token\": its token}; the master secret may link any device")

    static func add(to router: inout Router<Route>, store: DeviceStore) {
        let path = "/v1/apps/{app}/users/{user}"
        router.add("GET", path, Route(roles: [.master]) { call in
            let (app, id) = (call.parameter("app"), call.parameter("user"))
            guard let user = try await store.users.get(app: app, id: id) else { throw APIError.notFound("app \(app) has no user \(id)") }
            return .json(200, json(user))
        })
        router.add("PUT", path + "/aliases", Route(roles: [.master]) { call in
            let (app, id) = (call.parameter("app"), call.parameter("user"))
            var aliases: [String: String] = [:]
            for (name, value) in try APIService.jsonObject(call.request) {
                guard case .string(let text) = value else {
                    throw APIError(400, "invalid_input", "aliases.\(name): an alias is a string, got \(value.compactJSON)", field: "aliases.\(name)")
                }
                aliases[name] = text
            }
            do {
                try await store.users.setAliases(app: app, user: id, aliases, now: store.clock.wallMillis)
            } catch let error as StoreError where error.code == .conflict {
                let field = error.message.split(separator: ":", maxSplits: 1).first.map(String.init)
                throw APIError(409, "alias_taken", error.message, field: field)
            }
            guard let user = try await store.users.get(app: app, id: id) else { return .json(200, json(Users.User(id: id, aliases: [:], devices: []))) }
            return .json(200, json(user))
        })
        router.add("GET", "/v1/apps/{app}/aliases/{name}/{value}", Route(roles: [.master]) { call in
            let (app, name, value) = (call.parameter("app"), call.parameter("name"), call.parameter("value"))
            guard let user = try await store.users.user(app: app, alias: name, value: value) else {
                throw APIError.notFound("app \(app) has no user with \(name) \(value)")
            }
            return .json(200, ["user_id": .string(user), "alias": .object([name: .string(value)])])
        })
        let roles: Set<AppRole> = [.application, .master]
        router.add("PUT", path + "/devices/{device}", Route(roles: roles) { call in
            let user = call.parameter("user")
            try Users.checkID(user, field: "user")
            try await requireOwnDevice(store, call)
            return try await DeviceRoutes.change(store, call) { $0.attributes[Users.attribute] = .string(user) }
        })
        router.add("DELETE", path + "/devices/{device}", Route(roles: roles) { call in
            let (app, user, device) = (call.parameter("app"), call.parameter("user"), call.parameter("device"))
            let record = try await requireOwnDevice(store, call)
            guard record.attributes[Users.attribute] == .string(user) else { throw APIError.notFound("device \(device) of app \(app) is not user \(user)'s") }
            return try await DeviceRoutes.change(store, call) { $0.attributes.removeValue(forKey: Users.attribute) }
        })
    }

    /// The device of the call; with the application secret only when the body's `token` is
    /// the device's own.
    @discardableResult
    private static func requireOwnDevice(_ store: DeviceStore, _ call: RouteCall) async throws -> DeviceRecord {
        let (app, id) = (call.parameter("app"), call.parameter("device"))
        guard let record = try await store.devices.get(app: app, deviceID: id) else { throw APIError.notFound("app \(app) has no device \(id)") }
        guard call.role == .application else { return record }
        guard case .string(let token)? = try APIService.jsonObject(call.request)["token"],
              (try? Validation.token(token)) == record.token
        else { throw changeNeedsDevice }
        return record
    }

    static func json(_ user: Users.User) -> JSONValue {
        .object([
            "user_id": .string(user.id), "aliases": .object(user.aliases.mapValues { .string($0) }),
            "devices": .array(user.devices.map(DeviceRoutes.json)),
        ])
    }
}
