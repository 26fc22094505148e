import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSchedule
import PushfanSupport

/// Devices: registration, bulk import, unregistering, lookups, and the token hygiene APNs'
/// answers call for.
package struct DeviceDirectory: Sendable {
    let executor: StoreExecutor
    private let registrations: GroupCommit<DeviceRegistrations.Item, Result<RegistrationResult, RegistrationRefusal>>

    init(executor: StoreExecutor) {
        self.executor = executor
        registrations = DeviceRegistrations.groups(executor)
    }

    /// Registers or updates a device (idempotent). A token registered before under another
    /// device id moves to this one: the old row is removed. Concurrent calls are committed
    /// together (`DeviceRegistrations`, `GroupCommit`).
    package func register(app: String, _ registration: DeviceRegistration) async throws(StoreError) -> RegistrationResult {
        try await register(app: app, validated: try Validation.device(registration, now: executor.clock.wallMillis))
    }

    /// The same, for a registration its caller validated already (`Validation.device`).
    package func register(app: String, validated: ValidatedDevice) async throws(StoreError) -> RegistrationResult {
        switch try await registrations.submit((app, validated, nil)) {
        case .success(let result): return result
        case .failure(let refusal): throw StoreError.database("a registration without a claim was refused: \(refusal)")
        }
    }

    /// Writes back a device read as `read` with one trait changed (`DeviceRegistration(read)`,
    /// edited), only if the row is still as read, tags included: false otherwise (a
    /// registration or another edit came in between; read again and redo the change), so that
    /// the edit never writes back a token the device has since replaced, nor undoes another edit.
    package func rewrite(app: String, _ registration: DeviceRegistration, unchangedSince read: DeviceRecord) async throws(StoreError) -> Bool {
        let now = executor.clock.wallMillis
        let validated = try Validation.device(registration, now: now)
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Bool in
                // PostgreSQL: no registration commits between this read and the write.
                try backend.lockDevices(connection, app: app, [.integer(read.rowKey)])
                guard try Self.records(connection, "app = \(app) AND device_id = \(read.deviceID)").first == read else { return false }
                _ = try backend.upsert(connection, app: app, devices: [validated], now: now, returningRowKeys: false)
                return true
            }
        }
    }

    /// The same, made with the application secret: written only when `claim` holds
    /// (`ApplicationClaim`), checked in the transaction that writes it.
    package func register(
        app: String, validated: ValidatedDevice, claim: ApplicationClaim
    ) async throws(StoreError) -> Result<RegistrationResult, RegistrationRefusal> {
        try await registrations.submit((app, validated, claim))
    }

    /// Imports a batch; every registration must already be validated (`Validation.device`).
    /// Within the batch the last line for a device id or a token wins. Returns how many rows
    /// were written.
    ///
    /// Where the backend imports in parallel (PostgreSQL, where most of the work is the
    /// server's, one core per connection) a large batch is split by device id and the parts
    /// are written on all connections at once, each in its own transaction (measured at 300k
    /// devices: 19 s on one connection, 15 s on two). The call returns when every part is
    /// written, so the next batch still comes after this one. SQLite has one writer at a
    /// time: one transaction, always on the first connection, so that one page cache stays
    /// warm with the index pages an import keeps touching (see SQLiteDeviceWriter).
    package func importDevices(app: String, _ devices: [ValidatedDevice]) async throws(StoreError) -> Int {
        let now = executor.clock.wallMillis
        let unique = DeviceWriter.lastWins(devices)
        guard executor.backend.importsInParallel, unique.count >= 2 * Self.smallestParallelPart else {
            return try await importPart(app: app, unique, now: now, lane: 0)
        }
        let parts = DeviceWriter.split(unique, into: StoreExecutor.connections)
        let results = await withTaskGroup(of: (Int, Result<Int, StoreError>).self) { group in
            for (index, part) in parts.enumerated() {
                group.addTask {
                    do throws(StoreError) { return (index, .success(try await self.importPart(app: app, part, now: now, lane: index))) } catch { return (index, .failure(error)) }
                }
            }
            var results: [(Int, Result<Int, StoreError>)] = []
            for await result in group { results.append(result) }
            return results
        }
        var written = 0
        for (index, result) in results {
            switch result {
            case .success(let count): written += count
            // Two parts can deadlock when tokens cross between them (A takes B's token while
            // B takes A's); PostgreSQL then aborts one. It runs again on its own.
            case .failure(let error) where error.isUnavailable: written += try await importPart(app: app, parts[index], now: now, lane: index)
            case .failure(let error): throw error
            }
        }
        return written
    }

    /// Fewest devices per part worth a connection of its own.
    package static let smallestParallelPart = 500

    private func importPart(app: String, _ devices: [ValidatedDevice], now: Int64, lane: Int) async throws(StoreError) -> Int {
        let backend = executor.backend
        return try await executor.run(lane: lane) { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                try StoreExecutor.requireApp(connection, app)
                // Row keys only when some device brings tokens of other kinds to write with it.
                let withTokens = devices.contains { !$0.tokens.isEmpty }
                let written = try backend.upsert(connection, app: app, devices: devices, now: now, returningRowKeys: withTokens)
                if withTokens { try DeviceTokens.write(connection, app: app, devices: devices, rowKeys: written.rowKeys, now: now) }
                return written.count
            }
        }
    }

    /// Readies the tables for reads after a bulk import: fresh planner statistics, so that
    /// segment counts and expansions plan with the table as it is now (and, on PostgreSQL, a
    /// vacuum; see `PostgresBackend`). Autovacuum would get there too, minutes later.
    package func refreshStatistics() async throws(StoreError) {
        let backend = executor.backend
        try await executor.run { connection throws(StoreError) in try backend.refreshStatistics(connection) }
    }

    /// Marks a device unregistered; it no longer receives campaigns. False if unknown.
    package func unregister(app: String, deviceID: String) async throws(StoreError) -> Bool {
        let now = executor.clock.wallMillis
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE devices SET status = 'unregistered', invalid_reason = 'unregistered', invalid_at = \(now)
                WHERE app = \(app) AND device_id = \(deviceID)
                """) > 0
        }
    }

    /// Devices of an app in row-key order, `limit` at a time after `after`.
    package func list(app: String, after: Int64? = nil, limit: Int = 100) async throws(StoreError) -> [DeviceRecord] {
        try await executor.run { connection throws(StoreError) in
            try Self.records(connection, "app = \(app) AND row_key > \(after ?? Int64.min) ORDER BY row_key LIMIT \(limit)")
        }
    }

    package func get(app: String, deviceID: String) async throws(StoreError) -> DeviceRecord? {
        try await executor.run { connection throws(StoreError) in
            try Self.records(connection, "app = \(app) AND device_id = \(deviceID)").first
        }
    }

    /// Marks the tokens of one page of answers in one transaction (one store call per page,
    /// not one per bad token). Returns how many devices were invalidated.
    @discardableResult
    package func applyHygiene(app: String, _ marks: [TokenMark], now: Int64) async throws(StoreError) -> Int {
        guard !marks.isEmpty else { return 0 }
        var normalized: [(mark: TokenMark, token: String)] = []
        for mark in marks { normalized.append((mark, try Validation.token(mark.token))) }
        let checked = normalized
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                var invalidated = try DeviceTokens.mark(connection, app: app, checked, now: now)
                for (mark, token) in checked where mark.tokenKind == .alert {
                    let at: Int64
                    if case .unregistered(let timestamp) = mark.kind { at = timestamp } else { at = now }
                    var update: SQLStatement = """
                        UPDATE devices SET status = 'invalid', invalid_reason = \(mark.reason), invalid_at = \(at)
                        WHERE app = \(app) AND environment = \(mark.environment.rawValue) AND token = \(token) AND status = 'active'
                        """
                    // A 410 counts only if the device did not register again after APNs' moment.
                    if case .unregistered = mark.kind { update.append(" AND last_seen_at <= \(at)") }
                    invalidated += try connection.execute(update)
                }
                return invalidated
            }
        }
    }

    /// Applies APNs' 410 (Unregistered/ExpiredToken) with its timestamp: the device is
    /// invalidated only if it did not register again after that moment. True if invalidated.
    package func applyUnregistered(app: String, environment: APNsEnvironment, token: String, at timestamp: Int64, reason: String = "Unregistered") async throws(StoreError) -> Bool {
        try await applyHygiene(app: app, [TokenMark(environment: environment, token: token, kind: .unregistered(at: timestamp), reason: reason)], now: executor.clock.wallMillis) > 0
    }

    /// Records a token rejection (BadDeviceToken, DeviceTokenNotForTopic) for the token in
    /// that environment; the device leaves every later expansion. True if invalidated.
    package func invalidate(app: String, environment: APNsEnvironment, token: String, reason: String, now: Int64) async throws(StoreError) -> Bool {
        try await applyHygiene(app: app, [TokenMark(environment: environment, token: token, kind: .invalid, reason: reason)], now: now) > 0
    }

    /// The app's invalid devices with every campaign whose token rejection (ledger state
    /// `invalid_token`) came after the device's last registration: the evidence
    /// `pushfan devices repair-tokens` weighs. Ordered by device id.
    package func tokenInvalidations(app: String) async throws(StoreError) -> [TokenInvalidation] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("""
                SELECT d.device_id, l.campaign, c.definition, l.reason
                FROM campaigns c
                JOIN deliveries l ON l.campaign = c.id AND l.state = \(LedgerState.invalidToken.rawValue)
                JOIN devices d ON d.app = c.app AND d.row_key = l.row_key
                WHERE c.app = \(app) AND d.status = 'invalid' AND l.finished_at >= d.last_seen_at
                ORDER BY d.device_id, l.campaign
                """) { row throws(StoreError) in
                TokenInvalidation(deviceID: row.text(0) ?? "", campaign: try row.campaign(1).id, definition: row.text(2), ledgerReason: row.text(3))
            }
        }
    }

    /// Makes invalid devices active again (`devices repair-tokens --apply`); devices that
    /// are not invalid are left as they are. Returns how many changed.
    package func restore(app: String, deviceIDs: [String]) async throws(StoreError) -> Int {
        guard !deviceIDs.isEmpty else { return 0 }
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                var restored = 0
                for deviceID in deviceIDs {
                    restored += try connection.execute("""
                        UPDATE devices SET status = 'active', invalid_reason = NULL, invalid_at = NULL
                        WHERE app = \(app) AND device_id = \(deviceID) AND status = 'invalid'
                        """)
                }
                return restored
            }
        }
    }

    /// Token → device id for all the app's devices, whatever their status: to name the
    /// devices of an APNs-side log.
    package func deviceIDsByToken(app: String) async throws(StoreError) -> [String: String] {
        try await executor.run { connection throws(StoreError) in
            var devices: [String: String] = [:]
            try connection.query("SELECT token, device_id FROM devices WHERE app = \(app)") { row throws(StoreError) in
                devices[row.text(0) ?? ""] = row.text(1) ?? ""
            }
            // Tokens of other kinds (VoIP, Live Activity…) belong to their devices too.
            try connection.query(
                "SELECT t.token, d.device_id FROM device_tokens t JOIN devices d ON d.row_key = t.row_key WHERE t.app = \(app)"
            ) { row throws(StoreError) in
                devices[row.text(0) ?? ""] = row.text(1) ?? ""
            }
            return devices
        }
    }

    /// Device rows matching `condition`, each with its tags.
    /// `tags`: also each device's tags, one query per device (a caller reading many at once
    /// reads them itself).
    static func records(_ connection: any SQLConnection, _ condition: SQLStatement, tags: Bool = true) throws(StoreError) -> [DeviceRecord] {
        var records = try connection.queryAll("""
            SELECT row_key, device_id, token, environment, locale, timezone, app_version, os_version, attributes,
                   created_at, last_seen_at, status, invalid_reason, invalid_at, quiet_start, quiet_end
            FROM devices WHERE\u{20}
            """ + condition, Self.deviceRecord)
        for index in records.indices where tags {
            records[index].tags = try connection.queryAll("SELECT tag FROM device_tags WHERE row_key = \(records[index].rowKey) ORDER BY tag") { $0.text(0) ?? "" }
        }
        return records
    }

    private static func deviceRecord(_ row: any SQLRow) -> DeviceRecord {
        let attributes = attributes(row.text(8))
        return DeviceRecord(
            rowKey: row.int(0) ?? 0, deviceID: row.text(1) ?? "", token: row.text(2) ?? "",
            environment: APNsEnvironment(rawValue: row.text(3) ?? "") ?? .production, locale: row.text(4), timezone: row.text(5),
            appVersion: row.text(6), osVersion: row.text(7), tags: [], attributes: attributes,
            createdAt: row.int(9) ?? 0, lastSeenAt: row.int(10) ?? 0, status: DeviceStatus(rawValue: row.text(11) ?? "") ?? .active,
            invalidReason: row.text(12), invalidAt: row.int(13), quietHours: quietHours(row, start: 14))
    }

    /// A stored attributes object (TEXT in SQLite, JSONB's text in PostgreSQL); empty when
    /// it is missing or does not read.
    static func attributes(_ text: String?) -> [String: JSONValue] {
        text.flatMap(DeviceJSONReader.object) ?? [:]
    }

    /// The quiet hours kept in columns `start` and `start + 1`; nil when there are none.
    static func quietHours(_ row: any SQLRow, start column: Int) -> QuietHours? {
        guard let start = row.int(column), let end = row.int(column + 1) else { return nil }
        return try? QuietHours(start: Int(start), end: Int(end))
    }
}
