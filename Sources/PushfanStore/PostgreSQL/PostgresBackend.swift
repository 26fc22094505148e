import PushfanMessages
import PushfanSupport

/// PostgreSQL's side of every dialect difference: whole columns travel as one array
/// parameter each (`unnest($1::bigint[], …)`, `= ANY($1::text[])`), which the server
/// parses and plans far faster than long `VALUES` or `IN` lists.
struct PostgresBackend: SQLBackend {
    let url: String
    let logger: Logger

    func connect() throws(StoreError) -> any SQLConnection { try PostgresConnection(url: url, logger: logger) }

    var importsInParallel: Bool { true }

    func upsert(_ connection: any SQLConnection, app: String, devices: [ValidatedDevice], now: Int64, returningRowKeys: Bool) throws(StoreError) -> DeviceWriter.Written {
        guard let postgres = connection as? PostgresConnection else { throw StoreError.database("a PostgreSQL backend was given \(type(of: connection))") }
        return try PostgresDeviceWriter.upsert(postgres, app: app, devices: devices, now: now, returningRowKeys: returningRowKeys)
    }

    func insertAbsentEvents(_ connection: any SQLConnection, _ events: [EngagementEvent], now: Int64) throws(StoreError) -> [Bool] {
        try EngagementRows.insertAbsentEvents(connection, events, now: now)
    }

    func insertAbsentGroupDevices(_ connection: any SQLConnection, _ devices: [EngagementRows.GroupDevice]) throws(StoreError) -> [Bool] {
        try EngagementRows.insertAbsentGroupDevices(connection, devices)
    }

    func liveDevices(_ connection: any SQLConnection, _ rowKeys: [Int64]) throws(StoreError) -> [Int64: String] {
        try EngagementRows.liveDevices(connection, self, rowKeys)
    }

    func knownDevices(_ connection: any SQLConnection, app: String, _ ids: [String]) throws(StoreError) -> [String: Int64] {
        try EngagementRows.knownDevices(connection, self, app: app, ids)
    }

    func isIn(_ values: [SQLValue], type: String) -> SQLStatement {
        " = ANY(\(SQLValue.text(PostgresArray.literal(values.map(\.postgresText))))::\(raw: type)[])"
    }

    /// Under READ COMMITTED two tasks finishing at once would each miss the other's row and
    /// neither would see the campaign complete: the campaign row makes them take turns.
    func lockCampaign(_ connection: any SQLConnection, _ campaign: CampaignKey) throws(StoreError) {
        try connection.execute("SELECT 1 FROM campaigns WHERE id = \(campaign) FOR UPDATE")
    }

    /// Row locks, in key order so that two admitters never wait on each other in a cycle;
    /// kept in the rows themselves, not in the server's lock table, whatever their number.
    func lockDevices(_ connection: any SQLConnection, app: String, _ rowKeys: [SQLValue]) throws(StoreError) {
        try connection.execute("SELECT row_key FROM devices WHERE app = \(app) AND row_key" + isIn(rowKeys, type: "bigint") + " ORDER BY row_key FOR UPDATE")
    }

    func claimRows(campaign: CampaignKey, _ targets: ArraySlice<DeviceTarget>, owner: String, leaseUntil: Int64, now: Int64) -> SQLStatement {
        """
         SELECT \(campaign), u.r, u.d, 'claimed', 0, \(owner), \(leaseUntil), \(now)
        FROM unnest(\(PostgresArray.literal(targets.map { String($0.rowKey) }))::bigint[], \(PostgresArray.literal(targets.map(\.deviceID)))::text[]) AS u(r, d)
        """
    }

    func outcomeRows(_ outcomes: ArraySlice<LedgerOutcome>) -> SQLStatement {
        """
         unnest(\(PostgresArray.literal(outcomes.map { String($0.rowKey) }))::bigint[], \(PostgresArray.literal(outcomes.map(\.state.rawValue)))::text[],
                \(PostgresArray.literal(outcomes.map { String($0.attempts) }))::integer[], \(PostgresArray.literal(outcomes.map(\.apnsID)))::text[],
                \(PostgresArray.literal(outcomes.map { $0.status.map(String.init) }))::integer[], \(PostgresArray.literal(outcomes.map(\.reason)))::text[])
            AS v(r, s, a, i, st, re)
        """
    }

    func lockMigrations(_ connection: any SQLConnection) throws(StoreError) {
        // An arbitrary constant naming "Pushfan migrations".
        try connection.execute("SELECT pg_advisory_xact_lock(7316504)")
    }

    /// A sequence hands out numbers at insert, not at commit: two API processes appending at
    /// once could commit 151-200 before 100-150, and a reader paging `after=200` would never
    /// see those. Taken before the inserts, the lock makes numbers and commits go in turn.
    func lockOperatorLog(_ connection: any SQLConnection) throws(StoreError) {
        // An arbitrary constant naming "Pushfan operator log".
        try connection.execute("SELECT pg_advisory_xact_lock(7316505)")
    }

    func script(of migration: Schema.Migration) -> String { migration.postgres }

    /// Also a vacuum, which marks the new pages all-visible so that computing shard
    /// boundaries is an index-only scan (measured at 1M devices: expansion 556k/s before,
    /// 706k/s after; the vacuum took 1.5 s). VACUUM refuses to run in a transaction block,
    /// which a multi-statement script is: one call per table.
    func refreshStatistics(_ connection: any SQLConnection) throws(StoreError) {
        try connection.executeScript("VACUUM (ANALYZE) devices")
        try connection.executeScript("VACUUM (ANALYZE) device_tags")
    }
}

/// PostgreSQL's way of writing parameters, false and JSONB attributes.
struct PostgresSyntax: SQLSyntax {
    func placeholder(_ number: Int, type: SQLParameterType?) -> String {
        type.map { "$\(number)::\($0.rawValue)" } ?? "$\(number)"
    }

    var falseValue: String { "FALSE" }

    var byteOrder: String { " COLLATE \"C\"" }

    func attribute(_ key: String, kind: SQLAttributeKind, ordering: Bool, bind: (SQLValue) -> String) -> (check: String, member: String) {
        let name = bind(.text(key))
        switch kind {
        case .text:
            return ("jsonb_typeof(d.attributes -> \(name)) = 'string'", "(d.attributes ->> \(name))" + (ordering ? byteOrder : ""))
        case .number:
            return ("jsonb_typeof(d.attributes -> \(name)) = 'number'", "(d.attributes ->> \(name))::numeric")
        case .bool:
            return ("jsonb_typeof(d.attributes -> \(name)) = 'boolean'", "(d.attributes ->> \(name))")
        }
    }

    func jsonText(_ column: String, key: String, bind: (SQLValue) -> String) -> String {
        "(\(column)::jsonb ->> \(bind(.text(key))))"
    }

    /// NULL unless the member is a string (`->>` would turn 5 into "5", which SQLite's
    /// json_extract keeps a number, never equal to a text id).
    func deviceUser(_ alias: String) -> String { Self.user(of: "\(alias).attributes") }

    static func user(of attributes: String) -> String {
        "(CASE WHEN jsonb_typeof(\(attributes) -> 'user_id') = 'string' THEN \(attributes) ->> 'user_id' END)"
    }
}
