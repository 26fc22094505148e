import PushfanMessages

/// An app's users: a user is an id the app gives its devices (their `user_id` attribute,
/// set by registration, import, Notificare's `userID` or the link call) and, optionally,
/// aliases by which other systems know the same person (`crm_id`, `email`…), each alias
/// value naming one user of the app. A user exists while a device names it or it has an
/// alias; there is no other row for it.
package struct Users: Sendable {
    let executor: StoreExecutor

    /// The device attribute that names its user.
    package static let attribute = "user_id"
    package static let maxIDBytes = 256
    package static let maxAliases = 8
    /// A user's devices are listed up to this many (an app's user with more is a bug there).
    package static let maxDevices = 100

    package struct User: Sendable, Equatable {
        package let id: String
        package let aliases: [String: String]
        /// Every status: an invalid or unregistered device is still the user's, and shown.
        package let devices: [DeviceRecord]

        package init(id: String, aliases: [String: String], devices: [DeviceRecord]) { (self.id, self.aliases, self.devices) = (id, aliases, devices) }
    }

    /// 1-256 bytes without control characters.
    package static func checkID(_ id: String, field: String) throws(StoreError) {
        guard (1...maxIDBytes).contains(id.utf8.count), !Validation.hasControlCharacters(id) else {
            throw StoreError.invalidInput("\(field): a user id is 1-\(maxIDBytes) bytes without control characters, got '\(Validation.clip(id))'")
        }
    }

    /// Names of 1-32 characters a-z 0-9 _, values like user ids, at most `maxAliases`.
    package static func checkAliases(_ aliases: [String: String]) throws(StoreError) {
        guard aliases.count <= maxAliases else { throw StoreError.invalidInput("aliases: at most \(maxAliases) per user, got \(aliases.count)") }
        for (name, value) in aliases.sorted(by: { $0.key < $1.key }) {
            guard (1...32).contains(name.utf8.count), name.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }) else {
                throw StoreError.invalidInput("aliases: an alias name is 1-32 characters of a-z 0-9 _, got '\(Validation.clip(name))'")
            }
            try checkID(value, field: "aliases.\(name)")
        }
    }

    /// The user with its aliases and its first `maxDevices` devices; nil when no device names
    /// it and it has no alias.
    package func get(app: String, id: String) async throws(StoreError) -> User? {
        try await user(app: app, id: id, limit: " LIMIT \(Self.maxDevices)")
    }

    /// The user with every device however many, for data-protection requests (an export, the
    /// tombstones of an erasure); nil as for `get`.
    package func whole(app: String, id: String) async throws(StoreError) -> User? {
        try await user(app: app, id: id, limit: "")
    }

    private func user(app: String, id: String, limit: SQLStatement) async throws(StoreError) -> User? {
        try await executor.run { connection throws(StoreError) in
            let aliases = try Self.aliases(connection, app: app, user: id)
            let devices = try DeviceDirectory.records(connection, "app = \(app) AND \(userOf: "devices") = \(id) ORDER BY row_key" + limit)
            guard !aliases.isEmpty || !devices.isEmpty else { return nil }
            return User(id: id, aliases: aliases, devices: devices)
        }
    }

    /// One device of a message's recipients: enough to send to it and to say why not.
    package struct Recipient: Sendable, Equatable {
        package let deviceID: String
        package let rowKey: Int64
        package let status: DeviceStatus
        /// Whether it holds an active token of the kind the push goes to (always, for an
        /// alert push: its alert token is the device row's own).
        package let hasToken: Bool

        package init(deviceID: String, rowKey: Int64, status: DeviceStatus, hasToken: Bool = true) {
            (self.deviceID, self.rowKey, self.status, self.hasToken) = (deviceID, rowKey, status, hasToken)
        }
    }

    /// A transactional message's recipients, looked up in one read per kind and chunk: each
    /// user's devices (every status, by the `devices_by_user` index), the user each alias
    /// names, and each listed device of the app. What the app does not have is absent.
    package struct Resolution: Sendable, Equatable {
        package var userDevices: [String: [Recipient]] = [:]
        /// Alias name → value → user.
        package var aliasUsers: [String: [String: String]] = [:]
        package var devices: [String: Recipient] = [:]

        package init() {}
    }

    /// `tokens` is the push's token selection (`Campaign.tokenSelection`), for `hasToken`.
    package func resolve(
        app: String, users: [String], aliases: [String: [String]], devices: [String], tokens: TokenSelection?, now: Int64
    ) async throws(StoreError) -> Resolution {
        let backend = executor.backend
        let holds = AudienceReader.holdsToken(tokens, now: now)
        return try await executor.run { connection throws(StoreError) in
            var resolution = Resolution()
            for (name, values) in aliases {
                for chunk in StoreExecutor.chunks(values) {
                    try connection.query(
                        "SELECT value, user_id FROM user_aliases WHERE app = \(app) AND name = \(name) AND value"
                            + backend.isIn(chunk.map { .text($0) }, type: "text")
                    ) { row in resolution.aliasUsers[name, default: [:]][row.text(0) ?? ""] = row.text(1) ?? "" }
                }
            }
            let named = Array(Set(users + resolution.aliasUsers.values.flatMap(\.values)))
            for chunk in StoreExecutor.chunks(named) {
                try connection.query(
                    "SELECT \(userOf: "d"), d.device_id, d.row_key, d.status, " + holds + " FROM devices d WHERE d.app = \(app) AND \(userOf: "d")"
                        + backend.isIn(chunk.map { .text($0) }, type: "text") + " ORDER BY d.row_key"
                ) { row in
                    resolution.userDevices[row.text(0) ?? "", default: []].append(Self.recipient(row, from: 1))
                }
            }
            for chunk in StoreExecutor.chunks(devices) {
                try connection.query(
                    "SELECT d.device_id, d.row_key, d.status, " + holds + " FROM devices d WHERE d.app = \(app) AND d.device_id" + backend.isIn(chunk.map { .text($0) }, type: "text")
                ) { row in
                    let recipient = Self.recipient(row, from: 0)
                    resolution.devices[recipient.deviceID] = recipient
                }
            }
            return resolution
        }
    }

    private static func recipient(_ row: any SQLRow, from column: Int) -> Recipient {
        Recipient(
            deviceID: row.text(column) ?? "", rowKey: row.int(column + 1) ?? 0,
            status: DeviceStatus(rawValue: row.text(column + 2) ?? "") ?? .unregistered, hasToken: row.int(column + 3) == 1)
    }

    /// The user an alias names, nil when none does.
    package func user(app: String, alias name: String, value: String) async throws(StoreError) -> String? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT user_id FROM user_aliases WHERE app = \(app) AND name = \(name) AND value = \(value)") { $0.text(0) }.flatMap { $0 }
        }
    }

    /// Replaces the user's aliases with `aliases` (empty: removes them). An alias value
    /// another user of the app holds is a conflict naming it, and nothing changes.
    package func setAliases(app: String, user: String, _ aliases: [String: String], now: Int64) async throws(StoreError) {
        try Self.checkID(user, field: "user")
        try Self.checkAliases(aliases)
        try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                try StoreExecutor.requireApp(connection, app)
                try connection.execute("DELETE FROM user_aliases WHERE app = \(app) AND user_id = \(user)")
                for (name, value) in aliases.sorted(by: { $0.key < $1.key }) {
                    // The key decides between two callers giving the same value at once.
                    let inserted = try connection.execute("""
                        INSERT INTO user_aliases (app, name, value, user_id, created_at) VALUES (\(app), \(name), \(value), \(user), \(now))
                        ON CONFLICT (app, name, value) DO NOTHING
                        """)
                    guard inserted == 1 else { throw StoreError.conflict("aliases.\(name): '\(Validation.clip(value))' is another user's \(name)") }
                }
            }
        }
    }

    static func aliases(_ connection: any SQLConnection, app: String, user: String) throws(StoreError) -> [String: String] {
        let rows = try connection.queryAll("SELECT name, value FROM user_aliases WHERE app = \(app) AND user_id = \(user)") { ($0.text(0) ?? "", $0.text(1) ?? "") }
        return Dictionary(rows, uniquingKeysWith: { first, _ in first })
    }
}
