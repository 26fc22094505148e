import PushfanMessages
import PushfanSupport

/// PostgreSQL's half of `DeviceWriter`: the batch goes to a temporary staging table by COPY,
/// then a few set-based statements merge it. Measured against one multi-row upsert per 400
/// devices, this moves the per-row work out of statement parsing and into the server's bulk
/// paths.
enum PostgresDeviceWriter {
    /// Per connection and transaction (ON COMMIT DELETE ROWS); created on first use.
    static let staging = """
        CREATE TEMP TABLE IF NOT EXISTS device_import (
            device_id text NOT NULL, token text NOT NULL, environment text NOT NULL,
            locale text, timezone text, app_version text, app_version_key text, os_version text, os_version_key text,
            attributes text NOT NULL, seen_at bigint, tags text[] NOT NULL, row_key bigint, quiet_start integer, quiet_end integer
        ) ON COMMIT DELETE ROWS
        """

    static func upsert(_ connection: PostgresConnection, app: String, devices: [ValidatedDevice], now: Int64, returningRowKeys: Bool) throws(StoreError) -> DeviceWriter.Written {
        var written = DeviceWriter.Written()
        guard !devices.isEmpty else { return written }
        try connection.executeScript(staging)
        var rows = CopyTextRows()
        rows.reserve(devices.count * 320)
        for device in devices {
            rows.field(device.deviceID)
            rows.field(device.token)
            rows.field(device.environment.rawValue)
            rows.field(device.locale)
            rows.field(device.timezone)
            rows.field(device.appVersion)
            rows.field(device.appVersionKey)
            rows.field(device.osVersion)
            rows.field(device.osVersionKey)
            rows.field(device.attributesJSON)
            rows.field(device.seenAt)
            rows.field(PostgresArray.literal(device.tags))
            rows.field(device.quietHours.map { Int64($0.start) })
            rows.field(device.quietHours.map { Int64($0.end) })
            rows.endRow()
        }
        _ = try connection.copyIn("""
            COPY device_import (device_id, token, environment, locale, timezone, app_version, app_version_key, os_version, os_version_key,
                                attributes, seen_at, tags, quiet_start, quiet_end) FROM STDIN
            """, rows.bytes)
        // Tokens this batch takes over from other devices: those devices go, and their tags
        // and tokens of other kinds with them (PostgreSQL has no cascading key on tags). The joins are written so that only index
        // probes can serve them (LATERAL … LIMIT 1 is not flattened; `= ANY(ARRAY(…))` is an
        // index condition): a planner that picked a hash join here would read the whole
        // table once per batch and make the import quadratic.
        try connection.query("""
            WITH stale AS MATERIALIZED (
                SELECT o.row_key, i.environment, i.token
                FROM device_import i CROSS JOIN LATERAL (
                    SELECT d.row_key, d.device_id FROM devices d
                    WHERE d.app = \(app) AND d.environment = i.environment AND d.token = i.token LIMIT 1) o
                WHERE o.device_id <> i.device_id),
            -- The token is checked again on the row being deleted: a concurrent writer may
            -- have given that device another token meanwhile, and then it stays.
            moved AS (
                DELETE FROM devices d USING stale s
                WHERE d.app = \(app) AND d.row_key = s.row_key AND d.environment = s.environment AND d.token = s.token
                RETURNING d.row_key, d.device_id, d.environment, d.token),
            tags_gone AS (DELETE FROM device_tags WHERE row_key = ANY(ARRAY(SELECT row_key FROM moved))),
            tokens_gone AS (DELETE FROM device_tokens WHERE row_key = ANY(ARRAY(SELECT row_key FROM moved)))
            SELECT m.device_id, i.device_id FROM moved m JOIN device_import i ON i.environment = m.environment AND i.token = m.token
            """) { row throws(StoreError) in
            written.movedFrom[row.text(1) ?? "", default: []].append(row.text(0) ?? "")
        }
        try connection.execute("""
            WITH up AS (
                INSERT INTO devices (app, device_id, token, environment, locale, timezone, app_version, app_version_key, os_version, os_version_key,
                                     attributes, created_at, last_seen_at, status, quiet_start, quiet_end)
                SELECT \(app), device_id, token, environment, locale, timezone, app_version, app_version_key, os_version, os_version_key,
                       attributes::jsonb, \(now), coalesce(seen_at, \(now)), 'active', quiet_start, quiet_end
                FROM device_import
                ON CONFLICT (app, device_id) DO UPDATE SET token = excluded.token, environment = excluded.environment, locale = excluded.locale,
                    timezone = excluded.timezone, app_version = excluded.app_version, app_version_key = excluded.app_version_key,
                    os_version = excluded.os_version, os_version_key = excluded.os_version_key, attributes = excluded.attributes,
                    last_seen_at = excluded.last_seen_at, status = 'active', invalid_reason = NULL, invalid_at = NULL,
                    quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end
                RETURNING row_key, device_id)
            UPDATE device_import i SET row_key = up.row_key FROM up WHERE i.device_id = up.device_id
            """)
        try connection.execute("DELETE FROM device_tags WHERE row_key = ANY(ARRAY(SELECT row_key FROM device_import))")
        try connection.execute("""
            INSERT INTO device_tags (app, row_key, tag)
            SELECT \(app), i.row_key, tag FROM device_import i, unnest(i.tags) AS tag
            ON CONFLICT DO NOTHING
            """)
        if returningRowKeys {
            try connection.query("SELECT device_id, row_key FROM device_import") { row throws(StoreError) in
                written.rowKeys[row.text(0) ?? ""] = row.int(1)
            }
        }
        written.count = devices.count
        return written
    }
}

/// Rows in COPY's text format: tab-separated fields, `\N` for NULL, backslash escapes for
/// the bytes that would end a field or a row.
struct CopyTextRows {
    private(set) var bytes: [UInt8] = []
    private var atRowStart = true

    mutating func reserve(_ capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func field(_ text: String?) {
        separate()
        guard let text else {
            bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "N")])
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            default: bytes.append(byte)
            }
        }
    }

    mutating func field(_ number: Int64?) { field(number.map { String($0) }) }

    mutating func endRow() {
        bytes.append(0x0A)
        atRowStart = true
    }

    private mutating func separate() {
        if !atRowStart { bytes.append(0x09) }
        atRowStart = false
    }
}
