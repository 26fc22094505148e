import PushfanAPNsModel
import PushfanMessages
import PushfanSegments
import PushfanSupport

/// Who a campaign reaches: saved segments, counts, the shards of an app's devices and the
/// pages of one shard, and the row keys of an explicit device list.
package struct AudienceReader: Sendable {
    let executor: StoreExecutor

    /// Saves (or replaces) a named segment after checking that it parses.
    package func saveSegment(app: String, name: String, expression: String) async throws(StoreError) {
        try Validation.segmentName(name)
        do { _ = try SegmentParser.parse(expression) } catch { throw StoreError.invalidInput("segment \(name): \(error)") }
        let now = executor.clock.wallMillis
        try await executor.run { connection throws(StoreError) in
            try StoreExecutor.requireApp(connection, app)
            try connection.execute("""
                INSERT INTO segments (app, name, expression, created_at) VALUES (\(app), \(name), \(expression), \(now))
                ON CONFLICT (app, name) DO UPDATE SET expression = excluded.expression, created_at = excluded.created_at
                """)
        }
    }

    /// The expression of a saved segment; nil when the app has none of that name.
    package func savedSegment(app: String, name: String) async throws(StoreError) -> String? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT expression FROM segments WHERE app = \(app) AND name = \(name)") { $0.text(0) }.flatMap { $0 }
        }
    }

    /// The app's saved segments, by name.
    package func savedSegments(app: String) async throws(StoreError) -> [(name: String, expression: String)] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("SELECT name, expression FROM segments WHERE app = \(app) ORDER BY name") { ($0.text(0) ?? "", $0.text(1) ?? "") }
        }
    }

    /// Active devices of the app matching the segment (all active devices for nil); for a
    /// push to another kind of token, every registered device (`eligible`).
    package func count(app: String, segment: SegmentExpression?, tokens: TokenSelection? = nil, now: Int64) async throws(StoreError) -> Int {
        try await executor.run { connection throws(StoreError) in
            let count: Int64?? = try connection.queryOne(
                "SELECT COUNT(\(raw: tokens?.activities == nil ? "*" : "DISTINCT d.row_key")) FROM devices d" + Self.holders(tokens, now: now) + " WHERE d.app = \(app) AND \(raw: Self.eligible(tokens))"
                    + Self.filter(segment, now: now)) { $0.int(0) }
            return Int((count ?? nil) ?? 0)
        }
    }

    /// Splits the app's devices into contiguous row-key ranges of about `size` devices.
    /// Cost: one query per shard that walks `size` entries of the app's row-key index
    /// (`OFFSET`; index-only once PostgreSQL has vacuumed the table), no segment evaluation.
    /// `found` sees each shard as soon as its boundary is known, so a caller can start on it
    /// while the rest are looked for.
    package func shards(app: String, size: Int, found: (ShardRange) -> Void = { _ in }) async throws(StoreError) -> [ShardRange] {
        guard size > 0 else { throw StoreError.invalidInput("shard size must be positive") }
        var shards = try await walk(app: app, size: size, closed: Int.max, found: found)
        let after = shards.last?.through
        let more = try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT 1 FROM devices WHERE app = \(app) AND row_key > \(after ?? Int64.min) LIMIT 1") { $0.int(0) } != nil
        }
        if more || shards.isEmpty {
            shards.append(ShardRange(after: after, through: nil))
            found(shards[shards.count - 1])
        }
        return shards
    }

    /// Exactly `count` contiguous ranges of about `size` devices, the last one open-ended,
    /// so a caller can announce the count before the walk (each task names its campaign's
    /// number of shards) and start on each range as `found` gives it. Devices registered
    /// meanwhile fall in the last range; if devices went away and the walk runs out early,
    /// the ranges still missing are empty ones above every row key.
    package func shards(app: String, size: Int, count: Int, found: (ShardRange) -> Void) async throws(StoreError) -> [ShardRange] {
        guard size > 0, count > 0 else { throw StoreError.invalidInput("shard size and count must be positive") }
        var shards = try await walk(app: app, size: size, closed: count - 1, found: found)
        shards.append(ShardRange(after: shards.last?.through, through: nil))
        found(shards[shards.count - 1])
        var top = Int64.max - Int64(count)
        while shards.count < count {
            shards.append(ShardRange(after: top, through: top + 1))
            found(shards[shards.count - 1])
            top += 1
        }
        return shards
    }

    /// Up to `closed` ranges of `size` devices from the app's first row key, each given to
    /// `found` as its boundary is known. One call per boundary rather than one for all: on a
    /// large app the whole walk takes a while (0.2 s at 1M devices), and other calls on the
    /// same connection need not wait for all of it.
    private func walk(app: String, size: Int, closed: Int, found: (ShardRange) -> Void) async throws(StoreError) -> [ShardRange] {
        var shards: [ShardRange] = []
        var after: Int64?
        while shards.count < closed, let end = try await boundary(app: app, after: after, size: size) {
            shards.append(ShardRange(after: after, through: end))
            found(shards[shards.count - 1])
            after = end
        }
        return shards
    }

    /// Whether the app has at least `devices` devices (any status): a walk of that many
    /// entries of its row-key index, far cheaper than counting a large app.
    package func hasAtLeast(app: String, devices: Int) async throws(StoreError) -> Bool {
        try await boundary(app: app, after: nil, size: max(1, devices)) != nil
    }

    /// The row key `size` devices above `after`: where a shard starting there ends.
    private func boundary(app: String, after: Int64?, size: Int) async throws(StoreError) -> Int64? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("""
                SELECT row_key FROM devices WHERE app = \(app) AND row_key > \(after ?? Int64.min)
                ORDER BY row_key LIMIT 1 OFFSET \(size - 1)
                """) { $0.int(0) } ?? nil
        }
    }

    /// One page of a shard: active matching devices with row key above `cursor` (and the
    /// shard's lower bound), in row-key order. Pass the last row key as the next cursor; a
    /// page shorter than `limit` is the shard's last.
    /// `zones`: only devices in these time zones (`""`: devices without one); nil: all.
    /// `traits`: also each device's versions and attributes (for personalised texts).
    /// `tokens`: each device's token of that kind in place of its alert token ("" when it
    /// has none, so the sender can say so).
    package func page(
        app: String, segment: SegmentExpression?, shard: ShardRange, cursor: Int64?, limit: Int, zones: [String]? = nil,
        traits: Bool = false, tokens: TokenSelection? = nil, now: Int64
    ) async throws(StoreError) -> [DeviceTarget] {
        let backend = executor.backend
        let targets = try await executor.run { connection throws(StoreError) in
            let key = Self.rowKey(tokens)
            let order = tokens?.activities == nil ? key : key + ", t.scope"
            var targets: [DeviceTarget] = []
            targets.reserveCapacity(limit)
            var lower = max(cursor ?? Int64.min, shard.after ?? Int64.min)
            // A device following several matching activities is several rows, and its push is
            // one target: rows a page dropped so are made up from the rows after it, so that
            // only the shard's end gives a short page.
            while targets.count < limit {
                var statement: SQLStatement = Self.columns(traits: traits, tokens: tokens, now: now) + """
                     WHERE d.app = \(app) AND \(raw: Self.eligible(tokens)) AND \(raw: key) > \(lower)
                    """
                if let through = shard.through { statement = statement + " AND \(raw: key) <= \(through)" }
                let wanted = limit - targets.count
                statement = statement + Self.filter(segment, now: now) + Self.zoneFilter(zones, backend) + " ORDER BY \(raw: order) LIMIT \(wanted)"
                var rows = 0
                try connection.query(statement) { row throws(StoreError) in
                    rows += 1
                    let target = Self.target(row, traits: traits, tokens: tokens)
                    // A device's second matching activity: it has its push. One cut off by the
                    // limit is passed over by the next read, which starts after it.
                    if target.rowKey != targets.last?.rowKey { targets.append(target) }
                }
                guard rows == wanted, let last = targets.last?.rowKey else { break }
                lower = last
            }
            return targets
        }
        executor.audienceRowsRead.wrappingAdd(targets.count, ordering: .relaxed)
        return targets
    }

    /// The app's devices among these row keys that a push to `tokens` reaches (`eligible`; a
    /// page of an explicit audience), in
    /// row-key order: read by key, so a list of a thousand ids costs a thousand rows however
    /// many devices the app has.
    package func devices(
        app: String, rowKeys: [Int64], zones: [String]? = nil, traits: Bool = false, tokens: TokenSelection? = nil, now: Int64
    ) async throws(StoreError) -> [DeviceTarget] {
        var targets: [DeviceTarget] = []
        let backend = executor.backend
        for chunk in StoreExecutor.chunks(rowKeys) {
            let keys = Array(chunk)
            targets += try await executor.run { connection throws(StoreError) in
                try connection.queryAll(
                    Self.columns(traits: traits, tokens: tokens, now: now) + " WHERE d.app = \(app) AND \(raw: Self.eligible(tokens)) AND d.row_key"
                        + backend.isIn(keys.map { .integer($0) }, type: "bigint") + Self.zoneFilter(zones, backend) + " ORDER BY d.row_key"
                ) { row in Self.target(row, traits: traits, tokens: tokens) }
            }
        }
        executor.audienceRowsRead.wrappingAdd(targets.count, ordering: .relaxed)
        return targets
    }

    /// Device rows `page` and `devices` have returned since the store opened.
    package var rowsRead: Int { executor.audienceRowsRead.load(ordering: .relaxed) }

    /// Row keys of the devices among these device ids (an explicit audience) that a push to
    /// `tokens` reaches (`eligible`: the active ones for an alert push).
    package func rowKeys(app: String, deviceIDs: [String], tokens: TokenSelection?) async throws(StoreError) -> [Int64] {
        var keys: [Int64] = []
        let backend = executor.backend
        for chunk in StoreExecutor.chunks(deviceIDs) {
            let ids = Array(chunk)
            keys += try await executor.run { connection throws(StoreError) in
                try connection.queryAll(
                    "SELECT d.row_key FROM devices d WHERE d.app = \(app) AND \(raw: Self.eligible(tokens)) AND d.device_id"
                        + backend.isIn(ids.map { .text($0) }, type: "text")) { $0.int(0) ?? 0 }
            }
        }
        return keys.sorted()
    }

    private static func filter(_ segment: SegmentExpression?, now: Int64) -> SQLStatement {
        guard let segment else { return "" }
        return " AND \(segment: segment, now: now)"
    }

    /// The distinct time zones of the app's devices matching the segment that a push to
    /// `tokens` reaches (`eligible`); `""` stands for devices without one. One pass over the
    /// app's devices: asked once per local-time campaign, to cut its zone waves.
    package func zones(app: String, segment: SegmentExpression?, tokens: TokenSelection?, now: Int64) async throws(StoreError) -> [String] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll(
                "SELECT DISTINCT COALESCE(d.timezone, '') FROM devices d WHERE d.app = \(app) AND \(raw: Self.eligible(tokens))" + Self.filter(segment, now: now)
            ) { $0.text(0) ?? "" }
        }
    }

    private static func zoneFilter(_ zones: [String]?, _ backend: any SQLBackend) -> SQLStatement {
        guard let zones else { return "" }
        return " AND COALESCE(d.timezone, '')" + backend.isIn(zones.map { .text($0) }, type: "text")
    }

    /// Which devices a campaign reaches: active ones for alert pushes; for another kind, every
    /// registered one, since an alert token APNs refused says nothing of the device's VoIP or
    /// Live Activity token (those without one end `no_token_for_push_type`).
    private static func eligible(_ tokens: TokenSelection?) -> String {
        // `DeviceStatus.isReached(by:)` in SQL.
        tokens.map { $0.kind != .alert } == true ? "d.status <> 'unregistered'" : "d.status = 'active'"
    }

    private static func columns(traits: Bool, tokens: TokenSelection?, now: Int64) -> SQLStatement {
        let extra = traits ? ", d.app_version, d.os_version, d.attributes" : ""
        guard let tokens, tokens.kind != .alert else {
            return "SELECT d.row_key, d.device_id, d.token, d.environment, d.locale, d.timezone, d.quiet_start, d.quiet_end\(raw: extra) FROM devices d"
        }
        let selected: SQLStatement = "SELECT d.row_key, d.device_id, t.token, t.environment, d.locale, d.timezone, d.quiet_start, d.quiet_end\(raw: extra)"
        if let filter = tokens.activities { return selected + " FROM device_tokens t JOIN devices d ON d.row_key = t.row_key" + matching(filter, now: now) }
        return selected + " FROM devices d" + Self.holders(tokens, now: now)
    }

    /// The row key pages are cut and ordered by: the token's for an activity filter, whose
    /// pages walk the matching tokens (`device_tokens_by_attributes_type` is in row-key and
    /// activity-id order within a type) rather than every device, most of which follow
    /// nothing; measured on SQLite at 30,000 followers among 100,000 devices: 35 ms against
    /// 93 ms walking the devices.
    private static func rowKey(_ tokens: TokenSelection?) -> String {
        tokens?.activities == nil ? "d.row_key" : "t.row_key"
    }

    /// An activity filter's tokens `t`: active, unexpired update tokens of the type with
    /// every pair. A device following two matching activities has two rows, in activity-id
    /// order: `page` keeps the first, `count` counts devices.
    private static func matching(_ filter: ActivityFilter, now: Int64) -> SQLStatement {
        var condition: SQLStatement = """
             AND t.app = d.app AND t.kind = \(APNsTokenKind.liveActivityUpdate.rawValue) AND t.attributes_type = \(filter.attributesType)
            AND t.status = 'active' AND (t.expires_at IS NULL OR t.expires_at > \(now))
            """
        for (name, value) in filter.attributes.sorted(by: { $0.key < $1.key }) {
            condition.append(" AND \(jsonText: "t.attributes", key: name) = \(value)")
        }
        return condition
    }

    /// The join to each device's one active, unexpired token of the kind and scope: every
    /// device with it or without (`LEFT`), or only its holders.
    private static func holders(_ tokens: TokenSelection?, now: Int64) -> SQLStatement {
        guard let tokens, tokens.kind != .alert else { return "" }
        if let filter = tokens.activities { return " JOIN device_tokens t ON t.row_key = d.row_key" + matching(filter, now: now) }
        return " \(raw: tokens.holdersOnly ? "JOIN" : "LEFT JOIN") device_tokens t ON " + held(tokens, now: now)
    }

    /// A column of 1 where device `d` holds a token `tokens` selects (always for an alert
    /// push), else 0: what `holders` joins on, for a report of who a push cannot reach.
    static func holdsToken(_ tokens: TokenSelection?, now: Int64) -> SQLStatement {
        guard let tokens, tokens.kind != .alert else { return "1" }
        if let filter = tokens.activities {
            return "CASE WHEN EXISTS (SELECT 1 FROM device_tokens t WHERE t.row_key = d.row_key" + matching(filter, now: now) + ") THEN 1 ELSE 0 END"
        }
        return "CASE WHEN EXISTS (SELECT 1 FROM device_tokens t WHERE " + held(tokens, now: now) + ") THEN 1 ELSE 0 END"
    }

    private static func held(_ tokens: TokenSelection, now: Int64) -> SQLStatement {
        """
        t.row_key = d.row_key AND t.kind = \(tokens.kind.rawValue)
            AND t.scope = \(tokens.scope) AND t.status = 'active' AND (t.expires_at IS NULL OR t.expires_at > \(now))
        """
    }

    private static func target(_ row: any SQLRow, traits: Bool, tokens: TokenSelection?) -> DeviceTarget {
        var target = DeviceTarget(
            rowKey: row.int(0) ?? 0, deviceID: row.text(1) ?? "", token: row.text(2) ?? "",
            environment: row.text(3, equals: "sandbox") ? .sandbox : .production, locale: row.text(4), timezone: row.text(5),
            quietHours: DeviceDirectory.quietHours(row, start: 6))
        target.tokenKind = tokens?.kind ?? .alert
        if traits {
            target.traits = DeviceTraits(appVersion: row.text(8), osVersion: row.text(9), attributes: DeviceDirectory.attributes(row.text(10)))
        }
        return target
    }
}
