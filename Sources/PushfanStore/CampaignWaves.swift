import PushfanMessages
import PushfanSupport

/// Tasks parked in the store until their time, in waves: a local-time campaign's zone waves
/// (planned with the campaign, each its own shards) and the devices quiet hours held back
/// (added while the campaign sends, each hold one more shard). A dispatcher takes a due wave
/// with a conditional update and produces its tasks; nothing is kept in a worker's memory.
package struct CampaignWaves: Sendable {
    let executor: StoreExecutor

    /// One parked wave: shards `firstShard ..< firstShard + shards` of its campaign.
    package struct Wave: Sendable, Equatable {
        package let campaign: CampaignKey
        /// Unique within the campaign: `zone-<n>` for zone waves, `quiet-…` for holds,
        /// `winner` for a winner campaign's rest.
        package let key: String
        /// When its first request may start (ms since the epoch).
        package let sendAt: Int64
        package var firstShard: Int
        package let shards: Int
        /// A hold's lane (the task it came from); nil: the planner spreads the shards.
        package var lane: Int? = nil
        /// A zone wave's zones (`""`: devices without one).
        package var zones: [String]? = nil
        /// A hold's devices.
        package var rowKeys: [Int64]? = nil
        /// Its devices end `skipped` with this reason (a zone whose local time had passed).
        package var skip: String? = nil

        package init(
            campaign: CampaignKey, key: String, sendAt: Int64, firstShard: Int, shards: Int, lane: Int? = nil, zones: [String]? = nil,
            rowKeys: [Int64]? = nil, skip: String? = nil
        ) {
            (self.campaign, self.key, self.sendAt, self.firstShard, self.shards) = (campaign, key, sendAt, firstShard, shards)
            (self.lane, self.zones, self.rowKeys, self.skip) = (lane, zones, rowKeys, skip)
        }
    }

    private static let columns: SQLStatement = "SELECT w.campaign, w.wave, w.send_at, w.first_shard, w.shards, w.lane, w.zones, w.row_keys, w.skip FROM campaign_waves w"

    private static func wave(_ row: any SQLRow) throws(StoreError) -> Wave {
        Wave(
            campaign: try row.campaign(0), key: row.text(1) ?? "", sendAt: row.int(2) ?? 0, firstShard: Int(row.int(3) ?? 0),
            shards: Int(row.int(4) ?? 0), lane: row.int(5).map { Int($0) },
            zones: row.text(6).map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) },
            rowKeys: row.text(7).map { $0.split(separator: ",").compactMap { Int64($0) } }, skip: row.text(8))
    }

    /// Parks a campaign's zone waves, all or none: planned once, so when another try had
    /// parked its waves (one that died, or one racing this one after a rebalance; the zones
    /// or device count may differ now), those stand, and the campaign's shard count is
    /// theirs. Every try parks `zone-0` first: the one whose `zone-0` goes in parks the rest
    /// (on PostgreSQL the other waits on that key until it commits, then finds it taken).
    /// Returns the waves that stand.
    @discardableResult
    package func park(_ waves: [Wave]) async throws(StoreError) -> [Wave] {
        guard let first = waves.first else { return [] }
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> [Wave] in
                guard try Self.insert(connection, first) == 1 else {
                    return try connection.queryAll(Self.columns + " WHERE w.campaign = \(first.campaign) ORDER BY w.first_shard") { row throws(StoreError) in
                        try Self.wave(row)
                    }
                }
                for wave in waves.dropFirst() { try Self.insert(connection, wave) }
                return waves
            }
        }
    }

    /// Parks devices held back by quiet hours as one more shard of their campaign, counted in
    /// the campaign's shards in the same transaction (so the campaign cannot complete without
    /// it). Idempotent by `key`: a page held twice (its task re-run after a crash) is one
    /// hold. Returns the hold's shard.
    package func hold(
        campaign: CampaignKey, key: String, sendAt: Int64, lane: Int, rowKeys: [Int64]
    ) async throws(StoreError) -> Int {
        try await append(Wave(campaign: campaign, key: key, sendAt: sendAt, firstShard: 0, shards: 1, lane: lane, rowKeys: rowKeys))
    }

    /// Parks `wave` as more shards of its campaign, after those it has (its `firstShard` is
    /// the campaign's shard count then), counted in the campaign's shards in the same
    /// transaction. Idempotent by the wave's key. Returns its first shard.
    package func append(_ wave: Wave) async throws(StoreError) -> Int {
        let backend = executor.backend
        let campaign = wave.campaign
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                try backend.lockCampaign(connection, campaign)
                let known: Int64?? = try connection.queryOne("SELECT first_shard FROM campaign_waves WHERE campaign = \(campaign) AND wave = \(wave.key)") { $0.int(0) }
                if let known = known ?? nil { return Int(known) }
                let shards: Int64?? = try connection.queryOne("SELECT shards FROM campaigns WHERE id = \(campaign)") { $0.int(0) }
                guard let first = shards ?? nil else { throw StoreError.notFound("campaign \(campaign)") }
                var placed = wave
                placed.firstShard = Int(first)
                try Self.insert(connection, placed)
                try connection.execute("UPDATE campaigns SET shards = shards + \(wave.shards) WHERE id = \(campaign)")
                return Int(first)
            }
        }
    }

    /// 1 when the wave went in, 0 when its key was parked already.
    @discardableResult
    private static func insert(_ connection: any SQLConnection, _ wave: Wave) throws(StoreError) -> Int {
        let zones = wave.zones?.joined(separator: ",")
        let rowKeys = wave.rowKeys?.map(String.init).joined(separator: ",")
        return try connection.execute("""
            INSERT INTO campaign_waves (campaign, wave, send_at, first_shard, shards, lane, zones, row_keys, skip)
            VALUES (\(wave.campaign), \(wave.key), \(wave.sendAt), \(wave.firstShard), \(wave.shards), \(.optional(wave.lane.map { Int64($0) })),
                    \(.optional(zones)), \(.optional(rowKeys)), \(.optional(wave.skip)))
            ON CONFLICT (campaign, wave) DO NOTHING
            """)
    }

    /// A winner campaign's rest: its wave's key.
    package static let winnerKey = "winner"

    /// Waves to dispatch now: due within `lead`, or of a cancelled campaign (their devices
    /// end `cancelled` at once); and dispatches that began more than `staleAfter` ago and
    /// never produced their tasks (the worker died), to run again. Earliest first. A winner's
    /// rest is due at its time, not ahead (its decision reads the events counted until then),
    /// at once when its campaign is cancelled, and never while it is paused (a test stopped
    /// midway decides nothing).
    package func due(now: Int64, lead: Duration, staleAfter: Duration, limit: Int = 100) async throws(StoreError) -> [Wave] {
        let (due, stale) = (now + lead.milliseconds, now - staleAfter.milliseconds)
        return try await executor.run { connection throws(StoreError) in
            try connection.queryAll(Self.columns + """
                 JOIN campaigns c ON c.id = w.campaign
                 WHERE w.produced_at IS NULL AND ((w.dispatched_at IS NULL AND (w.send_at <= \(due) OR c.status = 'cancelled'))
                    OR w.dispatched_at < \(stale))
                   AND (w.wave <> \(Self.winnerKey) OR (c.status <> 'paused' AND (w.send_at <= \(now) OR c.status = 'cancelled')))
                 ORDER BY w.send_at LIMIT \(limit)
                """) { row throws(StoreError) in try Self.wave(row) }
        }
    }

    /// Takes the dispatch of a wave `due` listed: true for the one worker that got it.
    package func claim(_ wave: Wave, staleAfter: Duration, now: Int64) async throws(StoreError) -> Bool {
        let stale = now - staleAfter.milliseconds
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE campaign_waves SET dispatched_at = \(now)
                 WHERE campaign = \(wave.campaign) AND wave = \(wave.key) AND produced_at IS NULL
                   AND (dispatched_at IS NULL OR dispatched_at < \(stale))
                """) == 1
        }
    }

    /// The wave's tasks are on the topic.
    package func produced(_ wave: Wave, now: Int64) async throws(StoreError) {
        _ = try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE campaign_waves SET produced_at = \(now) WHERE campaign = \(wave.campaign) AND wave = \(wave.key)")
        }
    }

    /// A campaign's waves still parked, and the earliest of their times.
    package func parked(campaign: CampaignKey) async throws(StoreError) -> (count: Int, next: Int64?) {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT COUNT(*), MIN(send_at) FROM campaign_waves WHERE campaign = \(campaign) AND produced_at IS NULL") { row in
                (Int(row.int(0) ?? 0), row.int(1))
            } ?? (0, nil)
        }
    }
}
