import Foundation
import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport

/// The calls Notificare's iOS SDK (NotificarePushLib 2.x, and its 3.x successor) makes about
/// devices, at its own paths, with its field names and its auth (HTTP Basic with the app's
/// key and secret; the key names the app): registration (a temporary device first, then the
/// APNs token with `oldDeviceID`), partial updates, deletion, tags, user data and
/// do-not-disturb, plus the application info it asks for at launch. Answers are the SDK's
/// `{"message": …}`. What it asks about pushes is `NotificareEngagementRoutes`.
enum NotificareRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore) {
        let roles: Set<AppRole> = [.application, .master]
        router.add("GET", "/application/info", Route(roles: roles) { call in
            let app = call.parameter("app")
            return .json(200, ["application": [
                "_id": .string(app), "name": .string(app), "services": ["apns": true],
                "inboxConfig": ["useInbox": false, "autoBadge": false], "userDataFields": [], "actionCategories": [],
            ]])
        })
        router.add("POST", "/device", Route(roles: roles) { call in
            let body = try APIService.jsonObject(call.request)
            guard case .string(let id)? = body["deviceID"], !id.isEmpty else {
                throw APIError(400, "invalid_input", "deviceID: required, a string", field: "deviceID")
            }
            let app = call.parameter("app")
            var device = try await load(store, app: app, id) ?? NotificareDevice(deviceID: id)
            // A device whose id changed (its APNs token arrived, or changed): what the old id
            // had moves here, and the old id goes once the new one is saved (a refused
            // registration leaves the old one as it was, for the retry).
            var previous: NotificareDevice?
            if case .string(let old)? = body["oldDeviceID"], old != id, let found = try await load(store, app: app, old) {
                device.tags = Array(Set(device.tags + found.tags)).sorted()
                device.userData.merge(found.userData) { mine, _ in mine }
                device.dnd = device.dnd ?? found.dnd
                device.userID = device.userID ?? found.userID
                device.userName = device.userName ?? found.userName
                device.allowedUI = device.allowedUI ?? found.allowedUI
                previous = found
            }
            try device.apply(body)
            try await save(store, app: app, device, role: call.role)
            if let previous { try await remove(store, app: app, previous) }
            return .json(200, ["message": "device registered"])
        })
        router.add("PUT", "/device/{device}", Route(roles: roles) { call in
            try await update(store, call) { device in try device.apply(try APIService.jsonObject(call.request)) }
        })
        router.add("DELETE", "/device/{device}", Route(roles: roles) { call in
            let device = try await existing(store, call)
            try await remove(store, app: call.parameter("app"), device)
            return .json(200, ["message": "device deactivated"])
        })

        router.add("GET", "/device/{device}/tags", Route(roles: roles) { call in
            .json(200, ["tags": .array(try await existing(store, call).tags.map { .string($0) })])
        })
        router.add("PUT", "/device/{device}/addtags", Route(roles: roles) { call in
            let given = try strings(try APIService.jsonObject(call.request)["tags"], field: "tags")
            return try await update(store, call) { device in device.tags = Array(Set(device.tags + given)).sorted() }
        })
        router.add("PUT", "/device/{device}/removetags", Route(roles: roles) { call in
            let given = try strings(try APIService.jsonObject(call.request)["tags"], field: "tags")
            return try await update(store, call) { device in device.tags.removeAll { given.contains($0) } }
        })
        router.add("PUT", "/device/{device}/addtag", Route(roles: roles) { call in
            let tag = try single(try APIService.jsonObject(call.request))
            return try await update(store, call) { device in if !device.tags.contains(tag) { device.tags.append(tag) } }
        })
        router.add("PUT", "/device/{device}/removetag", Route(roles: roles) { call in
            let tag = try single(try APIService.jsonObject(call.request))
            return try await update(store, call) { device in device.tags.removeAll { $0 == tag } }
        })
        router.add("PUT", "/device/{device}/cleartags", Route(roles: roles) { call in try await update(store, call) { $0.tags = [] } })

        router.add("GET", "/device/{device}/userdata", Route(roles: roles) { call in
            .json(200, ["userData": .object(try await existing(store, call).userData.mapValues { .string($0) })])
        })
        router.add("PUT", "/device/{device}/userdata", Route(roles: roles) { call in
            try await update(store, call) { device in
                var data: [String: String] = [:]
                for (key, value) in try APIService.jsonObject(call.request) {
                    guard (1...55).contains(key.utf8.count), key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                        throw APIError(400, "invalid_input", "userData keys are 1 to 55 characters of A-Z a-z 0-9 . _ -, got \(key.debugDescription)", field: key)
                    }
                    switch value {
                    case .string(let text): data[key] = text
                    case .null: break
                    default: throw APIError(400, "invalid_input", "\(key): user data values are strings", field: key)
                    }
                }
                device.userData = data
            }
        })

        router.add("GET", "/device/{device}/dnd", Route(roles: roles) { call in
            let dnd = try await existing(store, call).dnd
            return .json(200, ["dnd": dnd.map { ["start": .string($0.start), "end": .string($0.end)] } ?? .null])
        })
        router.add("PUT", "/device/{device}/dnd", Route(roles: roles) { call in
            try await update(store, call) { device in
                let body = try APIService.jsonObject(call.request)
                guard case .string(let start)? = body["start"], case .string(let end)? = body["end"] else {
                    throw APIError(400, "invalid_input", "dnd: start and end are required, like \"23:00\" and \"07:00\"", field: "start")
                }
                // A window that ends where it starts is none.
                guard start != end else {
                    device.dnd = nil
                    return
                }
                do throws(QuietHoursError) { _ = try QuietHours(start: start, end: end) } catch {
                    throw APIError(400, "invalid_input", error.description, field: "start")
                }
                device.dnd = .init(start: start, end: end)
            }
        })
        router.add("PUT", "/device/{device}/cleardnd", Route(roles: roles) { call in try await update(store, call) { $0.dnd = nil } })
    }

    // MARK: - Storage

    private static func load(_ store: DeviceStore, app: String, _ id: String) async throws -> NotificareDevice? {
        guard let text = try await store.sdkDevices.get(app: app, deviceID: id) else { return nil }
        return try JSONDecoder().decode(NotificareDevice.self, from: Data(text.utf8))
    }

    private static func existing(_ store: DeviceStore, _ call: RouteCall) async throws -> NotificareDevice {
        guard let device = try await load(store, app: call.parameter("app"), call.parameter("device")) else {
            throw APIError(404, "not_found", "device not found")
        }
        return device
    }

    /// Loads, changes, saves and answers as the SDK expects.
    private static func update(_ store: DeviceStore, _ call: RouteCall, _ change: (inout NotificareDevice) throws -> Void) async throws -> HTTPResponse {
        var device = try await existing(store, call)
        try change(&device)
        try await save(store, app: call.parameter("app"), device, role: call.role)
        return .json(200, ["message": "device updated"])
    }

    /// The document, and for an APNs device its row (checked first: a refused device is not
    /// kept half-written). With the application secret the row is written under the same
    /// claim as the native registration's (`ApplicationClaim`): the SDK's device id is its
    /// token, so it brings its own token, and a token another device of the app holds (one
    /// registered through the native calls) is not taken from it.
    private static func save(_ store: DeviceStore, app: String, _ device: NotificareDevice, role: AppRole?) async throws {
        let environment = try await store.apps.get(app)?.environment ?? .production
        if let registration = try device.registration(environment: environment) {
            do {
                let validated = try Validation.device(registration, now: store.clock.wallMillis)
                if role == .application {
                    switch try await store.devices.register(app: app, validated: validated, claim: ApplicationClaim(previousDeviceID: nil)) {
                    case .success: break
                    case .failure(.tokenRegisteredElsewhere):
                        throw APIError(
                            409, "token_registered_elsewhere",
                            "deviceID: this token is registered to another device of the app; register it there, or with the master secret", field: "deviceID")
                    case .failure(.userChangeNeedsDevice): throw UserRoutes.changeNeedsDevice
                    }
                } else {
                    _ = try await store.devices.register(app: app, validated: validated)
                }
            } catch let error as StoreError {
                throw refusal(error)
            }
        }
        let document = String(decoding: try JSONEncoder().encode(device), as: UTF8.self)
        try await store.sdkDevices.put(app: app, deviceID: device.deviceID, document: document, user: device.userID, now: store.clock.wallMillis)
    }

    /// A token the store refuses is the SDK's `deviceID`.
    private static func refusal(_ error: StoreError) -> any Error {
        guard error.code == .invalidInput, error.message.hasPrefix("device token") else { return error }
        return APIError(400, "invalid_input", "deviceID: an APNS device's id is its token in hex; \(error.message)", field: "deviceID")
    }

    private static func remove(_ store: DeviceStore, app: String, _ device: NotificareDevice) async throws {
        _ = try await store.sdkDevices.delete(app: app, deviceID: device.deviceID)
        if device.isAPNs { _ = try await store.devices.unregister(app: app, deviceID: device.deviceID) }
    }

    // MARK: - Bodies


    private static func single(_ body: [String: JSONValue]) throws -> String {
        guard case .string(let tag)? = body["tag"] else { throw APIError(400, "invalid_input", "tag: required, a string", field: "tag") }
        return tag
    }

    private static func strings(_ value: JSONValue?, field: String) throws -> [String] {
        guard case .array(let items)? = value else { throw APIError(400, "invalid_input", "\(field): expected an array of strings", field: field) }
        return try items.map { item in
            guard case .string(let text) = item else { throw APIError(400, "invalid_input", "\(field): expected an array of strings", field: field) }
            return text
        }
    }
}
