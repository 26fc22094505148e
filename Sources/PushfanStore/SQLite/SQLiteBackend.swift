import PushfanMessages

/// SQLite's side of every dialect difference.
struct SQLiteBackend: SQLBackend {
    let path: String
    let busyTimeout: Duration

    func connect() throws(StoreError) -> any SQLConnection { try SQLiteConnection(path: path, busyTimeout: busyTimeout) }

    var importsInParallel: Bool { false }

    func upsert(_ connection: any SQLConnection, app: String, devices: [ValidatedDevice], now: Int64, returningRowKeys: Bool) throws(StoreError) -> DeviceWriter.Written {
        try SQLiteDeviceWriter.upsert(try sqlite(connection), app: app, devices: devices, now: now, returningRowKeys: returningRowKeys)
    }

    func insertAbsentEvents(_ connection: any SQLConnection, _ events: [EngagementEvent], now: Int64) throws(StoreError) -> [Bool] {
        try SQLiteEngagementRows.insertAbsentEvents(try sqlite(connection), events, now: now)
    }

    func insertAbsentGroupDevices(_ connection: any SQLConnection, _ devices: [EngagementRows.GroupDevice]) throws(StoreError) -> [Bool] {
        try SQLiteEngagementRows.insertAbsentGroupDevices(try sqlite(connection), devices)
    }

    func liveDevices(_ connection: any SQLConnection, _ rowKeys: [Int64]) throws(StoreError) -> [Int64: String] {
        try SQLiteEngagementRows.liveDevices(try sqlite(connection), rowKeys)
    }

    func knownDevices(_ connection: any SQLConnection, app: String, _ ids: [String]) throws(StoreError) -> [String: Int64] {
        try SQLiteEngagementRows.knownDevices(try sqlite(connection), app: app, ids)
    }

    private func sqlite(_ connection: any SQLConnection) throws(StoreError) -> SQLiteConnection {
        guard let sqlite = connection as? SQLiteConnection else { throw StoreError.database("a SQLite backend was given \(type(of: connection))") }
        return sqlite
    }

    func isIn(_ values: [SQLValue], type: String) -> SQLStatement {
        var statement: SQLStatement = " IN ("
        for (index, value) in values.enumerated() { statement.append(index == 0 ? "\(value)" : ", \(value)") }
        statement.append(")")
        return statement
    }

    /// SQLite transactions take the write lock when they begin: finishers already take turns.
    func lockCampaign(_ connection: any SQLConnection, _ campaign: CampaignKey) throws(StoreError) {}

    /// The write transaction is already one at a time.
    func lockDevices(_ connection: any SQLConnection, app: String, _ rowKeys: [SQLValue]) throws(StoreError) {}

    func claimRows(campaign: CampaignKey, _ targets: ArraySlice<DeviceTarget>, owner: String, leaseUntil: Int64, now: Int64) -> SQLStatement {
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

    /// The write lock, taken at BEGIN, already orders appenders.
    func lockOperatorLog(_ connection: any SQLConnection) throws(StoreError) {}

    func script(of migration: Schema.Migration) -> String { migration.sqlite }

    func refreshStatistics(_ connection: any SQLConnection) throws(StoreError) {
        try connection.executeScript("PRAGMA optimize;")
    }
}

/// SQLite's way of writing parameters, false and JSON attributes.
struct SQLiteSyntax: SQLSyntax {
    /// Bare `?`, bound in order: numbered `?N` makes SQLite's parser look each one up in a
    /// list, which is quadratic in long multi-row statements.
    func placeholder(_ number: Int, type: SQLParameterType?) -> String { "?" }

    var falseValue: String { "0" }

    /// BINARY, SQLite's default collation, already compares bytes.
    var byteOrder: String { "" }

    func attribute(_ key: String, kind: SQLAttributeKind, ordering: Bool, bind: (SQLValue) -> String) -> (check: String, member: String) {
        // A JSON path with the name quoted, so '.' and '-' in it are literal.
        let path = SQLValue.text("$.\"\(key)\"")
        let typePath = bind(path)
        let check = switch kind {
        case .text: "json_type(d.attributes, \(typePath)) = 'text'"
        case .number: "json_type(d.attributes, \(typePath)) IN ('integer', 'real')"
        case .bool: "json_type(d.attributes, \(typePath)) IN ('true', 'false')"
        }
        let valuePath = bind(path)
        // json_type names a boolean 'true' or 'false', which is what a bool literal is bound
        // as; json_extract would turn it into 1 or 0.
        let member = kind == .bool ? "json_type(d.attributes, \(valuePath))" : "json_extract(d.attributes, \(valuePath))"
        return (check, member)
    }

    func jsonText(_ column: String, key: String, bind: (SQLValue) -> String) -> String {
        "json_extract(\(column), \(bind(.text("$.\"\(key)\""))))"
    }

    func deviceUser(_ alias: String) -> String { "json_extract(\(alias).attributes, '$.user_id')" }
}
