import Dispatch
import Foundation
import PushfanCore
import PushfanCrypto
import Synchronization

/// The device store: apps, devices, segments, audience expansion and the delivery ledger,
/// on SQLite (embedded default) or PostgreSQL (at scale), with the same behaviour on both.
///
/// Every call runs on the store's own serial queue, never on Swift's cooperative pool,
/// because SQLite and libpq calls block.
package final class DeviceStore: Sendable {
    private let executor: ConnectionExecutor
    package let dialect: SQLDialect
    /// Where the store lives, with any password removed (safe to log).
    package let location: String

    /// Opens `sqlite:PATH` or a `postgres://` / `postgresql://` URL and applies migrations.
    package static func open(_ url: String, logger: Logger) async throws(StoreError) -> DeviceStore {
        let store: DeviceStore
        if url.hasPrefix("sqlite:") {
            // sqlite:PATH[?busy_timeout_ms=N]
            let parts = url.dropFirst("sqlite:".count).split(separator: "?", maxSplits: 1)
            let path = parts.first.map(String.init) ?? ""
            guard !path.isEmpty else { throw StoreError.invalidInput("database URL 'sqlite:' needs a path, e.g. sqlite:pushfan.db") }
            var busyTimeout = Duration.seconds(5)
            if parts.count == 2 {
                guard parts[1].hasPrefix("busy_timeout_ms="), let millis = Int(parts[1].dropFirst("busy_timeout_ms=".count)), millis >= 0 else {
                    throw StoreError.invalidInput("the only SQLite option is busy_timeout_ms=N, got '\(parts[1])'")
                }
                busyTimeout = .milliseconds(millis)
            }
            let timeout = busyTimeout
            store = try await DeviceStore(location: url) { () throws(StoreError) -> any SQLConnection in try SQLiteConnection(path: path, busyTimeout: timeout) }
        } else if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            store = try await DeviceStore(location: PostgresConnection.redact(url)) { () throws(StoreError) -> any SQLConnection in
                try PostgresConnection(url: url, logger: logger)
            }
        } else {
            throw StoreError.invalidInput("database must be sqlite:PATH or a postgres:// URL, got '\(url)'")
        }
        let applied = try await store.migrate()
        if !applied.isEmpty { logger.notice("store.migrated", ["store.versions": applied.map(String.init).joined(separator: ","), "store.location": store.location]) }
        return store
    }

    private init(location: String, connect: @escaping @Sendable () throws(StoreError) -> any SQLConnection) async throws(StoreError) {
        self.executor = try await ConnectionExecutor.make(connect)
        self.dialect = executor.dialect
        self.location = location
    }

    private func run<T: Sendable>(lane: Int? = nil, _ body: @escaping @Sendable (any SQLConnection) throws(StoreError) -> T) async throws(StoreError) -> T {
        try await executor.run(lane: lane, body)
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Applies pending migrations; returns the versions applied now.
    @discardableResult
    package func migrate() async throws(StoreError) -> [Int] {
        try await run { connection throws(StoreError) in try Schema.migrate(connection, now: DeviceStore.now()) }
    }

    package func schemaVersion() async throws(StoreError) -> Int {
        try await run { connection throws(StoreError) in
            let version: Int64?? = try connection.queryOne("SELECT MAX(version) FROM schema_migrations") { $0.int(0) }
            return Int((version ?? nil) ?? 0)
        }
    }

    // MARK: Apps

    /// Adds an app and returns its secret, which is shown once and stored only hashed.
    package func addApp(_ registration: AppRegistration) async throws(StoreError) -> String {
        try Validation.appKey(registration.app)
        guard !registration.topic.isEmpty, registration.topic.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" }) else {
            throw StoreError.invalidInput("topic must be a bundle id like com.example.app, got '\(registration.topic)'")
        }
        guard (1...1_000_000).contains(registration.ratePerSecond) else {
            throw StoreError.invalidInput("rate must be between 1 and 1000000 per second, got \(registration.ratePerSecond)")
        }
        let secret = SecretHash.generateSecret()
        let hashed = SecretHash(secret: secret)
        let (team, key, keyFile, certFile, certKey): (String?, String?, String?, String?, String?) =
            switch registration.credentials {
            case .token(let teamID, let keyID, let file): (teamID, keyID, file, nil, nil)
            case .certificate(let certificate, let keyPath): (nil, nil, nil, certificate, keyPath)
            }
        let now = DeviceStore.now()
        let inserted = try await run { connection throws(StoreError) in
            try connection.execute("""
                INSERT INTO apps (app, secret_salt, secret_hash, topic, team_id, key_id, key_file, cert_file, cert_key_file, environment, rate_per_second, created_at)
                VALUES (\(registration.app), \(hashed.salt), \(hashed.hash), \(registration.topic), \(.optional(team)), \(.optional(key)), \(.optional(keyFile)),
                        \(.optional(certFile)), \(.optional(certKey)), \(registration.environment.rawValue), \(registration.ratePerSecond), \(now))
                ON CONFLICT (app) DO NOTHING
                """)
        }
        guard inserted == 1 else { throw StoreError.conflict("app \(registration.app) already exists") }
        return secret
    }

    package func app(_ key: String) async throws(StoreError) -> AppRecord? {
        try await run { connection throws(StoreError) in
            try connection.queryOne("""
                SELECT app, topic, team_id, key_id, key_file, cert_file, cert_key_file, environment, rate_per_second, created_at
                FROM apps WHERE app = \(key)
                """) { row in
                let credentials: APNsCredentialsReference =
                    if let team = row.text(2), let keyID = row.text(3), let file = row.text(4) {
                        .token(teamID: team, keyID: keyID, keyFile: file)
                    } else {
                        .certificate(certificateFile: row.text(5) ?? "", keyFile: row.text(6))
                    }
                return AppRecord(
                    app: row.text(0) ?? "", topic: row.text(1) ?? "", credentials: credentials,
                    environment: APNsEnvironment(rawValue: row.text(7) ?? "") ?? .production,
                    ratePerSecond: Int(row.int(8) ?? 0), createdAt: row.int(9) ?? 0)
            }
        }
    }

    /// Checks an app's secret in constant time.
    package func verifySecret(app: String, secret: String) async throws(StoreError) -> Bool {
        let stored = try await run { connection throws(StoreError) in
            try connection.queryOne("SELECT secret_salt, secret_hash FROM apps WHERE app = \(app)") { row in
                SecretHash(salt: row.text(0) ?? "", hash: row.text(1) ?? "")
            }
        }
        return stored?.matches(secret) ?? false
    }

    // MARK: Devices

    /// Registers or updates a device (idempotent). A token registered before under another
    /// device id moves to this one: the old row is removed.
    package func register(app: String, _ registration: DeviceRegistration) async throws(StoreError) -> RegistrationResult {
        let device = try Validation.device(registration)
        let now = DeviceStore.now()
        return try await run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> RegistrationResult in
                try DeviceStore.requireApp(connection, app)
                let existed = try connection.queryOne("SELECT 1 FROM devices WHERE app = \(app) AND device_id = \(device.deviceID)") { $0.int(0) } != nil
                let written = try DeviceWriter.upsert(connection, app: app, devices: [device], now: now, returningRowKeys: true)
                guard let rowKey = written.rowKeys[device.deviceID] else { throw StoreError.database("upsert returned no row key") }
                return RegistrationResult(rowKey: rowKey, created: !existed, tokenMovedFrom: written.movedFrom[device.deviceID] ?? [])
            }
        }
    }

    /// Imports a batch; every registration must already be validated (`Validation.device`).
    /// Within the batch the last line for a device id or a token wins. Returns how many rows
    /// were written.
    ///
    /// On PostgreSQL most of an import's work is the server's, one core per connection: a
    /// large batch is split by device id and the parts are written on all connections at
    /// once, each in its own transaction (measured at 300k devices: 19 s on one connection,
    /// 15 s on two). The call returns when every part is written, so the next batch still
    /// comes after this one. SQLite has one writer at a time: one transaction.
    package func importDevices(app: String, _ devices: [ValidatedDevice]) async throws(StoreError) -> Int {
        let now = DeviceStore.now()
        let unique = DeviceWriter.lastWins(devices)
        // SQLite: always the first connection, so that one page cache stays warm with the
        // index pages an import keeps touching (see SQLiteDeviceWriter).
        guard dialect == .postgres, unique.count >= 2 * DeviceStore.smallestParallelPart else { return try await importPart(app: app, unique, now: now, lane: 0) }
        let parts = DeviceWriter.split(unique, into: ConnectionExecutor.connections)
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
    static let smallestParallelPart = 500

    private func importPart(app: String, _ devices: [ValidatedDevice], now: Int64, lane: Int) async throws(StoreError) -> Int {
        try await run(lane: lane) { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                try DeviceStore.requireApp(connection, app)
                return try DeviceWriter.upsert(connection, app: app, devices: devices, now: now, returningRowKeys: false).count
            }
        }
    }

    /// Readies the tables for reads after a bulk import: fresh planner statistics, so that
    /// segment counts and expansions plan with the table as it is now; on PostgreSQL also a
    /// vacuum, which marks the new pages all-visible so that computing shard boundaries is
    /// an index-only scan (measured at 1M devices: expansion 556k/s before, 706k/s after;
    /// the vacuum took 1.5 s). Autovacuum would get there too, minutes later.
    package func refreshStatistics() async throws(StoreError) {
        try await run { connection throws(StoreError) in
            if connection.dialect == .postgres {
                // VACUUM refuses to run in a transaction block, which a multi-statement
                // script is: one call per table.
                try connection.executeScript("VACUUM (ANALYZE) devices")
                try connection.executeScript("VACUUM (ANALYZE) device_tags")
            } else {
                try connection.executeScript("PRAGMA optimize;")
            }
        }
    }

    /// Marks a device unregistered; it no longer receives campaigns. False if unknown.
    package func unregister(app: String, deviceID: String) async throws(StoreError) -> Bool {
        let now = DeviceStore.now()
        return try await run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE devices SET status = 'unregistered', invalid_reason = 'unregistered', invalid_at = \(now)
                WHERE app = \(app) AND device_id = \(deviceID)
                """) > 0
        }
    }

    /// Devices of an app in row-key order, `limit` at a time after `after`.
    package func devices(app: String, after: Int64? = nil, limit: Int = 100) async throws(StoreError) -> [DeviceRecord] {
        try await run { connection throws(StoreError) in
            try DeviceStore.records(connection, "app = \(app) AND row_key > \(after ?? Int64.min) ORDER BY row_key LIMIT \(limit)")
        }
    }

    package func device(app: String, deviceID: String) async throws(StoreError) -> DeviceRecord? {
        try await run { connection throws(StoreError) in
            try DeviceStore.records(connection, "app = \(app) AND device_id = \(deviceID)").first
        }
    }

    /// Device rows matching `condition`, each with its tags.
    private static func records(_ connection: any SQLConnection, _ condition: SQLStatement) throws(StoreError) -> [DeviceRecord] {
        var records = try connection.queryAll("""
            SELECT row_key, device_id, token, environment, locale, timezone, app_version, os_version, attributes,
                   created_at, last_seen_at, status, invalid_reason, invalid_at
            FROM devices WHERE\u{20}
            """ + condition, DeviceStore.deviceRecord)
        for index in records.indices {
            records[index].tags = try connection.queryAll("SELECT tag FROM device_tags WHERE row_key = \(records[index].rowKey) ORDER BY tag") { $0.text(0) ?? "" }
        }
        return records
    }

    // MARK: Segments

    /// Saves (or replaces) a named segment after checking that it parses.
    package func saveSegment(app: String, name: String, expression: String) async throws(StoreError) {
        try Validation.segmentName(name)
        do { _ = try SegmentParser.parse(expression) } catch { throw StoreError.invalidInput("segment \(name): \(error)") }
        let now = DeviceStore.now()
        try await run { connection throws(StoreError) in
            try DeviceStore.requireApp(connection, app)
            try connection.execute("""
                INSERT INTO segments (app, name, expression, created_at) VALUES (\(app), \(name), \(expression), \(now))
                ON CONFLICT (app, name) DO UPDATE SET expression = excluded.expression, created_at = excluded.created_at
                """)
        }
    }

    package func segment(app: String, name: String) async throws(StoreError) -> String? {
        try await run { connection throws(StoreError) in
            try connection.queryOne("SELECT expression FROM segments WHERE app = \(app) AND name = \(name)") { $0.text(0) }.flatMap { $0 }
        }
    }

    /// Active devices of the app matching the segment (all active devices for nil).
    package func count(app: String, segment: SegmentExpression?, now: Int64 = DeviceStore.now()) async throws(StoreError) -> Int {
        try await run { connection throws(StoreError) in
            let count: Int64?? = try connection.queryOne("SELECT COUNT(*) FROM devices d WHERE d.app = \(app) AND d.status = 'active'" + DeviceStore.filter(segment, now: now)) { $0.int(0) }
            return Int((count ?? nil) ?? 0)
        }
    }

    // MARK: Expansion

    /// Splits the app's devices into contiguous row-key ranges of about `size` devices.
    /// Cost: one query per shard that walks `size` entries of the app's row-key index
    /// (`OFFSET`; index-only once PostgreSQL has vacuumed the table), no segment evaluation.
    /// `found` sees each shard as soon as its boundary is known, so a caller can start on it
    /// while the rest are looked for.
    package func shards(app: String, size: Int, found: (ShardRange) -> Void = { _ in }) async throws(StoreError) -> [ShardRange] {
        guard size > 0 else { throw StoreError.invalidInput("shard size must be positive") }
        var shards: [ShardRange] = []
        var after: Int64?
        // One call per boundary rather than one for all: on a large app the whole walk takes
        // a while (0.2 s at 1M devices), and other calls on the same connection (a sender's
        // page in the same worker, or the scan of a shard already found) need not wait for
        // all of it.
        while true {
            let lower = after
            let boundary = try await run { connection throws(StoreError) in
                try connection.queryOne("""
                    SELECT row_key FROM devices WHERE app = \(app) AND row_key > \(lower ?? Int64.min)
                    ORDER BY row_key LIMIT 1 OFFSET \(size - 1)
                    """) { $0.int(0) } ?? nil
            }
            guard let boundary else { break }
            shards.append(ShardRange(after: after, through: boundary))
            found(shards[shards.count - 1])
            after = boundary
        }
        let lower = after
        let more = try await run { connection throws(StoreError) in
            try connection.queryOne("SELECT 1 FROM devices WHERE app = \(app) AND row_key > \(lower ?? Int64.min) LIMIT 1") { $0.int(0) } != nil
        }
        if more || shards.isEmpty {
            shards.append(ShardRange(after: after, through: nil))
            found(shards[shards.count - 1])
        }
        return shards
    }

    /// One page of a shard: active matching devices with row key above `cursor` (and the
    /// shard's lower bound), in row-key order. Pass the last row key as the next cursor.
    package func page(
        app: String, segment: SegmentExpression?, shard: ShardRange, cursor: Int64?, limit: Int, now: Int64 = DeviceStore.now()
    ) async throws(StoreError) -> [DeviceTarget] {
        let lower = max(cursor ?? Int64.min, shard.after ?? Int64.min)
        return try await run { connection throws(StoreError) in
            var statement: SQLStatement = """
                SELECT d.row_key, d.device_id, d.token, d.environment, d.locale FROM devices d
                WHERE d.app = \(app) AND d.status = 'active' AND d.row_key > \(lower)
                """
            if let through = shard.through { statement = statement + " AND d.row_key <= \(through)" }
            statement = statement + DeviceStore.filter(segment, now: now) + " ORDER BY d.row_key LIMIT \(limit)"
            var targets: [DeviceTarget] = []
            targets.reserveCapacity(limit)
            try connection.query(statement) { row throws(StoreError) in targets.append(DeviceStore.target(row)) }
            return targets
        }
    }

    // MARK: Ledger

    /// Records a campaign once; false when its id was already known (the same id twice is
    /// one campaign).
    package func recordCampaign(
        id: String, app: String, audience: Int, shards: Int, definition: String? = nil, status: String = "running", now: Int64 = DeviceStore.now()
    ) async throws(StoreError) -> Bool {
        try await run { connection throws(StoreError) in
            try connection.execute("""
                INSERT INTO campaigns (id, app, status, audience, shards, definition, created_at, updated_at)
                VALUES (\(id), \(app), \(status), \(audience), \(shards), \(.optional(definition)), \(now), \(now)) ON CONFLICT (id) DO NOTHING
                """) == 1
        }
    }

    /// The campaign as accepted (its JSON record), for senders that only got a task.
    package func campaignDefinition(_ id: String) async throws(StoreError) -> String? {
        try await run { connection throws(StoreError) in
            try connection.queryOne("SELECT definition FROM campaigns WHERE id = \(id)") { $0.text(0) }.flatMap { $0 }
        }
    }

    /// Marks one task (shard) of a campaign finished; returns how many of its shards are
    /// finished now. Idempotent: a task processed twice counts once.
    package func finishTask(campaign: String, shard: Int, now: Int64 = DeviceStore.now()) async throws(StoreError) -> Int {
        try await run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                // Finishers of one campaign take turns, so that the last one counts every
                // shard: under PostgreSQL's READ COMMITTED two tasks finishing at once would
                // each miss the other's row and neither would see the campaign complete.
                // (SQLite transactions take the write lock when they begin.)
                if connection.dialect == .postgres {
                    try connection.execute("SELECT 1 FROM campaigns WHERE id = \(campaign) FOR UPDATE")
                }
                try connection.execute("""
                    INSERT INTO campaign_tasks (campaign, shard, finished_at) VALUES (\(campaign), \(shard), \(now))
                    ON CONFLICT (campaign, shard) DO NOTHING
                    """)
                let count: Int64?? = try connection.queryOne("SELECT COUNT(*) FROM campaign_tasks WHERE campaign = \(campaign)") { $0.int(0) }
                return Int((count ?? nil) ?? 0)
            }
        }
    }

    /// Moves a campaign from `from` to `to`; true for the one caller that made the change,
    /// so exactly one worker announces a campaign's completion.
    package func transitionCampaign(_ id: String, from: String, to: String, now: Int64 = DeviceStore.now()) async throws(StoreError) -> Bool {
        try await run { connection throws(StoreError) in
            try connection.execute("UPDATE campaigns SET status = \(to), updated_at = \(now) WHERE id = \(id) AND status = \(from)") == 1
        }
    }

    /// Row keys of the app's active devices among these device ids (an explicit audience).
    package func rowKeys(app: String, deviceIDs: [String]) async throws(StoreError) -> [Int64] {
        var keys: [Int64] = []
        for start in stride(from: 0, to: deviceIDs.count, by: DeviceStore.bulkChunk) {
            let chunk = Array(deviceIDs[start..<min(start + DeviceStore.bulkChunk, deviceIDs.count)])
            keys += try await run { connection throws(StoreError) in
                try connection.queryAll(
                    "SELECT row_key FROM devices WHERE app = \(app) AND status = 'active' AND device_id"
                        + DeviceStore.isIn(chunk.map { .text($0) }, type: "text", connection.dialect)) { $0.int(0) ?? 0 }
            }
        }
        return keys.sorted()
    }

    package struct CampaignRow: Sendable, Equatable {
        package let id: String
        package let app: String
        package let status: String
        package let audience: Int
        package let shards: Int
    }

    package func campaign(_ id: String) async throws(StoreError) -> CampaignRow? {
        try await run { connection throws(StoreError) in
            try connection.queryOne("SELECT id, app, status, audience, shards FROM campaigns WHERE id = \(id)") { row in
                CampaignRow(id: row.text(0) ?? "", app: row.text(1) ?? "", status: row.text(2) ?? "", audience: Int(row.int(3) ?? 0), shards: Int(row.int(4) ?? 0))
            }
        }
    }

    /// The result of claiming a page.
    package struct Claim: Sendable, Equatable {
        /// Devices this owner must send now: newly claimed, already its own, or taken over
        /// from an owner whose lease ran out.
        package let toSend: [DeviceTarget]
        /// Devices of the page with a final outcome already (nothing to do).
        package let alreadyFinal: Int
        /// Devices claimed by another owner whose lease has not run out (retry later).
        package let heldElsewhere: Int
    }

    /// Claims a page's devices for a campaign: insert-if-absent, so re-processing a page
    /// after a crash never claims a device that already has its final outcome. A claim is
    /// leased to `owner`; after `lease` another owner may take it over.
    package func claim(
        campaign: String, targets: [DeviceTarget], owner: String, lease: Duration = .seconds(60), now: Int64 = DeviceStore.now()
    ) async throws(StoreError) -> Claim {
        guard let low = targets.map(\.rowKey).min(), let high = targets.map(\.rowKey).max() else {
            return Claim(toSend: [], alreadyFinal: 0, heldElsewhere: 0)
        }
        let leaseUntil = now + lease.milliseconds
        return try await run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Claim in
                var inserted = 0
                // Set-based: one statement per chunk, not one per device (the worker's hot path).
                for start in stride(from: 0, to: targets.count, by: DeviceStore.bulkChunk) {
                    let chunk = targets[start..<min(start + DeviceStore.bulkChunk, targets.count)]
                    var insert: SQLStatement = "INSERT INTO deliveries (campaign, row_key, device_id, state, attempts, claimed_by, lease_until, claimed_at)"
                    if connection.dialect == .postgres {
                        insert.append("""
                             SELECT \(campaign), u.r, u.d, 'claimed', 0, \(owner), \(leaseUntil), \(now)
                            FROM unnest(\(PostgresArray.literal(chunk.map { String($0.rowKey) }))::bigint[], \(PostgresArray.literal(chunk.map(\.deviceID)))::text[]) AS u(r, d)
                            """)
                    } else {
                        insert.append(" VALUES ")
                        for (index, target) in chunk.enumerated() {
                            if index > 0 { insert.append(",") }
                            insert.append("(\(campaign), \(target.rowKey), \(target.deviceID), 'claimed', 0, \(owner), \(leaseUntil), \(now))")
                        }
                    }
                    insert.append(" ON CONFLICT (campaign, row_key) DO NOTHING")
                    inserted += try connection.execute(insert)
                }
                // The usual case, a page seen for the first time: every device is new and ours.
                if inserted == targets.count { return Claim(toSend: targets, alreadyFinal: 0, heldElsewhere: 0) }
                try connection.execute("""
                    UPDATE deliveries SET claimed_by = \(owner), lease_until = \(leaseUntil)
                    WHERE campaign = \(campaign) AND row_key >= \(low) AND row_key <= \(high) AND state = 'claimed'
                      AND (claimed_by = \(owner) OR lease_until < \(now))
                    """)
                var mine = Set<Int64>()
                var final = 0, elsewhere = 0
                let wanted = Set(targets.map(\.rowKey))
                try connection.query("""
                    SELECT row_key, state, claimed_by FROM deliveries
                    WHERE campaign = \(campaign) AND row_key >= \(low) AND row_key <= \(high)
                    """) { row throws(StoreError) in
                    let key = row.int(0) ?? 0
                    guard wanted.contains(key) else { return }
                    if row.text(1) != LedgerState.claimed.rawValue {
                        final += 1
                    } else if row.text(2) == owner {
                        mine.insert(key)
                    } else {
                        elsewhere += 1
                    }
                }
                return Claim(toSend: targets.filter { mine.contains($0.rowKey) }, alreadyFinal: final, heldElsewhere: elsewhere)
            }
        }
    }

    /// Records final outcomes of claimed devices. A device that already has a final outcome
    /// keeps it (the first outcome wins); returns how many rows were finalised now.
    @discardableResult
    package func record(campaign: String, _ outcomes: [LedgerOutcome], now: Int64 = DeviceStore.now()) async throws(StoreError) -> Int {
        try await run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                var total = 0
                // Per state, so the rows that really changed can be added to the running totals.
                for (state, outcomes) in Dictionary(grouping: outcomes.filter(\.state.isFinal), by: \.state) {
                    let changed = try DeviceStore.finalize(connection, campaign: campaign, outcomes, now: now)
                    if changed > 0 {
                        try connection.execute("""
                            INSERT INTO campaign_counts (campaign, state, count) VALUES (\(campaign), \(state.rawValue), \(changed))
                            ON CONFLICT (campaign, state) DO UPDATE SET count = campaign_counts.count + excluded.count
                            """)
                    }
                    total += changed
                }
                return total
            }
        }
    }

    /// Sets final outcomes of claimed rows; returns how many changed.
    private static func finalize(_ connection: any SQLConnection, campaign: String, _ final: [LedgerOutcome], now: Int64) throws(StoreError) -> Int {
        var changed = 0
        // One UPDATE ... FROM per chunk (SQLite 3.33+ and PostgreSQL both have it).
        for start in stride(from: 0, to: final.count, by: DeviceStore.bulkChunk) {
            let chunk = final[start..<min(start + DeviceStore.bulkChunk, final.count)]
            var update: SQLStatement = """
                UPDATE deliveries SET state = v.s, attempts = v.a, apns_id = v.i, status = v.st, reason = v.re, finished_at = \(now) FROM
                """
            if connection.dialect == .postgres {
                update.append("""
                     unnest(\(PostgresArray.literal(chunk.map { String($0.rowKey) }))::bigint[], \(PostgresArray.literal(chunk.map(\.state.rawValue)))::text[],
                            \(PostgresArray.literal(chunk.map { String($0.attempts) }))::integer[], \(PostgresArray.literal(chunk.map(\.apnsID)))::text[],
                            \(PostgresArray.literal(chunk.map { $0.status.map(String.init) }))::integer[], \(PostgresArray.literal(chunk.map(\.reason)))::text[])
                        AS v(r, s, a, i, st, re)
                    """)
            } else {
                // VALUES columns are named column1..column6; the subquery renames them.
                update.append(" (SELECT column1 AS r, column2 AS s, column3 AS a, column4 AS i, column5 AS st, column6 AS re FROM (VALUES ")
                for (index, outcome) in chunk.enumerated() {
                    if index > 0 { update.append(",") }
                    update.append("""
                        (\(outcome.rowKey), \(outcome.state.rawValue), \(outcome.attempts), \(.optional(outcome.apnsID)), \(.optional(outcome.status.map(Int64.init))), \(.optional(outcome.reason)))
                        """)
                }
                update.append(")) AS v")
            }
            update.append(" WHERE deliveries.campaign = \(campaign) AND deliveries.row_key = v.r AND deliveries.state = 'claimed'")
            changed += try connection.execute(update)
        }
        return changed
    }

    /// Final outcomes so far per state, from the running totals `record` keeps: constant
    /// cost however large the campaign (`outcomeCounts` counts the ledger itself).
    package func progressCounts(campaign: String) async throws(StoreError) -> [LedgerState: Int] {
        try await stateCounts("SELECT state, count FROM campaign_counts WHERE campaign = \(campaign)")
    }

    /// Claimed devices without a final outcome, for recovery after a crash.
    package func unfinished(campaign: String, limit: Int = 1000) async throws(StoreError) -> [LedgerEntry] {
        try await entries("SELECT row_key, device_id, state, attempts, apns_id, status, reason FROM deliveries WHERE campaign = \(campaign) AND state = 'claimed' ORDER BY row_key LIMIT \(limit)")
    }

    /// Gives back claims this owner holds but did not finish (a graceful hand-over), so the
    /// next owner takes them at once instead of waiting for the lease to run out.
    package func releaseClaims(campaign: String, owner: String, rowKeys: [Int64]) async throws(StoreError) {
        guard !rowKeys.isEmpty else { return }
        _ = try await run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                var released = 0
                for key in rowKeys {
                    released += try connection.execute("""
                        UPDATE deliveries SET lease_until = 0
                        WHERE campaign = \(campaign) AND row_key = \(key) AND state = 'claimed' AND claimed_by = \(owner)
                        """)
                }
                return released
            }
        }
    }

    /// Final entries with row keys in `(after, through]`, for re-emitting results.
    package func finished(campaign: String, after: Int64, through: Int64) async throws(StoreError) -> [LedgerEntry] {
        try await entries("""
            SELECT row_key, device_id, state, attempts, apns_id, status, reason FROM deliveries
            WHERE campaign = \(campaign) AND state <> 'claimed' AND row_key > \(after) AND row_key <= \(through) ORDER BY row_key
            """)
    }

    /// Final entries after `cursor`, for re-emitting results from the ledger.
    package func finished(campaign: String, after cursor: Int64?, limit: Int = 1000) async throws(StoreError) -> [LedgerEntry] {
        try await entries("""
            SELECT row_key, device_id, state, attempts, apns_id, status, reason FROM deliveries
            WHERE campaign = \(campaign) AND state <> 'claimed' AND row_key > \(cursor ?? Int64.min) ORDER BY row_key LIMIT \(limit)
            """)
    }

    private func entries(_ statement: SQLStatement) async throws(StoreError) -> [LedgerEntry] {
        try await run { connection throws(StoreError) in
            try connection.queryAll(statement) { row in
                LedgerEntry(
                    rowKey: row.int(0) ?? 0, deviceID: row.text(1) ?? "", state: LedgerState(rawValue: row.text(2) ?? "") ?? .claimed,
                    attempts: Int(row.int(3) ?? 0), apnsID: row.text(4), status: row.int(5).map { Int($0) }, reason: row.text(6))
            }
        }
    }

    /// Final ledger rows per (state, reason) for a campaign, most frequent first: why
    /// devices were rejected, invalid or failed.
    package func outcomeReasons(campaign: String) async throws(StoreError) -> [(state: LedgerState, reason: String?, count: Int)] {
        try await run { connection throws(StoreError) in
            try connection.queryAll("""
                SELECT state, reason, COUNT(*) FROM deliveries WHERE campaign = \(campaign) AND state <> 'claimed'
                GROUP BY state, reason ORDER BY COUNT(*) DESC
                """) { row in (LedgerState(rawValue: row.text(0) ?? "") ?? .failed, row.text(1), Int(row.int(2) ?? 0)) }
        }
    }

    /// Ledger rows per state for a campaign.
    package func outcomeCounts(campaign: String) async throws(StoreError) -> [LedgerState: Int] {
        try await stateCounts("SELECT state, COUNT(*) FROM deliveries WHERE campaign = \(campaign) GROUP BY state")
    }

    /// Rows of (state, count) as a dictionary.
    private func stateCounts(_ statement: SQLStatement) async throws(StoreError) -> [LedgerState: Int] {
        try await run { connection throws(StoreError) in
            var counts: [LedgerState: Int] = [:]
            try connection.query(statement) { row throws(StoreError) in
                if let state = LedgerState(rawValue: row.text(0) ?? "") { counts[state] = Int(row.int(1) ?? 0) }
            }
            return counts
        }
    }

    // MARK: Provider tokens

    /// Shares APNs provider tokens between the processes that sign with one key: APNs
    /// answers TooManyProviderTokenUpdates when a key's token changes more often than every
    /// 20 minutes, and every worker signing its own would do just that. Offers `jwt` (issued
    /// at `issuedAt`, epoch seconds); it replaces the stored token only if that one was
    /// issued `replaceAfter` seconds or more before. Returns the token to use: the stored one
    /// or the offered one. Blocking: call it from a thread of its own.
    package func exchangeProviderToken(teamID: String, keyID: String, jwt: String, issuedAt: Int64, replaceAfter: Int64) throws(StoreError) -> (jwt: String, issuedAt: Int64) {
        try executor.runBlocking { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> (jwt: String, issuedAt: Int64) in
                try connection.execute("""
                    INSERT INTO provider_tokens (team_id, key_id, jwt, issued_at) VALUES (\(teamID), \(keyID), \(jwt), \(issuedAt))
                    ON CONFLICT (team_id, key_id) DO UPDATE SET jwt = excluded.jwt, issued_at = excluded.issued_at
                    WHERE provider_tokens.issued_at <= excluded.issued_at - \(replaceAfter)
                    """)
                let current = try connection.queryOne("SELECT jwt, issued_at FROM provider_tokens WHERE team_id = \(teamID) AND key_id = \(keyID)") {
                    (jwt: $0.text(0) ?? jwt, issuedAt: $0.int(1) ?? issuedAt)
                }
                return current ?? (jwt, issuedAt)
            }
        }
    }

    // MARK: Token hygiene

    /// Applies APNs' 410 (Unregistered/ExpiredToken) with its timestamp: the device is
    /// invalidated only if it did not register again after that moment. True if invalidated.
    package func applyUnregistered(app: String, environment: APNsEnvironment, token: String, at timestamp: Int64, reason: String = "Unregistered") async throws(StoreError) -> Bool {
        let normalized = try Validation.token(token)
        return try await run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE devices SET status = 'invalid', invalid_reason = \(reason), invalid_at = \(timestamp)
                WHERE app = \(app) AND environment = \(environment.rawValue) AND token = \(normalized)
                  AND status = 'active' AND last_seen_at <= \(timestamp)
                """) > 0
        }
    }

    /// Records a token rejection (BadDeviceToken, DeviceTokenNotForTopic) for the token in
    /// that environment; the device leaves every later expansion. True if invalidated.
    package func invalidate(app: String, environment: APNsEnvironment, token: String, reason: String, now: Int64 = DeviceStore.now()) async throws(StoreError) -> Bool {
        let normalized = try Validation.token(token)
        return try await run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE devices SET status = 'invalid', invalid_reason = \(reason), invalid_at = \(now)
                WHERE app = \(app) AND environment = \(environment.rawValue) AND token = \(normalized) AND status = 'active'
                """) > 0
        }
    }

    // MARK: Helpers

    private static func filter(_ segment: SegmentExpression?, now: Int64) -> SQLStatement {
        guard let segment else { return "" }
        return " AND \(segment: segment, now: now)"
    }

    private static func requireApp(_ connection: any SQLConnection, _ app: String) throws(StoreError) {
        guard try connection.queryOne("SELECT 1 FROM apps WHERE app = \(app)", { $0.int(0) }) != nil else {
            throw StoreError.notFound("unknown app '\(app)'; add it with `pushfan apps add`")
        }
    }

    /// Rows per multi-row statement: far below SQLite's and PostgreSQL's parameter limits.
    static let bulkChunk = 400

    /// ` IN (v1, v2, ...)` for SQLite; ` = ANY($n::type[])` (one array parameter) for PostgreSQL.
    private static func isIn(_ values: [SQLValue], type: String, _ dialect: SQLDialect) -> SQLStatement {
        if dialect == .postgres {
            let texts: [String?] = values.map { value in
                switch value {
                case .null: nil
                case .integer(let number): String(number)
                case .real(let number): String(number)
                case .text(let text): text
                }
            }
            return " = ANY(\(SQLValue.text(PostgresArray.literal(texts)))::\(raw: type)[])"
        }
        var statement: SQLStatement = " IN ("
        for (index, value) in values.enumerated() { statement.append(index == 0 ? "\(value)" : ", \(value)") }
        statement.append(")")
        return statement
    }

    private static func target(_ row: any SQLRow) -> DeviceTarget {
        DeviceTarget(
            rowKey: row.int(0) ?? 0, deviceID: row.text(1) ?? "", token: row.text(2) ?? "",
            environment: row.text(3, equals: "sandbox") ? .sandbox : .production, locale: row.text(4))
    }

    private static func deviceRecord(_ row: any SQLRow) -> DeviceRecord {
        let attributes = row.text(8).flatMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) } ?? [:]
        return DeviceRecord(
            rowKey: row.int(0) ?? 0, deviceID: row.text(1) ?? "", token: row.text(2) ?? "",
            environment: APNsEnvironment(rawValue: row.text(3) ?? "") ?? .production, locale: row.text(4), timezone: row.text(5),
            appVersion: row.text(6), osVersion: row.text(7), tags: [], attributes: attributes,
            createdAt: row.int(9) ?? 0, lastSeenAt: row.int(10) ?? 0, status: DeviceStatus(rawValue: row.text(11) ?? "") ?? .active,
            invalidReason: row.text(12), invalidAt: row.int(13))
    }
}

/// A few connections, each with the serial queue every call on it runs on. Calls go to
/// the connections in turn, so independent work (two shards of one audience, a claim
/// while the next page is read) runs in parallel; each call is complete on one connection
/// (its own statement or transaction), and both databases show every connection what
/// another committed.
private final class ConnectionExecutor: @unchecked Sendable {
    /// One connection, only touched on its queue, which is what makes this type sendable.
    private struct Lane {
        let queue: DispatchQueue
        let connection: any SQLConnection
    }

    /// Connections per store: enough for a scan to overlap with other work on a 2-core
    /// machine without multiplying the database's per-connection memory.
    static let connections = 2

    private let lanes: [Lane]
    private let next = Atomic<Int>(0)
    let dialect: SQLDialect

    private init(connections: [any SQLConnection]) {
        lanes = connections.enumerated().map { Lane(queue: DispatchQueue(label: "pushfan.store.\($0.offset)"), connection: $0.element) }
        dialect = connections[0].dialect
    }

    static func make(_ connect: @escaping @Sendable () throws(StoreError) -> any SQLConnection) async throws(StoreError) -> ConnectionExecutor {
        let made = await BlockingWork.run { () -> Result<UncheckedBox<[any SQLConnection]>, StoreError> in
            do throws(StoreError) {
                var connections: [any SQLConnection] = []
                for _ in 0..<Self.connections { connections.append(try connect()) }
                return .success(UncheckedBox(connections))
            } catch {
                return .failure(error)
            }
        }
        return ConnectionExecutor(connections: try made.get().value)
    }

    /// Runs `body` on the next connection in turn, or on connection `lane` when given.
    func run<T: Sendable>(lane index: Int? = nil, _ body: @escaping @Sendable (any SQLConnection) throws(StoreError) -> T) async throws(StoreError) -> T {
        let lane = lanes[(index ?? next.wrappingAdd(1, ordering: .relaxed).oldValue) % lanes.count]
        let box = UncheckedBox(lane.connection)
        let result: Result<T, StoreError> = await withCheckedContinuation { continuation in
            lane.queue.async {
                do throws(StoreError) { continuation.resume(returning: .success(try body(box.value))) } catch { continuation.resume(returning: .failure(error)) }
            }
        }
        return try result.get()
    }

    /// `run` for callers on a thread of their own (never Swift's cooperative pool): waits on
    /// the lane's queue.
    func runBlocking<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        let lane = lanes[next.wrappingAdd(1, ordering: .relaxed).oldValue % lanes.count]
        let result: Result<T, StoreError> = lane.queue.sync {
            do throws(StoreError) { return .success(try body(lane.connection)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

/// Carries a value confined by other means (here: the store's serial queue) across isolation.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
