import PushfanAPNsModel
import PushfanMessages
import PushfanStore
import PushfanSupport

/// The recipients of a transactional message as the caller named them, and the pure
/// decisions on them: the request's shape checked, then, once the store has resolved them
/// (`Users.resolve`), which devices get the message and what the answer says of each
/// recipient. A recipient the app does not know is reported, not a failure of the message.
struct MessageRecipients: Equatable {
    static let maxRecipients = 1_000

    struct Alias: Equatable {
        let name: String
        let value: String
    }

    var users: [String] = []
    var aliases: [Alias] = []
    var devices: [String] = []

    var count: Int { users.count + aliases.count + devices.count }

    /// Alias values by name, as the store looks them up.
    var aliasValues: [String: [String]] { Dictionary(grouping: aliases, by: \.name).mapValues { $0.map(\.value) } }

    /// `{"users": [id…], "aliases": {name: [value…]}, "devices": [id…]}`, 1 to
    /// `maxRecipients` in all.
    static func parse(_ value: JSONValue?) throws -> MessageRecipients {
        guard case .object(let members) = value else {
            throw APIError(400, "invalid_input", "recipients: an object of users, aliases and devices is required", field: "recipients")
        }
        if let unknown = members.keys.sorted().first(where: { !["users", "aliases", "devices"].contains($0) }) {
            throw APIError(400, "invalid_input", "recipients.\(unknown): not a kind of recipient (users, aliases, devices)", field: "recipients.\(unknown)")
        }
        var recipients = MessageRecipients()
        recipients.users = try strings(members["users"], field: "recipients.users") { id, field throws(StoreError) in try Users.checkID(id, field: field) }
        recipients.devices = try strings(members["devices"], field: "recipients.devices") { id, _ throws(StoreError) in try Validation.deviceID(id) }
        if let aliases = members["aliases"] {
            guard case .object(let names) = aliases else {
                throw APIError(400, "invalid_input", "recipients.aliases: an object of alias name to values is required", field: "recipients.aliases")
            }
            for (name, values) in names.sorted(by: { $0.key < $1.key }) {
                let field = "recipients.aliases.\(name)"
                let checked = try strings(values, field: field) { value, _ throws(StoreError) in try Users.checkAliases([name: value]) }
                recipients.aliases += checked.map { Alias(name: name, value: $0) }
            }
        }
        guard recipients.count > 0 else {
            throw APIError(400, "no_recipients", "recipients: name at least one user, alias or device", field: "recipients")
        }
        guard recipients.count <= maxRecipients else {
            throw APIError(
                400, "too_many_recipients", "recipients: at most \(maxRecipients) users, aliases and devices in all, got \(recipients.count); send more messages",
                field: "recipients")
        }
        return recipients
    }

    private static func strings(
        _ value: JSONValue?, field: String, check: (String, String) throws(StoreError) -> Void
    ) throws -> [String] {
        guard let value else { return [] }
        guard case .array(let items) = value else { throw APIError(400, "invalid_input", "\(field): an array of strings is required", field: field) }
        return try items.enumerated().map { index, item in
            let at = "\(field)[\(index)]"
            guard case .string(let text) = item else { throw APIError(400, "invalid_input", "\(at): a string is required, got \(item.compactJSON)", field: at) }
            do throws(StoreError) { try check(text, at) } catch {
                throw APIError(400, "invalid_input", error.message.hasPrefix(at) ? error.message : "\(at): \(error.message)", field: at)
            }
            return text
        }
    }

    /// Who gets the message: each device a push to `tokenKind` reaches once (an active one,
    /// or for a kind other than alert an invalid one too: `DeviceStatus.isReached(by:)`; and
    /// holding a token of that kind; row keys ascending, ids alongside), and one report per
    /// recipient in the order given.
    struct Plan: Equatable {
        var rowKeys: [Int64] = []
        var deviceIDs: [String] = []
        var report: [JSONValue] = []
    }

    func plan(_ resolution: Users.Resolution, tokenKind: APNsTokenKind) -> Plan {
        var plan = Plan()
        var chosen: [Int64: String] = [:]
        func entry(_ named: [String: JSONValue], _ devices: [Users.Recipient]) -> JSONValue {
            var entry = named
            let isSent = { (device: Users.Recipient) in device.status.isReached(by: tokenKind) && device.hasToken }
            let (reached, notSent) = (devices.filter(isSent), devices.filter { !isSent($0) })
            entry["devices"] = .array(reached.map { .string($0.deviceID) })
            if !notSent.isEmpty {
                entry["not_sent"] = .array(notSent.map { device in
                    var why: [String: JSONValue] = ["device": .string(device.deviceID), "status": .string(device.status.rawValue)]
                    if device.status.isReached(by: tokenKind) { why["reason"] = .string(APNsTokenKind.missingTokenReason) }
                    return .object(why)
                })
            }
            for device in reached { chosen[device.rowKey] = device.deviceID }
            return .object(entry)
        }
        for user in users {
            guard let devices = resolution.userDevices[user], !devices.isEmpty else {
                plan.report.append(["user": .string(user), "error": "unknown_user", "message": .string("no device of the app names user \(user)")])
                continue
            }
            plan.report.append(entry(["user": .string(user)], devices))
        }
        for alias in aliases {
            let named: [String: JSONValue] = ["alias": .object([alias.name: .string(alias.value)])]
            guard let user = resolution.aliasUsers[alias.name]?[alias.value] else {
                plan.report.append(.object(named.merging(["error": "unknown_alias", "message": .string("no user of the app has \(alias.name) \(alias.value)")]) { $1 }))
                continue
            }
            plan.report.append(entry(named.merging(["user": .string(user)]) { $1 }, resolution.userDevices[user] ?? []))
        }
        for device in devices {
            guard let found = resolution.devices[device] else {
                plan.report.append(["device": .string(device), "error": "unknown_device", "message": .string("the app has no device \(device)")])
                continue
            }
            plan.report.append(entry(["device": .string(device)], [found]))
        }
        for (rowKey, id) in chosen.sorted(by: { $0.key < $1.key }) {
            plan.rowKeys.append(rowKey)
            plan.deviceIDs.append(id)
        }
        return plan
    }
}
