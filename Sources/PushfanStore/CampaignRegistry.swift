import Foundation
import PushfanMessages
import PushfanSupport

/// What a campaign was planned from: its record as accepted (the JSON a resend is compared
/// with) and, when it names a stored template or a saved segment, that template's JSON and
/// that segment's expression as they were at planning. Senders read these copies, so an edit
/// made later reaches only campaigns accepted after it.
package struct CampaignDefinition: Sendable, Equatable {
    package let record: String
    package let template: String?
    /// The saved segment's expression (`audience.named`); nil for other audiences, and for
    /// campaigns accepted before segments were kept with them.
    package let segment: String?

    package init(record: String, template: String? = nil, segment: String? = nil) {
        (self.record, self.template, self.segment) = (record, template, segment)
    }

    /// The record as accepted, decoded: what a resend is compared with and what the planner
    /// counts and shards by (its template is not laid under it). `id` names it in what went
    /// wrong.
    package func accepted(_ id: CampaignKey) throws(Unreadable) -> Campaign {
        do { return try MessageCodec.decode(Campaign.self, from: Data(record.utf8)) } catch {
            throw Unreadable(description: "stored campaign \(id) does not read: \(error)")
        }
    }

    /// The campaign as it was planned: the record decoded, and the template it names, as it
    /// was then, laid under it. `id` names it in what went wrong.
    package func campaign(_ id: CampaignKey) throws(Unreadable) -> Campaign {
        let campaign = try accepted(id)
        guard let name = campaign.notification.template else { return campaign }
        guard let template else { throw Unreadable(description: "campaign \(id) names template \(name) but was stored without it") }
        do { return try campaign.resolved(with: try NotificationTemplates.read(template, name: name)) } catch {
            throw Unreadable(description: "campaign \(id) with its template \(name): \(error)")
        }
    }

    /// A stored campaign that no longer reads (a record or template from another version).
    package struct Unreadable: Error, CustomStringConvertible {
        package let description: String
    }
}

/// Campaigns as the store keeps them: the definition as accepted, the audience size and
/// shard count, the lifecycle status, and the shards whose every device is final.
package struct CampaignRegistry: Sendable {
    let executor: StoreExecutor
    /// New rows, committed together when they come at once (`GroupCommit`): the API stores
    /// one per transactional message, thousands a second.
    private let inserts: GroupCommit<Insert, Bool>

    init(executor: StoreExecutor) {
        self.executor = executor
        inserts = GroupCommit(executor: executor) { connection, _, rows, _ throws(StoreError) in
            try rows.map { row throws(StoreError) in try Self.insert(row, connection) }
        }
    }

    /// A row `record` adds.
    private struct Insert: Sendable {
        let campaign: CampaignKey
        let audience: Int
        let shards: Int
        let definition: CampaignDefinition?
        let status: CampaignStatus
        let sendAt: Int64?
        let dispatched: Int64?
        let now: Int64
    }

    /// A campaign's row. The table keys it by `CampaignKey.stored` (`<app>/<id>`): ids are
    /// named within their app.
    package struct Row: Sendable, Equatable {
        package let id: String
        package let app: String
        package let status: CampaignStatus
        package let audience: Int
        package let shards: Int
        /// `options.send_at`, when the campaign has one.
        package var sendAt: Int64? = nil
        /// Parked: scheduled and not yet dispatched (no task exists).
        package var parked = false

        package var key: CampaignKey { CampaignKey(app: app, id: id) }
    }

    private static let columns: SQLStatement = "SELECT id, app, status, audience, shards, send_at, dispatched_at FROM campaigns"

    private static func row(_ row: any SQLRow) throws(StoreError) -> Row {
        guard let key = row.text(0).flatMap(CampaignKey.init(stored:)) else {
            throw StoreError.database("a campaign row's id '\(row.text(0) ?? "")' is not <app>/<id>")
        }
        let id = key.id
        guard let status = row.text(2).flatMap(CampaignStatus.init(rawValue:)) else {
            throw StoreError.database("campaign \(id) has the unknown status '\(row.text(2) ?? "")'")
        }
        let sendAt = row.int(5)
        return Row(
            id: id, app: key.app, status: status, audience: Int(row.int(3) ?? 0), shards: Int(row.int(4) ?? 0),
            sendAt: sendAt, parked: sendAt != nil && row.int(6) == nil)
    }

    /// Records a campaign once; false when its id was already known (the same id twice is
    /// one campaign).
    /// A `scheduled` campaign is parked (it waits, undispatched, for `sendAt`) unless its
    /// tasks are parked in waves instead (`parked` false: a local-time campaign). `definition`
    /// is the campaign's record as accepted and `template` the stored template it named, as
    /// it was then (`CampaignDefinition`).
    package func record(
        _ campaign: CampaignKey, audience: Int, shards: Int, definition: CampaignDefinition? = nil, status: CampaignStatus = .running,
        sendAt: Int64? = nil, parked: Bool? = nil, now: Int64
    ) async throws(StoreError) -> Bool {
        let dispatched: Int64? = parked ?? (status == .scheduled) ? nil : now
        return try await inserts.submit(Insert(
            campaign: campaign, audience: audience, shards: shards, definition: definition, status: status, sendAt: sendAt, dispatched: dispatched, now: now))
    }

    /// True when the row is new.
    private static func insert(_ row: Insert, _ connection: any SQLConnection) throws(StoreError) -> Bool {
        try connection.execute("""
            INSERT INTO campaigns (id, app, status, audience, shards, definition, template, segment, created_at, updated_at, send_at, dispatched_at)
            VALUES (\(row.campaign), \(row.campaign.app), \(row.status.rawValue), \(row.audience), \(row.shards), \(.optional(row.definition?.record)),
                    \(.optional(row.definition?.template)), \(.optional(row.definition?.segment)), \(row.now), \(row.now), \(.optional(row.sendAt)),
                    \(.optional(row.dispatched))) ON CONFLICT (id) DO NOTHING
            """) == 1
    }

    /// Parked campaigns to dispatch now: due within `lead`, or cancelled (their devices are to
    /// end `cancelled` at once); and dispatches that started more than `staleAfter` ago and
    /// never finished (the dispatching worker died), to run again.
    package func dispatchable(now: Int64, lead: Duration, staleAfter: Duration) async throws(StoreError) -> [Row] {
        let due = now + lead.milliseconds
        let stale = now - staleAfter.milliseconds
        return try await executor.run { connection throws(StoreError) in
            try connection.queryAll(Self.columns + """
                 WHERE send_at IS NOT NULL AND ((dispatched_at IS NULL AND (send_at <= \(due) OR status = 'cancelled'))
                    OR (status = 'planning' AND dispatched_at < \(stale)))
                 ORDER BY send_at
                """) { row throws(StoreError) in try Self.row(row) }
        }
    }

    /// Takes the dispatch of a campaign `dispatchable` listed: true for the one worker that
    /// got it. A `scheduled` one moves to `planning` in the same update, so a worker dying
    /// right after leaves a stale dispatch that is taken again, not a claimed `scheduled` row
    /// that no list shows.
    package func claimDispatch(_ id: CampaignKey, staleAfter: Duration, now: Int64) async throws(StoreError) -> Bool {
        let stale = now - staleAfter.milliseconds
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE campaigns SET dispatched_at = \(now), updated_at = \(now),
                       status = CASE WHEN status = 'scheduled' THEN 'planning' ELSE status END
                 WHERE id = \(id) AND (dispatched_at IS NULL OR (status = 'planning' AND dispatched_at < \(stale)))
                """) == 1
        }
    }

    /// A campaign's audience, counted once its tasks are cut. Its shards are another's:
    /// tasks already running may have added quiet-hours holds (`dispatchShards`).
    package func planned(_ id: CampaignKey, audience: Int, now: Int64) async throws(StoreError) {
        _ = try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE campaigns SET audience = \(audience), updated_at = \(now) WHERE id = \(id)")
        }
    }

    /// A winner campaign's record with its decision: what every reader of the campaign (its
    /// senders, the events' counting) reads from now on. Written only over the record as it
    /// was read (`replacing`), so that a decision another worker wrote meanwhile (one that
    /// took over a dispatch it thought stalled) stands; returns the record that stands.
    package func decide(_ id: CampaignKey, record: String, replacing read: String, now: Int64) async throws(StoreError) -> String {
        try await executor.run { connection throws(StoreError) -> String in
            try connection.transaction { () throws(StoreError) -> String in
                if try connection.execute("UPDATE campaigns SET definition = \(record), updated_at = \(now) WHERE id = \(id) AND definition = \(read)") == 1 {
                    return record
                }
                return try connection.queryOne("SELECT definition FROM campaigns WHERE id = \(id)") { $0.text(0) }.flatMap { $0 } ?? record
            }
        }
    }

    /// The campaign as accepted and the template and saved segment it was planned with.
    package func stored(_ id: CampaignKey) async throws(StoreError) -> CampaignDefinition? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT definition, template, segment FROM campaigns WHERE id = \(id)") { row in
                row.text(0).map { CampaignDefinition(record: $0, template: row.text(1), segment: row.text(2)) }
            }.flatMap { $0 }
        }
    }

    /// When the campaign was first recorded, in milliseconds since the epoch.
    package func createdAt(_ id: CampaignKey) async throws(StoreError) -> Int64? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT created_at FROM campaigns WHERE id = \(id)") { $0.int(0) }.flatMap { $0 }
        }
    }

    package func get(_ id: CampaignKey) async throws(StoreError) -> Row? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne(Self.columns + " WHERE id = \(id)") { row throws(StoreError) in try Self.row(row) }
        }
    }

    /// Moves a campaign from `from` to `to`; true for the one caller that made the change,
    /// so exactly one worker announces a campaign's completion. A step the lifecycle does not
    /// allow is refused before the database is asked.
    package func transition(_ id: CampaignKey, from: CampaignStatus, to: CampaignStatus, now: Int64) async throws(StoreError) -> Bool {
        guard from.canMove(to: to) else { throw StoreError.invalidInput("a campaign cannot go from \(from.rawValue) to \(to.rawValue)") }
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE campaigns SET status = \(to.rawValue), updated_at = \(now) WHERE id = \(id) AND status = \(from.rawValue)") == 1
        }
    }

    /// Applies an operator's command (`ControlDecision`): nil when the campaign is unknown.
    /// Safe to repeat and to race: every worker applies the control records it reads, and
    /// the one conditional update that lands decides; the others see `.already`.
    package func control(_ id: CampaignKey, _ action: ControlRecord.Action, now: Int64) async throws(StoreError) -> ControlDecision? {
        for _ in 0..<5 {
            guard let row = try await get(id) else { return nil }
            let decision = ControlDecision.decide(action, campaign: id.id, status: row.status, parked: row.parked)
            guard case .move(let from, let to) = decision else { return decision }
            if to == .scheduled {
                // Back to waiting for its time only while no dispatch has claimed it: one that
                // did has made its tasks, and `scheduled` would leave them waiting for good.
                let moved = try await executor.run { connection throws(StoreError) in
                    try connection.execute("""
                        UPDATE campaigns SET status = \(to.rawValue), updated_at = \(now) WHERE id = \(id) AND status = \(from.rawValue) AND dispatched_at IS NULL
                        """) == 1
                }
                if moved { return decision }
                continue
            }
            if try await transition(id, from: from, to: to, now: now) { return decision }
            // The status moved under us (the planner, a finisher, another command): decide again.
        }
        throw StoreError.database("campaign \(id) kept changing status while applying \(action.rawValue)")
    }

    /// The statuses of these campaigns, for senders checking what an operator decided.
    package func statuses(_ ids: [CampaignKey]) async throws(StoreError) -> [CampaignKey: CampaignStatus] {
        guard !ids.isEmpty else { return [:] }
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            var statuses: [CampaignKey: CampaignStatus] = [:]
            var statement: SQLStatement = "SELECT id, status FROM campaigns WHERE id"
            statement.append(backend.isIn(ids.map { .text($0.stored) }, type: "text"))
            try connection.query(statement) { row throws(StoreError) in
                if let id = row.text(0).flatMap(CampaignKey.init(stored:)), let status = row.text(1).flatMap(CampaignStatus.init(rawValue:)) { statuses[id] = status }
            }
            return statuses
        }
    }

    /// One page of an app's campaigns, newest first (then by id), of one status if given:
    /// those after the campaign `after` (a page's last), none when it is gone.
    package func page(app: String, status: CampaignStatus?, after: String?, limit: Int) async throws(StoreError) -> [Row] {
        try await executor.run { connection throws(StoreError) -> [Row] in
            var statement = Self.columns + " WHERE app = \(app)"
            if let status { statement = statement + " AND status = \(status.rawValue)" }
            if let after {
                let key = CampaignKey(app: app, id: after)
                guard let created = try connection.queryOne("SELECT created_at FROM campaigns WHERE id = \(key)", { $0.int(0) }) ?? nil else { return [] }
                statement = statement + " AND (created_at < \(created) OR (created_at = \(created) AND id > \(key)))"
            }
            return try connection.queryAll(statement + " ORDER BY created_at DESC, id LIMIT \(limit)") { row throws(StoreError) in try Self.row(row) }
        }
    }

    /// The most recently created campaigns first, at most `limit`; of one app when given.
    package func list(app: String? = nil, limit: Int) async throws(StoreError) -> [Row] {
        try await executor.run { connection throws(StoreError) in
            let filter: SQLStatement = app.map { " WHERE app = \($0)" } ?? ""
            return try connection.queryAll(Self.columns + filter + " ORDER BY created_at DESC, id LIMIT \(limit)") { row throws(StoreError) in try Self.row(row) }
        }
    }

    /// How many of a campaign's shards are finished.
    package func finishedTasks(_ campaign: CampaignKey) async throws(StoreError) -> Int {
        try await executor.run { connection throws(StoreError) in try Self.finished(connection, campaign) }
    }

    /// Finished shards of the campaign. Every number counts: a quiet-hours hold parked
    /// while a large app's planner still walked its shards is numbered past the count the
    /// walk settles on (`settleShards`), and counts all the same.
    private static func finished(_ connection: any SQLConnection, _ campaign: CampaignKey) throws(StoreError) -> Int {
        let count: Int64?? = try connection.queryOne("SELECT COUNT(*) FROM campaign_tasks WHERE campaign = \(campaign)") { $0.int(0) }
        return Int((count ?? nil) ?? 0)
    }

    /// Marks one task (shard) of a campaign finished; returns how many of its shards are
    /// finished now and how many it has (the row's count: the planner's, plus quiet-hours
    /// holds). Idempotent: a task processed twice counts once. Finishers of one campaign take
    /// turns (`SQLBackend.lockCampaign`), so the last one counts every shard.
    package func finishTask(campaign: CampaignKey, shard: Int, now: Int64) async throws(StoreError) -> (finished: Int, shards: Int) {
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> (finished: Int, shards: Int) in
                try backend.lockCampaign(connection, campaign)
                try connection.execute("""
                    INSERT INTO campaign_tasks (campaign, shard, finished_at) VALUES (\(campaign), \(shard), \(now))
                    ON CONFLICT (campaign, shard) DO NOTHING
                    """)
                let shards: Int64?? = try connection.queryOne("SELECT shards FROM campaigns WHERE id = \(campaign)") { $0.int(0) }
                return (try Self.finished(connection, campaign), Int((shards ?? nil) ?? Int64.max))
            }
        }
    }

    /// The shards a parked campaign's dispatch cuts: `cut` on its first try, which records
    /// it; the first try's on any later one (a dispatch taken over after its worker died).
    /// That try may have produced tasks under those shard numbers, and its tasks may have
    /// parked quiet-hours holds after them, which stay counted. Cutting another number would
    /// make the row's count wrong: the campaign completing while shards run, or never.
    package func dispatchShards(_ id: CampaignKey, cut: Int, now: Int64) async throws(StoreError) -> Int {
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                try backend.lockCampaign(connection, id)
                let (recorded, holds) = try Self.shards(connection, id)
                if let recorded { return recorded }
                try connection.execute("UPDATE campaigns SET shards = \(Int64(cut + holds)), updated_at = \(now) WHERE id = \(id)")
                return cut
            }
        }
    }

    /// The shards an earlier try of the campaign's planning cut, when one recorded them (not
    /// `shardsNotYetKnown`): a try planning it again cuts as many, since the tasks of the
    /// first may be out under those numbers.
    package func recordedShards(_ id: CampaignKey) async throws(StoreError) -> Int? {
        try await executor.run { connection throws(StoreError) in try Self.shards(connection, id).recorded }
    }

    /// The row's shards less those of its waves (quiet-hours holds, a winner's rest): what
    /// its planner cut, nil while none is recorded (0, or `shardsNotYetKnown`).
    private static func shards(_ connection: any SQLConnection, _ id: CampaignKey) throws(StoreError) -> (recorded: Int?, holds: Int) {
        let shards: Int64?? = try connection.queryOne("SELECT shards FROM campaigns WHERE id = \(id)") { $0.int(0) }
        guard let total = shards ?? nil else { throw StoreError.notFound("campaign \(id)") }
        let waves: Int64?? = try connection.queryOne("SELECT COALESCE(SUM(shards), 0) FROM campaign_waves WHERE campaign = \(id)") { $0.int(0) }
        let holds = Int((waves ?? nil) ?? 0)
        let cut = Int(total) - holds
        return (cut > 0 && Int(total) < shardsNotYetKnown ? cut : nil, holds)
    }

    /// Shards a campaign is recorded with while its planner is still finding them: no count
    /// of finished tasks reaches it, so nothing completes the campaign before `settleShards`.
    package static let shardsNotYetKnown = Int(Int32.max)

    /// The planner found `shards`: the row's count becomes that, plus any quiet-hours holds
    /// added meanwhile (each added one to the provisional count).
    package func settleShards(_ id: CampaignKey, shards: Int, now: Int64) async throws(StoreError) {
        let excess = Self.shardsNotYetKnown - shards
        _ = try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE campaigns SET shards = shards - \(excess), updated_at = \(now) WHERE id = \(id) AND shards >= \(Self.shardsNotYetKnown)")
        }
    }
}
