import PushfanMessages
import PushfanSchedule
import PushfanSupport

/// An app's devices as import lines: what `pushfan devices export` writes, and what
/// `pushfan devices import` reads back into the same devices (another store, a restore, a
/// move between SQLite and PostgreSQL). Each line carries the device's fields, tags,
/// attributes, quiet hours and its tokens of other kinds than alert.
///
/// Active devices only, with their active, unexpired tokens: an import makes a device active
/// and its tokens usable, so exporting an invalid device or a refused token would bring it
/// back to life on the other side.
extension DeviceDirectory {
    /// Up to `limit` active devices after row key `after`, in row-key order, each with its
    /// import line. Three queries per page whatever its size (devices, their tags, their
    /// tokens), so a million devices is a few thousand round trips.
    package func exportPage(app: String, after: Int64?, limit: Int, now: Int64) async throws(StoreError) -> (lines: [JSONValue], last: Int64?) {
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            let records = try Self.records(
                connection, "app = \(app) AND status = 'active' AND row_key > \(after ?? Int64.min) ORDER BY row_key LIMIT \(limit)", tags: false)
            guard let last = records.last?.rowKey else { return ([], nil) }
            let keys = backend.isIn(records.map { .integer($0.rowKey) }, type: "bigint")
            var tags: [Int64: [String]] = [:]
            try connection.query("SELECT row_key, tag FROM device_tags WHERE row_key" + keys + " ORDER BY row_key, tag") { row throws(StoreError) in
                tags[row.int(0) ?? 0, default: []].append(row.text(1) ?? "")
            }
            var tokens: [Int64: [JSONValue]] = [:]
            try connection.query("""
                SELECT t.row_key, \(raw: DeviceTokens.columns) FROM device_tokens t
                WHERE t.row_key
                """ + keys + " AND t.status = 'active' AND (t.expires_at IS NULL OR t.expires_at > \(now)) ORDER BY t.row_key, t.kind, t.scope"
            ) { row throws(StoreError) in
                let stored = try DeviceTokens.stored(row, start: 1)
                var members = stored.token.members
                members["kind"] = .string(stored.token.kind.rawValue)
                tokens[row.int(0) ?? 0, default: []].append(.object(members))
            }
            let lines = records.map { record in
                Self.importLine(record, tags: tags[record.rowKey] ?? [], tokens: tokens[record.rowKey] ?? [])
            }
            return (lines, last)
        }
    }

    /// The device as `DeviceJSONReader` reads an import line.
    static func importLine(_ record: DeviceRecord, tags: [String], tokens: [JSONValue]) -> JSONValue {
        var line: [String: JSONValue] = [
            "device_id": .string(record.deviceID), "token": .string(record.token), "environment": .string(record.environment.rawValue),
            "last_seen": .int(record.lastSeenAt),
        ]
        for (name, value) in [("locale", record.locale), ("timezone", record.timezone), ("app_version", record.appVersion), ("os_version", record.osVersion)] {
            if let value { line[name] = .string(value) }
        }
        if !tags.isEmpty { line["tags"] = .array(tags.map(JSONValue.string)) }
        if !record.attributes.isEmpty { line["attributes"] = .object(record.attributes) }
        if let quiet = record.quietHours {
            line["quiet_hours"] = .object(["start": .string(QuietHours.text(quiet.start)), "end": .string(QuietHours.text(quiet.end))])
        }
        if !tokens.isEmpty { line["tokens"] = .array(tokens) }
        return .object(line)
    }
}
