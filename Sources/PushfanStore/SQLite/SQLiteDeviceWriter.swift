import PushfanMessages

/// SQLite's half of `DeviceWriter`: a few statements prepared once per connection, values
/// bound straight from the validated devices, one row at a time inside the caller's
/// transaction. Building a multi-row statement's text and binding thousands of parameters
/// cost more than SQLite's own work (measured: three quarters of the writer's CPU).
enum SQLiteDeviceWriter {
    /// Batches at least this large are bulk imports and get the larger page cache.
    static let bulkBatch = 1000
    static let bulkCacheKiB = 256 * 1024

    static func upsert(_ connection: SQLiteConnection, app: String, devices: [ValidatedDevice], now: Int64, returningRowKeys: Bool) throws(StoreError) -> DeviceWriter.Written {
        let owner = try connection.pinned("SELECT row_key, device_id FROM devices WHERE app = ?1 AND environment = ?2 AND token = ?3")
        // The device's tags go with it (ON DELETE CASCADE); its tokens of other kinds by hand.
        let remove = try connection.pinned("DELETE FROM devices WHERE row_key = ?1")
        let removeTokens = try connection.pinned("DELETE FROM device_tokens WHERE row_key = ?1")
        let upsert = try connection.pinned("""
            INSERT INTO devices (app, device_id, token, environment, locale, timezone, app_version, app_version_key, os_version, os_version_key,
                                 attributes, created_at, last_seen_at, status, quiet_start, quiet_end)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'active', ?14, ?15)
            ON CONFLICT (app, device_id) DO UPDATE SET token = excluded.token, environment = excluded.environment, locale = excluded.locale,
                timezone = excluded.timezone, app_version = excluded.app_version, app_version_key = excluded.app_version_key,
                os_version = excluded.os_version, os_version_key = excluded.os_version_key, attributes = excluded.attributes,
                last_seen_at = excluded.last_seen_at, status = 'active', invalid_reason = NULL, invalid_at = NULL,
                quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end
            """)
        // RETURNING would materialise a result table per row; an insert's key is known
        // without it, only an update needs this lookup.
        let existing = try connection.pinned("SELECT row_key FROM devices WHERE app = ?1 AND device_id = ?2")
        let clearTags = try connection.pinned("DELETE FROM device_tags WHERE row_key = ?1")
        let addTag = try connection.pinned("INSERT INTO device_tags (app, row_key, tag) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING")
        // Bindings survive a reset: the values shared by every row are bound once.
        try owner.bind(1, app)
        try existing.bind(1, app)
        try upsert.bind(1, app)
        try upsert.bind(12, now)
        try addTag.bind(1, app)

        // Row keys above this are rows of this batch, which have no tags to clear yet (the
        // transaction holds the write lock, so no other writer adds rows meanwhile).
        var newestBefore: Int64 = 0
        try connection.query("SELECT coalesce(max(row_key), 0) FROM devices") { row throws(StoreError) in newestBefore = row.int(0) ?? 0 }

        if devices.count >= bulkBatch {
            // Real tokens and device ids are random, so a bulk import touches index pages all
            // over their indexes; with SQLite's default 2 MB cache most of those are read
            // again from the file (measured at 1M random devices: 44 s with 2 MB, 30 s with
            // 256 MB). The connection keeps the larger cache once it has imported.
            try connection.executeScript("PRAGMA cache_size = -\(bulkCacheKiB)")
        }
        var written = DeviceWriter.Written()
        for device in devices {
            try upsert.bind(2, device.deviceID)
            try upsert.bind(3, device.token)
            try upsert.bind(4, device.environment.rawValue)
            try upsert.bind(5, device.locale)
            try upsert.bind(6, device.timezone)
            try upsert.bind(7, device.appVersion)
            try upsert.bind(8, device.appVersionKey)
            try upsert.bind(9, device.osVersion)
            try upsert.bind(10, device.osVersionKey)
            try upsert.bind(11, device.attributesJSON)
            try upsert.bind(13, device.seenAt ?? now)
            try upsert.bind(14, device.quietHours.map { Int64($0.start) })
            try upsert.bind(15, device.quietHours.map { Int64($0.end) })
            let lastInsert = connection.lastInsertRowKey
            do {
                try upsert.run()
            } catch where error.code == .conflict {
                // The only unique key the upsert does not resolve itself is (app, environment,
                // token): another device holds this token. It moves here, so that device goes.
                // Probing only on conflict keeps the common case at one statement.
                try owner.bind(2, device.environment.rawValue)
                try owner.bind(3, device.token)
                var previous: (rowKey: Int64, deviceID: String)?
                try owner.run { row throws(StoreError) in previous = (row.int(0) ?? 0, row.text(1) ?? "") }
                guard let previous, previous.deviceID != device.deviceID else { throw StoreError.conflict("device \(device.deviceID): unique key conflict") }
                try remove.bind(1, previous.rowKey)
                try remove.run()
                try removeTokens.bind(1, previous.rowKey)
                try removeTokens.run()
                written.movedFrom[device.deviceID, default: []].append(previous.deviceID)
                try upsert.run()
            }
            var rowKey = connection.lastInsertRowKey
            if rowKey == lastInsert {
                // Updated in place: look it up.
                try existing.bind(2, device.deviceID)
                var found: Int64?
                try existing.run { row throws(StoreError) in found = row.int(0) }
                guard let found else { throw StoreError.database("device \(device.deviceID) not found after its upsert") }
                rowKey = found
            }

            if rowKey <= newestBefore {
                try clearTags.bind(1, rowKey)
                try clearTags.run()
            }
            if !device.tags.isEmpty {
                try addTag.bind(2, rowKey)
                for tag in device.tags {
                    try addTag.bind(3, tag)
                    try addTag.run()
                }
            }
            if returningRowKeys { written.rowKeys[device.deviceID] = rowKey }
            written.count += 1
        }
        return written
    }
}
