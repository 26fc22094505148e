import Foundation
import PushfanMessages
import PushfanSupport

/// What the store keeps about a person, for data-protection requests: read whole for an
/// export, or erased. An erasure removes everything about a user's devices (or one device)
/// in one transaction.
///
/// Removed: the device rows (with their attributes, the alert token and quiet hours), their
/// tags and tokens of other kinds, their ledger rows in every campaign of the app, their
/// frequency-cap pushes, the engagement rows that name them, the SDK's documents of them
/// (and every other SDK document naming the user: temporary devices', and those of devices
/// since registered to another user) and the user's aliases. Answers kept for `Idempotency-Key` replays that name one of them
/// (a message's recipients) are redacted, not removed, so a retry still cannot send twice.
/// Counts stay: campaign totals, engagement tallies and dashboard tallies are numbers about
/// campaigns, not about a person. A quiet-hours hold's list of row keys may keep the number
/// a removed device had until the hold is sent (nothing of it is sent: the row is gone).
package struct PersonalData: Sendable {
    let executor: StoreExecutor

    /// What an erasure removed: the user (when one was erased) and its devices' ids.
    package struct Erased: Sendable, Equatable {
        package let user: String?
        package let devices: [String]
    }

    /// The redacted `Idempotency-Key` answer.
    static let redactedAnswer = #"{"erased":"this answer named a device or user that has since been erased"}"#

    /// Erases the user: its devices of every status, its aliases; nil when the app has no
    /// such user (no device names it and it has no alias).
    package func eraseUser(app: String, id: String) async throws(StoreError) -> Erased? {
        try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Erased? in
                let devices = try Self.devices(connection, "d.app = \(app) AND \(userOf: "d") = \(id)")
                let aliases = try connection.execute("DELETE FROM user_aliases WHERE app = \(app) AND user_id = \(id)")
                // A temporary SDK device has no row to name its user, and a device since
                // registered to another user has a row naming that one: only the document
                // names this user.
                let documents = try connection.execute("DELETE FROM sdk_devices WHERE app = \(app) AND " + SDKDeviceDocuments.onlyNaming(id))
                guard !devices.isEmpty || aliases > 0 || documents > 0 else { return nil }
                try Self.remove(connection, executor.backend, app: app, devices, user: id)
                return Erased(user: id, devices: devices.map(\.id))
            }
        }
    }

    /// Erases one device of any status; nil when the app has no such device.
    package func eraseDevice(app: String, id: String) async throws(StoreError) -> Erased? {
        try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Erased? in
                let devices = try Self.devices(connection, "d.app = \(app) AND d.device_id = \(id)")
                guard !devices.isEmpty else { return nil }
                try Self.remove(connection, executor.backend, app: app, devices, user: nil)
                return Erased(user: nil, devices: devices.map(\.id))
            }
        }
    }

    /// Everything kept about one device beyond its row: for an export.
    package struct DeviceData: Sendable {
        package let device: DeviceRecord
        package var tokens: [StoredKindToken] = []
        /// Its ledger rows: campaign id, state, attempts, APNs' reason, when it ended.
        package var deliveries: [(campaign: String, state: String, attempts: Int64, reason: String?, finishedAt: Int64?)] = []
        /// Pushes counted under frequency caps: campaign id, when.
        package var pushes: [(campaign: String, at: Int64)] = []
        /// Engagement it was counted in: campaign id, variant, kind, detail.
        package var engagement: [(campaign: String, variant: String, kind: String, detail: String)] = []
        /// The document a client SDK keeps of it (the Notificare-compatible calls).
        package var sdkDocument: String?
    }

    /// What an export holds: the user's aliases, every device with what is kept about it, and
    /// the other SDK documents that name the user (`SDKDeviceDocuments.onlyNaming`): its
    /// temporary devices', and those of devices since registered to another user.
    package struct Export: Sendable {
        package let aliases: [String: String]
        package let devices: [DeviceData]
        package let temporaryDevices: [(deviceID: String, document: String)]
    }

    /// Everything kept about a user; nil when the app has no such user.
    package func export(app: String, user id: String) async throws(StoreError) -> Export? {
        let temporary = try await executor.run { connection throws(StoreError) in
            try connection.queryAll(
                "SELECT device_id, document FROM sdk_devices WHERE app = \(app) AND " + SDKDeviceDocuments.onlyNaming(id) + " ORDER BY device_id"
            ) { row in (deviceID: row.text(0) ?? "", document: row.text(1) ?? "") }
        }
        guard let user = try await Users(executor: executor).whole(app: app, id: id) else {
            return temporary.isEmpty ? nil : Export(aliases: [:], devices: [], temporaryDevices: temporary)
        }
        let tokens = DeviceTokens(executor: executor)
        var devices: [DeviceData] = []
        for device in user.devices {
            var data = DeviceData(device: device)
            data.tokens = try await tokens.list(app: app, deviceID: device.deviceID)
            let rowKey = device.rowKey, deviceID = device.deviceID
            let kept = try await executor.run { connection throws(StoreError) in
                let campaigns: SQLStatement = "SELECT id FROM campaigns WHERE app = \(app)"
                let deliveries = try connection.queryAll(
                    "SELECT campaign, state, attempts, reason, finished_at FROM deliveries WHERE campaign IN (" + campaigns
                        + ") AND row_key = \(rowKey) ORDER BY claimed_at, campaign"
                ) { row throws(StoreError) in (campaign: try row.campaign(0).id, state: row.text(1) ?? "", attempts: row.int(2) ?? 0, reason: row.text(3), finishedAt: row.int(4)) }
                let pushes = try connection.queryAll("SELECT campaign, sent_at FROM frequency_sends WHERE row_key = \(rowKey) ORDER BY sent_at") { row throws(StoreError) in
                    (campaign: try row.campaign(0).id, at: row.int(1) ?? 0)
                }
                let engagement = try connection.queryAll(
                    """
                    SELECT g.campaign, g.variant, g.kind, g.detail FROM engagement_groups g JOIN engagement_group_devices x ON x.group_id = g.id
                    WHERE g.campaign IN (
                    """ + campaigns + ") AND x.row_key = \(rowKey) ORDER BY g.campaign, g.kind"
                ) { row throws(StoreError) in (campaign: try row.campaign(0).id, variant: row.text(1) ?? "", kind: row.text(2) ?? "", detail: row.text(3) ?? "") }
                let document = try connection.queryOne("SELECT document FROM sdk_devices WHERE app = \(app) AND device_id = \(deviceID)") { $0.text(0) } ?? nil
                return (deliveries, pushes, engagement, document)
            }
            (data.deliveries, data.pushes, data.engagement, data.sdkDocument) = kept
            devices.append(data)
        }
        return Export(aliases: user.aliases, devices: devices, temporaryDevices: temporary)
    }

    private struct Device {
        let rowKey: Int64
        let id: String
    }

    private static func devices(_ connection: any SQLConnection, _ condition: SQLStatement) throws(StoreError) -> [Device] {
        try connection.queryAll("SELECT d.row_key, d.device_id FROM devices d WHERE " + condition + " ORDER BY d.row_key") { row in
            Device(rowKey: row.int(0) ?? 0, id: row.text(1) ?? "")
        }
    }

    private static func remove(_ connection: any SQLConnection, _ backend: any SQLBackend, app: String, _ devices: [Device], user: String?) throws(StoreError) {
        let campaigns: SQLStatement = "SELECT id FROM campaigns WHERE app = \(app)"
        for chunk in StoreExecutor.chunks(devices) {
            let keys = backend.isIn(chunk.map { .integer($0.rowKey) }, type: "bigint")
            let ids = backend.isIn(chunk.map { .text($0.id) }, type: "text")
            try connection.execute("DELETE FROM device_tags WHERE row_key" + keys)
            try connection.execute("DELETE FROM device_tokens WHERE app = \(app) AND row_key" + keys)
            // By campaign first: the ledger's key, so each campaign's rows are a lookup.
            try connection.execute("DELETE FROM deliveries WHERE campaign IN (" + campaigns + ") AND row_key" + keys)
            try connection.execute("DELETE FROM frequency_sends WHERE row_key" + keys)
            try connection.execute("DELETE FROM engagement_group_devices WHERE group_id IN (SELECT id FROM engagement_groups WHERE campaign IN (" + campaigns + ")) AND row_key" + keys)
            try connection.execute("DELETE FROM sdk_devices WHERE app = \(app) AND device_id" + ids)
            for device in chunk {
                try connection.execute(
                    "UPDATE api_idempotency SET response = \(redactedAnswer) WHERE app = \(app) AND response LIKE \(containing(quoted(device.id))) ESCAPE '!'")
            }
            try removeFromAudiences(connection, app: app, Set(chunk.map(\.id)))
            try connection.execute("DELETE FROM devices WHERE app = \(app) AND row_key" + keys)
        }
        if let user {
            try connection.execute("DELETE FROM frequency_sends WHERE user_key = \(FrequencyLedger.userKey(app: app, user: user))")
            try connection.execute(
                "UPDATE api_idempotency SET response = \(redactedAnswer) WHERE app = \(app) AND response LIKE \(containing("\"user\":" + quoted(user))) ESCAPE '!'")
        }
    }

    /// Campaigns and messages that listed the devices (`audience.devices`) keep the list
    /// without them; one left with none keeps the marker `erased`, so its stored record
    /// still reads (its devices were resolved when it was planned).
    private static func removeFromAudiences(_ connection: any SQLConnection, app: String, _ ids: Set<String>) throws(StoreError) {
        var listing: [String: String] = [:]
        for id in ids {
            try connection.query(
                "SELECT id, definition FROM campaigns WHERE app = \(app) AND definition LIKE \(containing("\"" + id + "\"")) ESCAPE '!'"
            ) { row throws(StoreError) in listing[row.text(0) ?? ""] = row.text(1) }
        }
        for (campaign, read) in listing {
            var definition = read
            // Over the record as read, again if it changed meanwhile (on PostgreSQL a winner's
            // decision may land between the read and the write, and must stay).
            for _ in 0..<3 {
                guard case .object(var record)? = try? JSONDecoder().decode(JSONValue.self, from: Data(definition.utf8)),
                      case .object(var audience)? = record["audience"], case .array(let devices)? = audience["devices"] else { break }
                let kept = devices.filter { device in device.stringValue.map { !ids.contains($0) } ?? true }
                guard kept.count < devices.count else { break }
                audience["devices"] = .array(kept.isEmpty ? [.string(erasedMarker)] : kept)
                record["audience"] = .object(audience)
                let written = try connection.execute(
                    "UPDATE campaigns SET definition = \(JSONValue.object(record).compactJSON) WHERE id = \(campaign) AND definition = \(definition)")
                guard written == 0, let now = try connection.queryOne("SELECT definition FROM campaigns WHERE id = \(campaign)", { $0.text(0) }) ?? nil else { break }
                definition = now
            }
        }
    }

    /// What an audience list that lost all its devices to erasures lists instead.
    static let erasedMarker = "erased"

    /// The text as a JSON string, escaped as the API wrote it into the answers searched
    /// (a user id may hold `"` or `\`).
    private static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        JSONWriter.writeString(text, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A LIKE pattern matching text that contains `text` (JSON as the API wrote it).
    private static func containing(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == "!" || character == "%" || character == "_" { escaped.append("!") }
            escaped.append(character)
        }
        return "%" + escaped + "%"
    }
}
