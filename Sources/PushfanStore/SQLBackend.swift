import PushfanMessages

/// Everything that differs between SQLite and PostgreSQL for the store's concerns, behind
/// one type per dialect (`SQLiteBackend`, `PostgresBackend`): the concerns write one
/// statement for both and ask the backend only where the dialects part ways; none of them
/// tests the dialect or downcasts a connection. How a dialect writes placeholders, false
/// and JSON attributes, for statements and compiled segments alike, is its `SQLSyntax`.
protocol SQLBackend: Sendable {
    /// Opens one connection.
    func connect() throws(StoreError) -> any SQLConnection

    /// Whether a large import is split over every connection at once (PostgreSQL: the work
    /// is the server's, one core per connection) or kept on the first (SQLite: one writer,
    /// and one page cache kept warm).
    var importsInParallel: Bool { get }

    /// The device writer built for this backend's bulk path (see `DeviceWriter`).
    func upsert(_ connection: any SQLConnection, app: String, devices: [ValidatedDevice], now: Int64, returningRowKeys: Bool) throws(StoreError) -> DeviceWriter.Written

    /// Engagement counting's per-event rows, each the backend's fastest way (`EngagementRows`):
    /// for each event, whether its id was new; for each device of a group, whether it was the
    /// group's first of it; which devices the app has, with their rows; and which of those
    /// rows are still there, with their devices' ids.
    func insertAbsentEvents(_ connection: any SQLConnection, _ events: [EngagementEvent], now: Int64) throws(StoreError) -> [Bool]
    func insertAbsentGroupDevices(_ connection: any SQLConnection, _ devices: [EngagementRows.GroupDevice]) throws(StoreError) -> [Bool]
    func knownDevices(_ connection: any SQLConnection, app: String, _ ids: [String]) throws(StoreError) -> [String: Int64]
    func liveDevices(_ connection: any SQLConnection, _ rowKeys: [Int64]) throws(StoreError) -> [Int64: String]

    /// ` IN (v1, v2, ...)` or its equivalent for one column.
    func isIn(_ values: [SQLValue], type: String) -> SQLStatement

    /// Inside a transaction: makes finishers of one campaign take turns on its row.
    func lockCampaign(_ connection: any SQLConnection, _ campaign: CampaignKey) throws(StoreError)

    /// Inside a transaction: makes admitters of these devices (row keys of `app`) take turns,
    /// so a frequency-cap check sees every push admitted before it.
    func lockDevices(_ connection: any SQLConnection, app: String, _ rowKeys: [SQLValue]) throws(StoreError)

    /// The row source of a claim insert: `(campaign, row_key, device_id, 'claimed', 0,
    /// owner, lease_until, claimed_at)` for each target.
    func claimRows(campaign: CampaignKey, _ targets: ArraySlice<DeviceTarget>, owner: String, leaseUntil: Int64, now: Int64) -> SQLStatement

    /// A relation `v(r, s, a, i, st, re)` of outcomes (row key, state, attempts, apns id,
    /// status, reason) for `UPDATE … FROM`.
    func outcomeRows(_ outcomes: ArraySlice<LedgerOutcome>) -> SQLStatement

    /// Inside the migration transaction: makes concurrent starters take turns.
    func lockMigrations(_ connection: any SQLConnection) throws(StoreError)

    /// Inside a transaction appending to the operator log: appenders take turns, so its
    /// sequence numbers commit in their order (a reader paging by them skips none).
    func lockOperatorLog(_ connection: any SQLConnection) throws(StoreError)

    /// A migration's SQL for this dialect.
    func script(of migration: Schema.Migration) -> String

    /// Fresh planner statistics after a bulk import.
    func refreshStatistics(_ connection: any SQLConnection) throws(StoreError)
}
