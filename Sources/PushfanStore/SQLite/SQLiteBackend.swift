import PushfanCore

/// SQLite's side of every dialect difference.
struct SQLiteBackend: SQLBackend {
    let path: String
    let busyTimeout: Duration

    func connect() throws(StoreError) -> any SQLConnection { try SQLiteConnection(path: path, busyTimeout: busyTimeout) }

    var importsInParallel: Bool { false }

    func upsert(_ connection: any SQLConnection, app: String, devices: [ValidatedDevice], now: Int64, returningRowKeys: Bool) throws(StoreError) -> DeviceWriter.Written {
        guard let sqlite = connection as? SQLiteConnection else { throw StoreError.database("a SQLite backend was given \(type(of: connection))") }
        return try SQLiteDeviceWriter.upsert(sqlite, app: app, devices: devices, now: now, returningRowKeys: returningRowKeys)
    }

    func isIn(_ values: [SQLValue], type: String) -> SQLStatement {
        var statement: SQLStatement = " IN ("
        for (index, value) in values.enumerated() { statement.append(index == 0 ? "\(value)" : ", \(value)") }
        statement.append(")")
        return statement
    }

    /// SQLite transactions take the write lock when they begin: finishers already take turns.
    func lockCampaign(_ connection: any SQLConnection, _ campaign: String) throws(StoreError) {}

    func claimRows(campaign: String, _ targets: ArraySlice<DeviceTarget>, owner: String, leaseUntil: Int64, now: Int64) -> SQLStatement {
        var rows: SQLStatement = " VALUES "
        for (index, target) in targets.enumerated() {
            if index > 0 { rows.append(",") }
            rows.append("(\(campaign), \(target.rowKey), \(target.deviceID), 'claimed', 0, \(owner), \(leaseUntil), \(now))")
        }
        return rows
    }

    func outcomeRows(_ outcomes: ArraySlice<LedgerOutcome>) -> SQLStatement {
        // VALUES columns are named column1..column6; the subquery renames them.
        var rows: SQLStatement = " (SELECT column1 AS r, column2 AS s, column3 AS a, column4 AS i, column5 AS st, column6 AS re FROM (VALUES "
        for (index, outcome) in outcomes.enumerated() {
            if index > 0 { rows.append(",") }
            rows.append("""
                (\(outcome.rowKey), \(outcome.state.rawValue), \(outcome.attempts), \(.optional(outcome.apnsID)), \(.optional(outcome.status.map(Int64.init))), \(.optional(outcome.reason)))
                """)
        }
        rows.append(")) AS v")
        return rows
    }

    /// The write transaction already serialises starters.
    func lockMigrations(_ connection: any SQLConnection) throws(StoreError) {}

    func script(of migration: Schema.Migration) -> String { migration.sqlite }

    func refreshStatistics(_ connection: any SQLConnection) throws(StoreError) {
        try connection.executeScript("PRAGMA optimize;")
    }
}
