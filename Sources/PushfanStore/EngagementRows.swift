import PushfanMessages

/// The per-event rows behind exact engagement counts, inside the caller's transaction: an
/// event id is new or seen (`engagement_events`), a device is the first of its group or not
/// (`engagement_group_devices`, by the group's number and the device's row), and which of a
/// batch's devices the app has. Each backend writes
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

            /// The order of their key in `engagement_counts` and `engagement_groups`.
            static func precedes(_ one: Group, _ other: Group) -> Bool {
                (one.campaign, one.variant, one.kind, one.detail) < (other.campaign, other.variant, other.kind, other.detail)
            }
        }

        let group: Group
        /// The group the device is counted once in: its own, but for a conversion the
        /// conversions' of every currency (detail ""), so that a device converting in two
        /// currencies is one converting device (a currency's `devices` are those whose first
        /// conversion was in it, and they add up to the converting devices).
        let deviceGroup: Group
        /// The device's row, and its id.
        let rowKey: Int64
        let device: String
        let value: Double

        init(_ counted: EngagementTallies.Counted, _ attribution: EngagementTallies.Attribution) {
            let event = counted.event
            group = Group(
                campaign: attribution.campaign.stored, variant: attribution.variant, kind: event.kind.rawValue,
                detail: event.action ?? event.name ?? event.currency ?? "")
            deviceGroup = event.kind == .converted ? Group(campaign: group.campaign, variant: group.variant, kind: group.kind, detail: "") : group
            rowKey = counted.rowKey
            device = event.device
            value = event.value ?? 0
        }
    }

    /// A device of a group: the group's number (`engagement_groups`) and the device's row.
    struct GroupDevice: Hashable, Sendable {
        let group: Int64
        let rowKey: Int64
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

    /// Each group's number, numbering those not seen before (a poll has a few groups: a
    /// lookup each, and an insert for a new one). In one order for every writer, as the
    /// counts: PostgreSQL's writers then wait for each other instead of deadlocking.
    static func groupNumbers(_ connection: any SQLConnection, _ groups: Set<Line.Group>) throws(StoreError) -> [Line.Group: Int64] {
        var numbers: [Line.Group: Int64] = [:]
        for group in groups.sorted(by: Line.Group.precedes) {
            let find: SQLStatement = """
                SELECT id FROM engagement_groups
                WHERE campaign = \(group.campaign) AND variant = \(group.variant) AND kind = \(group.kind) AND detail = \(group.detail)
                """
            var number = try connection.queryOne(find) { $0.int(0) }.flatMap { $0 }
            if number == nil {
                try connection.execute("""
                    INSERT INTO engagement_groups (campaign, variant, kind, detail) VALUES (\(group.campaign), \(group.variant), \(group.kind), \(group.detail))
                    ON CONFLICT (campaign, variant, kind, detail) DO NOTHING
                    """)
                number = try connection.queryOne(find) { $0.int(0) }.flatMap { $0 }
            }
            guard let number else { throw StoreError.database("engagement group \(group.campaign) \(group.variant) \(group.kind) got no number") }
            numbers[group] = number
        }
        return numbers
    }

    /// Inserts each (group, device) unless present; for each, whether it was the one
    /// inserted (of two equal ones, the first). In the key's order: two writers counting the
    /// same devices at once then wait for each other instead of deadlocking.
    static func insertAbsentGroupDevices(_ connection: any SQLConnection, _ devices: [GroupDevice]) throws(StoreError) -> [Bool] {
        var inserted: Set<GroupDevice> = []
        try insertAbsent(
            connection, devices.sorted { ($0.group, $0.rowKey) < ($1.group, $1.rowKey) }, into: "engagement_group_devices (group_id, row_key)", key: "group_id, row_key",
            row: { device in "(\(device.group), \(device.rowKey))" },
            inserted: { row in inserted.insert(GroupDevice(group: row.int(0) ?? 0, rowKey: row.int(1) ?? 0)) })
        return devices.map { inserted.remove($0) != nil }
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

    /// Of `rowKeys`, the device rows still there, each with its device's id. Read in the
    /// counting transaction: a device removed since its events were checked (erased, or its
    /// token taken by another device) gets no pair, which would outlive its erasure.
    static func liveDevices(_ connection: any SQLConnection, _ backend: any SQLBackend, _ rowKeys: [Int64]) throws(StoreError) -> [Int64: String] {
        var live: [Int64: String] = [:]
        for chunk in StoreExecutor.chunks(rowKeys) {
            try connection.query("SELECT row_key, device_id FROM devices WHERE row_key" + backend.isIn(chunk.map(SQLValue.integer), type: "bigint")) { row in
                if let rowKey = row.int(0), let id = row.text(1) { live[rowKey] = id }
            }
        }
        return live
    }

    /// The devices among `ids` that `app` has, each id with its row.
    static func knownDevices(_ connection: any SQLConnection, _ backend: any SQLBackend, app: String, _ ids: [String]) throws(StoreError) -> [String: Int64] {
        var known: [String: Int64] = [:]
        for chunk in StoreExecutor.chunks(ids) {
            let list = backend.isIn(chunk.map(SQLValue.text), type: "text")
            try connection.query("SELECT device_id, row_key FROM devices WHERE app = \(app) AND device_id" + list) { row in
                if let id = row.text(0), let rowKey = row.int(1) { known[id] = rowKey }
            }
        }
        return known
    }

    /// A campaign's push to one device (its ledger row).
    struct Push: Hashable {
        let campaign: CampaignKey
        let rowKey: Int64
    }

    /// Where a push stands: its ledger row's state, APNs' or Pushfan's reason, and how many
    /// requests went out.
    struct PushState {
        let state: LedgerState
        let reason: String?
        var attempts: Int64 = 0
    }

    /// The ledger rows of these campaigns' pushes to these devices (row keys); a device the
    /// campaign never took has none. One query per campaign and chunk, by the primary key.
    static func pushStates(
        _ connection: any SQLConnection, _ backend: any SQLBackend, _ pushes: [CampaignKey: Set<Int64>]
    ) throws(StoreError) -> [Push: PushState] {
        var states: [Push: PushState] = [:]
        for (campaign, rowKeys) in pushes {
            for chunk in StoreExecutor.chunks(Array(rowKeys)) {
                let list = backend.isIn(chunk.map(SQLValue.integer), type: "bigint")
                try connection.query("SELECT row_key, state, reason, attempts FROM deliveries WHERE campaign = \(campaign) AND row_key" + list) { row in
                    if let rowKey = row.int(0), let state = LedgerState(rawValue: row.text(1) ?? "") {
                        states[Push(campaign: campaign, rowKey: rowKey)] = PushState(state: state, reason: row.text(2), attempts: row.int(3) ?? 0)
                    }
                }
            }
        }
        return states
    }

    /// An event's identity: its id within its app.
    struct EventKey: Hashable {
        let app: String
        let id: String
    }
}
