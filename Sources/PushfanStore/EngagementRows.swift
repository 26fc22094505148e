import PushfanMessages

/// The per-event rows behind exact engagement counts, inside the caller's transaction: an
/// event id is new or seen (`engagement_events`), a device is the first of its group or not
/// (`engagement_devices`), and which of a batch's devices the app has. Each backend writes
/// them its fastest way (`SQLBackend`): this file is the set-based way, a few multi-row
/// statements per batch (PostgreSQL); SQLite binds one row at a time into statements
/// prepared once (`SQLiteEngagementRows`).
enum EngagementRows {
    /// One count an event adds: to a campaign's group, for a device, with a value.
    struct Line: Sendable {
        struct Group: Hashable, Sendable {
            let campaign: String
            let variant: String
            let kind: String
            let detail: String
        }

        let group: Group
        let device: String
        let value: Double

        init(_ event: EngagementEvent, _ attribution: EngagementTallies.Attribution) {
            group = Group(
                campaign: attribution.campaign.stored, variant: attribution.variant, kind: event.kind.rawValue,
                detail: event.action ?? event.name ?? event.currency ?? "")
            device = event.device
            value = event.value ?? 0
        }
    }

    /// What a group's lines add to its counts.
    struct Tally {
        var events = 0
        var devices = 0
        var value = 0.0

        mutating func add(_ line: Line, first: Bool) {
            events += 1
            if first { devices += 1 }
            value += line.value
        }
    }

    /// Inserts each event's id unless its app has it; for each event (ids distinct), whether
    /// it was inserted.
    static func insertAbsentEvents(_ connection: any SQLConnection, _ events: [EngagementEvent], now: Int64) throws(StoreError) -> [Bool] {
        var added: Set<EventKey> = []
        try insertAbsent(
            connection, events, into: "engagement_events (app, id, campaign, kind, at, counted_at)", key: "app, id",
            row: { event in "(\(event.app), \(event.id), \(event.campaignKey.map { SQLValue.text($0.stored) } ?? .null), \(event.kind.rawValue), \(event.at), \(now))" },
            inserted: { row in added.insert(EventKey(app: row.text(0) ?? "", id: row.text(1) ?? "")) })
        return events.map { added.contains(EventKey(app: $0.app, id: $0.id)) }
    }

    /// Inserts each line's (campaign, variant, kind, detail, device) unless present; for
    /// each line, whether it was the one inserted (of two equal lines, the first).
    static func insertAbsentDeviceLines(_ connection: any SQLConnection, _ lines: [Line]) throws(StoreError) -> [Bool] {
        var inserted: Set<DeviceKey> = []
        try insertAbsent(
            connection, lines, into: "engagement_devices (campaign, variant, kind, detail, device)", key: "campaign, variant, kind, detail, device",
            row: { line in "(\(line.group.campaign), \(line.group.variant), \(line.group.kind), \(line.group.detail), \(line.device))" },
            inserted: { row in
                let group = Line.Group(campaign: row.text(0) ?? "", variant: row.text(1) ?? "", kind: row.text(2) ?? "", detail: row.text(3) ?? "")
                inserted.insert(DeviceKey(group: group, device: row.text(4) ?? ""))
            })
        return lines.map { inserted.remove(DeviceKey(group: $0.group, device: $0.device)) != nil }
    }

    /// Multi-row inserts of `items` into `table (columns)`, skipping rows whose `key` is
    /// there; `inserted` gets the key of each row that went in.
    private static func insertAbsent<Item>(
        _ connection: any SQLConnection, _ items: [Item], into table: String, key: String,
        row: (Item) -> SQLStatement, inserted: (any SQLRow) throws(StoreError) -> Void
    ) throws(StoreError) {
        for chunk in StoreExecutor.chunks(items) {
            var insert: SQLStatement = "INSERT INTO \(raw: table) VALUES "
            for (index, item) in chunk.enumerated() {
                if index > 0 { insert.append(", ") }
                insert.append(row(item))
            }
            insert.append(" ON CONFLICT (\(raw: key)) DO NOTHING RETURNING \(raw: key)")
            try connection.query(insert, inserted)
        }
    }

    /// The ids among `ids` of devices `app` has.
    static func knownDevices(_ connection: any SQLConnection, _ backend: any SQLBackend, app: String, _ ids: [String]) throws(StoreError) -> Set<String> {
        var known: Set<String> = []
        for chunk in StoreExecutor.chunks(ids) {
            let list = backend.isIn(chunk.map(SQLValue.text), type: "text")
            try connection.query("SELECT device_id FROM devices WHERE app = \(app) AND device_id" + list) { row in
                if let id = row.text(0) { known.insert(id) }
            }
        }
        return known
    }

    /// An event's identity: its id within its app.
    struct EventKey: Hashable {
        let app: String
        let id: String
    }

    private struct DeviceKey: Hashable {
        let group: Line.Group
        let device: String
    }
}
