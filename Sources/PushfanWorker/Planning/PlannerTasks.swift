import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport
import PushfanTopics

/// How the planner lays a campaign out as tasks: its audience resolved and counted, its
/// shards cut (from an explicit list's keys, or from the app's row keys for a segment), and
/// one task per shard produced, each lane on a partition of its own.
extension CampaignPlanner {
    /// A segment campaign's row, tasks and `accepted` event, the audience counted while the
    /// tasks go out. An app with enough devices for full shards everywhere (`4 × lanes ×
    /// shard_size`, found by a walk of that many index entries) is not counted at all: its
    /// shards are `shard_size` devices, the walk of its row keys finds them one by one, and
    /// each task is produced as soon as its range is known, the row holding a count no
    /// finisher reaches until the walk ends (`settleShards`). A smaller app is counted first
    /// (cheap at its size) to size its shards. So the first request waits for neither count
    /// nor walk (at a million devices, counting alone took 0.27 s). The `accepted` event
    /// follows with the segment's count; a completion that comes before the planner marks the
    /// campaign running is announced by the planner (`CampaignCompletion`).
    func planSegment(
        _ campaign: Campaign, segment: SegmentExpression?, definition: CampaignDefinition, submission: CampaignEvent.Submission
    ) async throws -> (audience: Int, tasks: Int, tickets: [DeliveryTicket], firstTask: ContinuousClock.Instant) {
        let (store, app) = (store, campaign.app)
        async let counted = store.audience.count(app: app, segment: segment, tokens: campaign.tokenSelection, now: clock.wallMillis)
        let full = settings.shardSize * 4 * settings.lanes
        var size = settings.shardSize
        var known: Int?
        if try await !store.audience.hasAtLeast(app: app, devices: full) {
            let total = try await store.audience.count(app: app, segment: nil, now: clock.wallMillis)
            size = shardSize(devices: total)
            known = max(1, (total + size - 1) / size)
        }
        let first = try await store.campaigns.record(
            campaign.key, audience: 0, shards: known ?? CampaignRegistry.shardsNotYetKnown, definition: definition, status: .planning,
            sendAt: campaign.options.sendAt, now: clock.wallMillis)
        // Planned again after a planner died: as many shards as the first try recorded.
        if !first, let recorded = try await store.campaigns.recordedShards(campaign.key) { known = recorded }
        let (found, finder) = AsyncStream.makeStream(of: ShardRange.self)
        async let walked = Task { [size, known] in
            defer { finder.finish() }
            if let known { return try await store.audience.shards(app: app, size: size, count: known) { finder.yield($0) } }
            return try await store.audience.shards(app: app, size: size) { finder.yield($0) }
        }.value
        var tickets: [DeliveryTicket] = []
        var index = 0
        var firstTask: ContinuousClock.Instant?
        let partitions = try await writer.producer.partitionCount(topic: writer.topics.tasks)
        for await range in found {
            // A shard's devices of every segment (progress only).
            tickets += try await produceTasks(
                campaign, [PlannedRange(after: range.after, through: range.through, estimate: size)], first: index, of: known ?? index + 1,
                notBefore: campaign.options.sendAt, partitions: partitions, phase: campaign.winner == nil ? nil : .test)
            firstTask = firstTask ?? clock.now
            index += 1
        }
        let shards = try await walked.count
        // Also when the count was known: a first try that died may have left the placeholder.
        try await store.campaigns.settleShards(campaign.key, shards: shards, now: clock.wallMillis)
        let audience = try await counted
        try await store.campaigns.planned(campaign.key, audience: audience, now: clock.wallMillis)
        tickets.append(try await writer.campaign(CampaignEvent(
            campaign: campaign.id, app: app, event: .accepted, audience: audience, submission: submission, at: clock.wallMillis)))
        return (audience, shards, tickets, firstTask ?? clock.now)
    }

    /// Devices per shard for an app of `devices`: at least `4 × lanes` shards when the app
    /// has that many devices, so every lane gets work and lanes finish close together; at
    /// most `shard_size` devices each.
    func shardSize(devices: Int) -> Int {
        let spread = 4 * settings.lanes
        return max(1, min(settings.shardSize, (devices + spread - 1) / spread))
    }

    /// One task per range, each lane on a partition of its own; the tasks carry `notBefore`
    /// while it is ahead.
    /// A zone wave's tasks carry its `zones` and, for a zone whose time had passed, `skip`; a
    /// quiet-hours hold's one task its `rows`, in the `lane` of the task it came from; a
    /// winner campaign's tasks their `phase`.
    func produceTasks(
        _ campaign: Campaign, _ ranges: some Collection<PlannedRange>, first: Int = 0, of total: Int? = nil, notBefore sendAt: Int64?,
        partitions known: Int? = nil, zones: [String]? = nil, skip: String? = nil, lane fixedLane: Int? = nil, rows: [Int64]? = nil,
        phase: Campaign.Phase? = nil
    ) async throws -> [DeliveryTicket] {
        let shards = total ?? ranges.count
        // Each lane gets a partition of its own (while there are enough: `TaskRecord.partition`).
        // A metadata request: asked once per campaign, not once per task.
        let partitions: Int
        if let known { partitions = known } else { partitions = try await writer.producer.partitionCount(topic: writer.topics.tasks) }
        let lanes = TaskRecord.lanes(configured: settings.lanes, partitions: partitions)
        let notBefore = sendAt.flatMap { $0 > clock.wallMillis ? $0 : nil }
        var batch: [ProducerRecord] = []
        for (offset, range) in ranges.enumerated() {
            let index = first + offset
            let task = TaskRecord(
                campaign: campaign.id, app: campaign.app, shard: index, shards: shards, after: range.after, through: range.through,
                estimate: range.estimate, lane: (fixedLane ?? index) % lanes, lanes: lanes, notBefore: notBefore, zones: zones, rows: rows, skip: skip,
                phase: phase)
            batch.append(ProducerRecord(
                topic: writer.topics.tasks, key: task.kafkaKey, value: MessageCodec.encode(task),
                partition: Int32(TaskRecord.partition(app: campaign.app, lane: task.lane, partitions: partitions))))
        }
        return [try await writer.producer.enqueue(batch)]
    }

    /// The audience: the segment to expand, or the row keys of an explicit device list.
    struct Audience {
        var segment: SegmentExpression?
        var rowKeys: [Int64]?
        var count: Int
    }

    func resolve(_ campaign: Campaign, definition: CampaignDefinition?, refuse: (String, String) -> Refusal) async throws -> Audience {
        if campaign.audience.readsTheAppsDevices {
            let segment = try await segment(of: campaign, definition: definition, refuse: refuse)
            return Audience(segment: segment, count: try await store.audience.count(app: campaign.app, segment: segment, tokens: campaign.tokenSelection, now: clock.wallMillis))
        }
        if case .channel = campaign.audience {
            // Checked again here: a scheduled campaign's channel may have gone since it was planned.
            if let missing = try await store.missingReference(in: campaign) { throw refuse(missing.code, missing.description) }
            // One broadcast: one ledger row, one result.
            return Audience(rowKeys: [BroadcastTarget.rowKey], count: 1)
        }
        guard case .devices(let ids) = campaign.audience else { return Audience(count: 0) }
        let keys = try await store.audience.rowKeys(app: campaign.app, deviceIDs: ids, tokens: campaign.tokenSelection)
        return Audience(rowKeys: keys, count: keys.count)
    }

    /// A segment or saved segment's expression (as `definition` froze it); nil for an
    /// explicit list. `DeviceStore.segment(of:definition:)` decides; its refusal is the planner's.
    func segment(of campaign: Campaign, definition: CampaignDefinition?, refuse: (String, String) -> Refusal) async throws -> SegmentExpression? {
        do { return try await store.segment(of: campaign, definition: definition) } catch let missing as MissingReference {
            throw refuse(missing.code, missing.description)
        }
    }

    struct PlannedRange {
        var after: Int64?
        var through: Int64?
        var estimate: Int
    }

    /// Contiguous row-key ranges, sized by `shardSize`: cut from an explicit audience's keys,
    /// or (for a dispatched segment campaign) from the app's devices.
    func shardRanges(_ campaign: Campaign, audience: Audience) async throws -> [PlannedRange] {
        if let keys = audience.rowKeys {
            guard !keys.isEmpty else { return [PlannedRange(after: nil, through: nil, estimate: 0)] }
            let size = shardSize(devices: keys.count)
            var ranges: [PlannedRange] = []
            var after: Int64?
            for start in stride(from: 0, to: keys.count, by: size) {
                let end = min(start + size, keys.count)
                ranges.append(PlannedRange(after: after, through: keys[end - 1], estimate: end - start))
                after = keys[end - 1]
            }
            return ranges
        }
        let total = try await store.audience.count(app: campaign.app, segment: nil, now: clock.wallMillis)
        let size = shardSize(devices: total)
        let shards = try await store.audience.shards(app: campaign.app, size: size)
        // Shards cover all the app's devices; the segment's share is spread evenly.
        let estimate = total == 0 ? 0 : Int((Double(audience.count) / Double(total) * Double(size)).rounded(.up))
        return shards.map { PlannedRange(after: $0.after, through: $0.through, estimate: estimate) }
    }
}
