import PushfanAPNsModel
import PushfanMessages
import PushfanSupport

/// A device's tokens of kinds other than alert (VoIP, Live Activity, widgets…), each with its
/// environment, times and state. The alert token stays the device row's own (`devices.token`):
/// every device has one, and expansion of alert campaigns reads no other table.
///
/// APNs issues one token per kind, and a token answers only pushes of its kind (another
/// kind's topic gets `DeviceTokenNotForTopic`), so a token here is found by its kind and, for
/// Live Activities, its scope: the attributes type of a push-to-start token, the activity of
/// an update token. A rejection invalidates the one token that was sent (`mark`).
package struct DeviceTokens: Sendable {
    let executor: StoreExecutor

    /// Adds or replaces the device's token of `token.kind` and `token.scope`; true when it
    /// is new. The device must be registered (its alert registration made it). A token without
    /// an environment takes the device's. Registering the same token again refreshes its
    /// last-seen time and makes it active again.
    package func register(app: String, deviceID: String, _ token: KindToken, now: Int64) async throws(StoreError) -> Bool {
        let checked = try token.validated()
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Bool in
                let found: (Int64, String)?? = try connection.queryOne(
                    "SELECT row_key, environment FROM devices WHERE app = \(app) AND device_id = \(deviceID) AND status <> 'unregistered'"
                ) { row in row.int(0).map { ($0, row.text(1) ?? "production") } }
                guard let (rowKey, deviceEnvironment) = found.flatMap({ $0 }) else { throw StoreError.notFound("app \(app) has no device \(deviceID)") }
                let known: Int64?? = try connection.queryOne(
                    "SELECT 1 FROM device_tokens WHERE row_key = \(rowKey) AND kind = \(checked.kind.rawValue) AND scope = \(checked.scope)") { $0.int(0) }
                try Self.write(connection, app: app, rowKey: rowKey, deviceEnvironment: deviceEnvironment, checked, now: now)
                return known == nil
            }
        }
    }

    /// Inside the caller's transaction: writes a checked token for the device at `rowKey`
    /// (a registration or import writes its device's tokens with it), replacing the one of its
    /// kind and scope and making it active.
    static func write(
        _ connection: any SQLConnection, app: String, rowKey: Int64, deviceEnvironment: String, _ token: KindToken, now: Int64
    ) throws(StoreError) {
        try connection.execute("""
            INSERT INTO device_tokens (app, row_key, kind, scope, token, environment, created_at, last_seen_at, expires_at, status, attributes_type, attributes)
            VALUES (\(app), \(rowKey), \(token.kind.rawValue), \(token.scope), \(token.token), \(token.environment?.rawValue ?? deviceEnvironment),
                    \(now), \(now), \(.optional(token.expiresAt)), 'active', \(.optional(token.storedAttributesType)), \(.optional(token.attributesJSON)))
            ON CONFLICT (row_key, kind, scope) DO UPDATE SET token = excluded.token, environment = excluded.environment,
                last_seen_at = excluded.last_seen_at, expires_at = excluded.expires_at, status = 'active', invalid_reason = NULL, invalid_at = NULL,
                attributes_type = excluded.attributes_type, attributes = excluded.attributes
            """)
    }

    /// Writes the tokens of devices just upserted, by the row keys the upsert returned.
    static func write(_ connection: any SQLConnection, app: String, devices: [ValidatedDevice], rowKeys: [String: Int64], now: Int64) throws(StoreError) {
        for device in devices where !device.tokens.isEmpty {
            guard let rowKey = rowKeys[device.deviceID] else { throw StoreError.database("the upsert returned no row key for \(device.deviceID)") }
            for token in device.tokens {
                try write(connection, app: app, rowKey: rowKey, deviceEnvironment: device.environment.rawValue, token, now: now)
            }
        }
    }

    /// Removes the device's token of `kind` and `scope` (an activity that ended, a VoIP
    /// registration the app dropped); false when there was none.
    @discardableResult
    package func remove(app: String, deviceID: String, kind: APNsTokenKind, scope: String = "") async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                DELETE FROM device_tokens WHERE app = \(app) AND kind = \(kind.rawValue) AND scope = \(scope)
                  AND row_key = (SELECT row_key FROM devices WHERE app = \(app) AND device_id = \(deviceID))
                """) > 0
        }
    }

    /// The device's tokens of every kind but alert, by kind and scope.
    package func list(app: String, deviceID: String) async throws(StoreError) -> [StoredKindToken] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("""
                SELECT \(raw: Self.columns) FROM device_tokens t JOIN devices d ON d.row_key = t.row_key
                WHERE d.app = \(app) AND d.device_id = \(deviceID) ORDER BY t.kind, t.scope
                """) { row throws(StoreError) in try Self.stored(row) }
        }
    }

    /// The columns `stored` reads, of `device_tokens t`.
    static let columns = "t.kind, t.scope, t.token, t.environment, t.created_at, t.last_seen_at, t.expires_at, t.status, t.invalid_reason, t.attributes_type, t.attributes"

    /// A token as `columns` read it, from column `start` on.
    static func stored(_ row: any SQLRow, start: Int = 0) throws(StoreError) -> StoredKindToken {
        guard let kind = row.text(start).flatMap(APNsTokenKind.init(rawValue:)) else {
            throw StoreError.database("a device token of the unknown kind '\(row.text(start) ?? "")'")
        }
        var token = KindToken(
            kind: kind, token: row.text(start + 2) ?? "", environment: row.text(start + 3, equals: "sandbox") ? .sandbox : .production,
            scope: row.text(start + 1) ?? "", expiresAt: row.int(start + 6))
        if kind == .liveActivityUpdate {
            token.attributesType = row.text(start + 9)
            token.attributes = DeviceDirectory.attributes(row.text(start + 10)).compactMapValues(\.stringValue)
        }
        return StoredKindToken(
            token: token, createdAt: row.int(start + 4) ?? 0, lastSeenAt: row.int(start + 5) ?? 0, status: row.text(start + 7) ?? "active",
            invalidReason: row.text(start + 8))
    }

    /// Whether any device of the app holds an active token of a Live Activity attributes
    /// type: a push-to-start token of it (`kind` start) or an update token registered with it
    /// (`kind` update). A campaign naming a type nobody registered is a mistake to refuse.
    package func anyHolder(app: String, kind: APNsTokenKind, attributesType: String) async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("""
                SELECT 1 FROM device_tokens WHERE app = \(app) AND kind = \(kind.rawValue) AND attributes_type = \(attributesType) AND status = 'active' LIMIT 1
                """) { $0.int(0) } != nil
        }
    }

    /// Applies APNs' verdicts on tokens of other kinds than alert, inside the caller's
    /// transaction: the one token sent is marked, never the device or its other tokens. An
    /// expired Live Activity update token (410 for a finished activity) is `retired`, not
    /// invalid: the activity ended, the device is fine. Returns how many tokens changed.
    static func mark(_ connection: any SQLConnection, app: String, _ marks: [(mark: TokenMark, token: String)], now: Int64) throws(StoreError) -> Int {
        var changed = 0
        for (mark, token) in marks where mark.tokenKind != .alert {
            var at = now
            if case .unregistered(let timestamp) = mark.kind { at = timestamp }
            let status = mark.tokenKind == .liveActivityUpdate && mark.isUnregistered ? "retired" : "invalid"
            var update: SQLStatement = """
                UPDATE device_tokens SET status = \(status), invalid_reason = \(mark.reason), invalid_at = \(at)
                WHERE app = \(app) AND kind = \(mark.tokenKind.rawValue) AND environment = \(mark.environment.rawValue) AND token = \(token) AND status = 'active'
                """
            // A 410 counts only if the token was not registered again after APNs' moment.
            if case .unregistered = mark.kind { update.append(" AND last_seen_at <= \(at)") }
            changed += try connection.execute(update)
        }
        return changed
    }
}

/// Which of each device's tokens a campaign's pages carry: the kind its push type needs and,
/// for Live Activities, the attributes type or activity.
package struct TokenSelection: Sendable, Equatable {
    package var kind: APNsTokenKind
    package var scope: String
    /// Only devices that hold such a token are the audience (an activity's update tokens:
    /// the devices following it), rather than every device, those without one skipped.
    package var holdersOnly: Bool
    /// Update tokens of any activity matching this, in place of one `scope`: a device
    /// following several such activities gets the push once, for the lowest activity id.
    package var activities: ActivityFilter?

    package init(kind: APNsTokenKind, scope: String = "", holdersOnly: Bool = false) {
        (self.kind, self.scope, self.holdersOnly) = (kind, scope, holdersOnly)
    }

    /// The devices following any running activity `filter` matches.
    package init(activities filter: ActivityFilter) {
        (kind, scope, holdersOnly, activities) = (.liveActivityUpdate, "", true, filter)
    }
}

extension Campaign {
    /// The tokens its pages carry in place of the alert token: nil for alert and background
    /// pushes; for other push types each device's token of that kind, for a Live Activity
    /// start the push-to-start token of its `aps.attributes-type`, and for an update or end
    /// only the devices holding an update token of the activity its audience names.
    package var tokenSelection: TokenSelection? {
        switch notification.tokenKind {
        case .alert: nil
        case .liveActivityStart: TokenSelection(kind: .liveActivityStart, scope: notification.aps?["attributes-type"]?.stringValue ?? "")
        case .liveActivityUpdate:
            switch audience {
            case .activity(let id): TokenSelection(kind: .liveActivityUpdate, scope: id, holdersOnly: true)
            case .activities(let filter): TokenSelection(activities: filter)
            default: TokenSelection(kind: .liveActivityUpdate)
            }
        case let kind: TokenSelection(kind: kind)
        }
    }
}

/// A token of one kind as a device registers it.
package struct KindToken: Sendable, Equatable {
    package var kind: APNsTokenKind
    /// Hex as APNs issued it (any case; kept lowercase).
    package var token: String
    /// Nil when registering: the device's own.
    package var environment: APNsEnvironment?
    /// Which of the kind's tokens: a push-to-start token's attributes type, an update
    /// token's activity id; "" for every other kind.
    package var scope: String
    /// When the token stops being worth sending to (ms): a Live Activity's end or stale
    /// date. Nil: until APNs says otherwise.
    package var expiresAt: Int64?
    /// An update token's activity's attributes type and the attributes a campaign can pick
    /// it by (`ActivityFilter`): the static attributes of the activity, as strings.
    package var attributesType: String?
    package var attributes: [String: String] = [:]

    package init(kind: APNsTokenKind, token: String, environment: APNsEnvironment? = nil, scope: String = "", expiresAt: Int64? = nil) {
        (self.kind, self.token, self.environment, self.scope, self.expiresAt) = (kind, token, environment, scope, expiresAt)
    }

    /// The attributes type the store files the token under: a push-to-start token's scope,
    /// an update token's own.
    var storedAttributesType: String? {
        switch kind {
        case .liveActivityStart: scope
        case .liveActivityUpdate: attributesType
        default: nil
        }
    }

    /// The attributes as stored: a JSON object, nil when there are none.
    var attributesJSON: String? {
        attributes.isEmpty ? nil : JSONValue.object(attributes.mapValues(JSONValue.string)).compactJSON
    }

    /// The scope a kind needs: Live Activity tokens name their attributes type or activity,
    /// other kinds none.
    package static func scopeName(of kind: APNsTokenKind) -> String? {
        switch kind {
        case .liveActivityStart: "attributes_type"
        case .liveActivityUpdate: "activity_id"
        default: nil
        }
    }

    /// A token of `kind` from a JSON object's members, as the API's `…/tokens/{kind}` and an
    /// import line's `tokens` give it: `token`, `environment`, `expires_at` and the kind's
    /// scope (`attributes_type`, `activity_id`); any other member is refused. Every refusal
    /// starts with its field, after `field` ("tokens[2]." in an import line). Not yet checked:
    /// `validated` does that when it is written.
    package static func read(_ members: [String: JSONValue], kind: APNsTokenKind, field: String = "") throws(StoreError) -> KindToken {
        func text(_ name: String) throws(StoreError) -> String? {
            switch members[name] {
            case nil, .null?: return nil
            case .string(let value)?: return value
            default: throw StoreError.invalidInput("\(field)\(name): wrong type, expected a string")
            }
        }
        let scopeName = scopeName(of: kind)
        let fields = ["token", "environment", "expires_at"] + (scopeName.map { [$0] } ?? []) + (kind == .liveActivityUpdate ? ["attributes_type", "attributes"] : [])
        for name in members.keys.sorted() where !fields.contains(name) {
            throw StoreError.invalidInput("\(field)\(name): not a field of a \(kind.rawValue) token (fields: \(fields.sorted().joined(separator: ", ")))")
        }
        guard let hex = try text("token"), !hex.isEmpty else { throw StoreError.invalidInput("\(field)token: required") }
        var token = KindToken(kind: kind, token: hex)
        if let scopeName {
            guard let scope = try text(scopeName), !scope.isEmpty else { throw StoreError.invalidInput("\(field)\(scopeName): required for a \(kind.rawValue) token") }
            token.scope = scope
        }
        if let environment = try text("environment") {
            guard let known = APNsEnvironment(rawValue: environment) else {
                throw StoreError.invalidInput("\(field)environment: production or sandbox, got \(environment.debugDescription)")
            }
            token.environment = known
        }
        switch members["expires_at"] {
        case nil, .null?: break
        case .int(let millis)?: token.expiresAt = millis
        default: throw StoreError.invalidInput("\(field)expires_at: wrong type, expected milliseconds since the epoch")
        }
        token.attributesType = try text("attributes_type")
        switch members["attributes"] {
        case nil, .null?: break
        case .object(let attributes)?:
            for (name, value) in attributes.sorted(by: { $0.key < $1.key }) {
                guard let text = value.stringValue else {
                    throw StoreError.invalidInput("\(field)attributes.\(name): wrong type, expected a string (an activity's attributes are matched as text)")
                }
                token.attributes[name] = text
            }
        default: throw StoreError.invalidInput("\(field)attributes: wrong type, expected an object of strings")
        }
        return token
    }

    /// The members `read` takes back: the token as a registration or an import line gives it
    /// (without `kind`, which the caller places).
    package var members: [String: JSONValue] {
        var members: [String: JSONValue] = ["token": .string(token)]
        if let environment { members["environment"] = .string(environment.rawValue) }
        if let expiresAt { members["expires_at"] = .int(expiresAt) }
        if let name = Self.scopeName(of: kind) { members[name] = .string(scope) }
        if kind == .liveActivityUpdate, let attributesType { members["attributes_type"] = .string(attributesType) }
        if !attributes.isEmpty { members["attributes"] = .object(attributes.mapValues(JSONValue.string)) }
        return members
    }

    /// Checked and normalised (token lowercase hex of even length; the scope as the kind
    /// wants it), or the reason naming the field.
    func validated() throws(StoreError) -> KindToken {
        guard kind != .alert else {
            throw StoreError.invalidInput("kind: the alert token is the device's own (register the device with it)")
        }
        var checked = self
        do { checked.token = try DeviceToken(token).hex } catch {
            throw StoreError.invalidInput("token: \(error)")
        }
        if let name = Self.scopeName(of: kind) {
            guard Rules.isIdentifier(scope) else {
                throw StoreError.invalidInput("\(name): a \(kind.rawValue) token needs its \(name), 1 to 128 characters of A-Z a-z 0-9 . _ : -")
            }
        } else if !scope.isEmpty {
            throw StoreError.invalidInput("scope: a \(kind.rawValue) token has no attributes type or activity id")
        }
        if let attributesType, !Rules.isIdentifier(attributesType) {
            throw StoreError.invalidInput("attributes_type: 1 to 128 characters of A-Z a-z 0-9 . _ : -")
        }
        if !attributes.isEmpty && attributesType == nil {
            throw StoreError.invalidInput("attributes: an activity's attributes need its attributes_type")
        }
        do { try ActivityFilter.validate(attributes, field: "attributes") } catch { throw StoreError.invalidInput(error.description) }
        if let expiresAt, expiresAt < 100_000_000_000 {
            throw StoreError.invalidInput("expires_at: milliseconds since the epoch, got \(expiresAt) (seconds?)")
        }
        return checked
    }
}

/// A registered token of another kind than alert, with its times and state.
package struct StoredKindToken: Sendable, Equatable {
    package let token: KindToken
    package let createdAt: Int64
    package let lastSeenAt: Int64
    /// `active`, `invalid` (APNs refused it) or `retired` (its Live Activity ended).
    package let status: String
    package let invalidReason: String?
}
