import PushfanSchedule
import PushfanSupport

/// One shard of a campaign's audience: the devices whose row key lies in
/// `(after, through]`. Topic `tasks`, Kafka key = `kafkaKey` (`<app>#<lane>`).
///
/// The planner splits an app's sends into `lanes` lanes and gives each lane
/// `rate / lanes` of the app's rate. Every task of one lane goes to the same
/// partition (chosen by the planner, one per lane), and whichever worker owns
/// that partition owns that share of the rate: the total stays within the limit
/// however partitions move between workers.
package struct TaskRecord: VersionedMessage, Hashable {
    package static let currentVersion = 1

    /// Campaign id (within `app`).
    package var campaign: String
    /// App key.
    package var app: String
    /// The campaign's name across the system.
    package var campaignKey: CampaignKey { CampaignKey(app: app, id: campaign) }
    /// This shard's number, `0 ..< shards`.
    package var shard: Int
    /// How many shards the campaign had, as far as the planner knew when it made this task:
    /// at least `shard + 1` (a large app's tasks go out while its shards are still being
    /// found, and quiet-hours holds add shards later); the store's count ends the campaign.
    package var shards: Int
    /// Exclusive lower bound of the device row key; nil = from the first row.
    package var after: Int64?
    /// Inclusive upper bound of the device row key; nil = to the last row.
    package var through: Int64?
    /// Expected number of devices in the shard (for progress and planning only).
    package var estimate: Int
    /// The rate lane, `0 ..< lanes`.
    package var lane: Int
    /// How many lanes the app's rate is divided into.
    package var lanes: Int
    /// A scheduled campaign's `send_at` (ms since the epoch): the sender starts no request
    /// before it. Nil: at once.
    package var notBefore: Int64?
    /// A zone wave's time zones (`ZoneWave`): only the shard's devices in these are its own;
    /// `""` stands for devices without a zone. Nil: every zone.
    package var zones: [String]?
    /// Devices held back by quiet hours (`QuietHours`): exactly these row keys of the shard,
    /// not the whole range. Nil: the range.
    package var rows: [Int64]?
    /// The shard's devices end `skipped` with this reason, without a request
    /// (`LatePolicy.skippedReason`). Nil: they are sent.
    package var skip: String?
    /// A winner campaign's phase (`Campaign.Phase`): only the shard's devices of that phase
    /// are its own. Nil: every device.
    package var phase: Campaign.Phase?
    /// A transactional message's task (`POST /v1/apps/{app}/messages`): the worker runs it
    /// beside the lane's campaign tasks rather than behind them (`scheduleLane`), and its
    /// batches take the lane's tokens ahead of theirs, so a running campaign does not delay
    /// it while both stay within the app's rate.
    package var transactional: Bool = false

    package init(
        campaign: String, app: String, shard: Int, shards: Int,
        after: Int64?, through: Int64?, estimate: Int, lane: Int, lanes: Int, notBefore: Int64? = nil,
        zones: [String]? = nil, rows: [Int64]? = nil, skip: String? = nil, phase: Campaign.Phase? = nil
    ) {
        self.campaign = campaign
        self.app = app
        self.shard = shard
        self.shards = shards
        self.after = after
        self.through = through
        self.estimate = estimate
        self.lane = lane
        self.lanes = lanes
        self.notBefore = notBefore
        self.zones = zones
        self.rows = rows
        self.skip = skip
        self.phase = phase
    }

    /// `<app>#<lane>`: all tasks of one lane of one app go to one partition.
    package var kafkaKey: String { "\(app)#\(lane)" }

    /// The queue a worker runs the task in: its lane's, or for a transactional message the
    /// lane's own priority queue (`<app>#<lane>!`), so it never waits for campaign tasks.
    package var scheduleLane: String { transactional ? kafkaKey + "!" : kafkaKey }

    /// How many lanes an app's rate is split into: the workers' `lanes`, at most the tasks
    /// topic's partitions (a lane needs a partition of its own).
    package static func lanes(configured: Int, partitions: Int) -> Int { max(1, min(configured, partitions)) }

    /// The partition of lane `lane` of `app`'s tasks: lanes of one app on consecutive
    /// partitions from an offset that depends on the app, so the lanes spread over the
    /// workers (the assignor deals them out) instead of wherever the key hash puts them.
    package static func partition(app: String, lane: Int, partitions: Int) -> Int {
        (Int(FNV1a.hash(app) % UInt64(partitions)) + lane) % partitions
    }

    /// True when `rowKey` belongs to this shard.
    package func contains(rowKey: Int64) -> Bool {
        if let after, rowKey <= after { return false }
        if let through, rowKey > through { return false }
        return true
    }

    private enum CodingKeys: String, CodingKey {
        case v, campaign, app, shard, shards, after, through, estimate, lane, lanes, notBefore = "not_before", zones, rows, skip, phase, transactional
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        campaign = try container.field(.campaign)
        app = try container.field(.app)
        shard = try container.field(.shard)
        shards = try container.field(.shards)
        after = try container.optionalField(.after)
        through = try container.optionalField(.through)
        estimate = try container.field(.estimate)
        lane = try container.field(.lane)
        lanes = try container.field(.lanes)
        notBefore = try container.optionalField(.notBefore)
        zones = try container.optionalField(.zones)
        rows = try container.optionalField(.rows)
        skip = try container.optionalField(.skip)
        phase = try container.optionalField(.phase)
        transactional = try container.optionalField(.transactional) ?? false
    }

    /// Open bounds are written as explicit `null`s so a reader sees them.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.currentVersion, forKey: .v)
        try container.encode(campaign, forKey: .campaign)
        try container.encode(app, forKey: .app)
        try container.encode(shard, forKey: .shard)
        try container.encode(shards, forKey: .shards)
        try container.encode(after, forKey: .after)
        try container.encode(through, forKey: .through)
        try container.encode(estimate, forKey: .estimate)
        try container.encode(lane, forKey: .lane)
        try container.encode(lanes, forKey: .lanes)
        try container.encodeIfPresent(notBefore, forKey: .notBefore)
        try container.encodeIfPresent(zones, forKey: .zones)
        try container.encodeIfPresent(rows, forKey: .rows)
        try container.encodeIfPresent(skip, forKey: .skip)
        try container.encodeIfPresent(phase, forKey: .phase)
        if transactional { try container.encode(true, forKey: .transactional) }
    }

    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(campaign, field: "campaign")
        try Rules.identifier(app, field: "app")
        guard shards >= 1 else { throw .invalidField("shards", "must be at least 1, got \(shards)") }
        guard (0..<shards).contains(shard) else {
            throw .invalidField("shard", "must be from 0 to shards - 1 (\(shards - 1)), got \(shard)")
        }
        guard lanes >= 1 else { throw .invalidField("lanes", "must be at least 1, got \(lanes)") }
        guard (0..<lanes).contains(lane) else {
            throw .invalidField("lane", "must be from 0 to lanes - 1 (\(lanes - 1)), got \(lane)")
        }
        try Rules.nonNegative(estimate, field: "estimate")
        if let after, let through, through <= after {
            throw .invalidField("through", "must be greater than after (\(after)), got \(through)")
        }
        if let notBefore { try Rules.epochMillis(notBefore, field: "not_before") }
        if let zones, zones.isEmpty { throw .invalidField("zones", "must name at least one time zone when present") }
        if let rows, rows.count > Self.maxRows { throw .invalidField("rows", "lists at most \(Self.maxRows) row keys, got \(rows.count)") }
        if let skip, skip != LatePolicy.skippedReason {
            throw .invalidField("skip", "must be \(LatePolicy.skippedReason.debugDescription) when present, got \(Quote.clip(skip, max: 40))")
        }
    }

    /// Most row keys a task lists (`rows`): one page of held devices is far fewer.
    package static let maxRows = 10_000
}

extension TaskRecord {
    /// Written by hand: the API writes one task per transactional message and the workers
    /// read each, and `JSONEncoder` and `JSONDecoder` were a tenth of their CPU on that path.
    package var canonicalJSON: [UInt8]? {
        var out = CanonicalWriter(capacity: 180 + app.utf8.count + campaign.utf8.count + (rows?.count ?? 0) * 12)
        out.literal(#"{"after":"#); out.integer(after)
        out.literal(#","app":"#); out.string(app)
        out.literal(#","campaign":"#); out.string(campaign)
        out.literal(#","estimate":"#); out.integer(estimate)
        out.literal(#","lane":"#); out.integer(lane)
        out.literal(#","lanes":"#); out.integer(lanes)
        if let notBefore { out.literal(#","not_before":"#); out.integer(notBefore) }
        if let phase { out.literal(#","phase":"#); out.string(phase.rawValue) }
        if let rows { out.literal(#","rows":"#); out.integers(rows) }
        out.literal(#","shard":"#); out.integer(shard)
        out.literal(#","shards":"#); out.integer(shards)
        if let skip { out.literal(#","skip":"#); out.string(skip) }
        out.literal(#","through":"#); out.integer(through)
        if transactional { out.literal(#","transactional":true"#) }
        out.literal(#","v":"#); out.integer(Self.currentVersion)
        if let zones { out.literal(#","zones":"#); out.strings(zones) }
        out.literal("}")
        return out.bytes
    }

    package static func canonical(_ bytes: UnsafeRawBufferPointer) -> TaskRecord? {
        var reader = CanonicalReader(bytes: bytes)
        guard reader.literal(#"{"after":"#), let after = reader.optionalInteger(),
              reader.literal(#","app":"#), let app = reader.optionalString() ?? nil,
              reader.literal(#","campaign":"#), let campaign = reader.optionalString() ?? nil,
              reader.literal(#","estimate":"#), let estimate = reader.int(),
              reader.literal(#","lane":"#), let lane = reader.int(),
              reader.literal(#","lanes":"#), let lanes = reader.int()
        else { return nil }
        var task = TaskRecord(campaign: campaign, app: app, shard: 0, shards: 1, after: after, through: nil, estimate: estimate, lane: lane, lanes: lanes)
        if reader.literal(#","not_before":"#) {
            guard let notBefore = reader.integer() else { return nil }
            task.notBefore = notBefore
        }
        if reader.literal(#","phase":"#) {
            guard let phase = (reader.optionalString() ?? nil).flatMap(Campaign.Phase.init(rawValue:)) else { return nil }
            task.phase = phase
        }
        if reader.literal(#","rows":"#) {
            guard let rows = reader.integers() else { return nil }
            task.rows = rows
        }
        guard reader.literal(#","shard":"#), let shard = reader.int(), reader.literal(#","shards":"#), let shards = reader.int() else { return nil }
        (task.shard, task.shards) = (shard, shards)
        if reader.literal(#","skip":"#) {
            guard let skip = reader.optionalString() ?? nil else { return nil }
            task.skip = skip
        }
        guard reader.literal(#","through":"#), let through = reader.optionalInteger() else { return nil }
        task.through = through
        task.transactional = reader.literal(#","transactional":true"#)
        guard reader.literal(#","v":"#), reader.integer() == Int64(currentVersion) else { return nil }
        if reader.literal(#","zones":"#) {
            guard let zones = reader.strings() else { return nil }
            task.zones = zones
        }
        return reader.literal("}") && reader.atEnd ? task : nil
    }
}
