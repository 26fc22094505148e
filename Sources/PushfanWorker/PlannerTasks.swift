import Foundation
import PushfanCore
import PushfanKafka
import PushfanStore

/// How the planner lays a campaign out as tasks: its audience resolved and counted, its
/// shards cut (from an explicit list's keys, or from the app's row keys for a segment), and
/// one task per shard produced, each lane on a partition of its own.
extension CampaignPlanner {
    /// A segment campaign's row, `accepted` event and tasks, each task produced as soon as
    /// the walk of the app's row keys finds its range: the first request need not wait for
    /// the whole walk (a fifth of a second at a million devices). The number of shards comes
    /// from the app's device count first, since every task names it.
    func planSegment(
        _ campaign: Campaign, audience: Audience, appDevices total: Int, definition: String, accepted: CampaignEvent
    ) async throws -> (tasks: Int, tickets: [DeliveryTicket]) {
        let size = shardSize(devices: total)
        let count = max(1, (total + size - 1) / size)
        _ = try await store.campaigns.record(
            id: campaign.id, app: campaign.app, audience: audience.count, shards: count, definition: definition,
            status: .planning, sendAt: campaign.options.sendAt)
        var tickets = [try await writer.campaign(accepted)]
        // Shards cover all the app's devices; the segment's share is spread evenly.
        let estimate = total == 0 ? 0 : Int((Double(audience.count) / Double(total) * Double(size)).rounded(.up))
        let (found, finder) = AsyncStream.makeStream(of: ShardRange.self)
        let (store, app) = (store, campaign.app)
        async let walked = Task {
            defer { finder.finish() }
            return try await store.audience.shards(app: app, size: size, count: count) { finder.yield($0) }
        }.value
        var ranges: [PlannedRange] = []
        for await range in found {
            ranges.append(PlannedRange(after: range.after, through: range.through, estimate: estimate))
            tickets += try await produceTasks(campaign, ranges.suffix(1), first: ranges.count - 1, of: count, notBefore: campaign.options.sendAt)
        }
        _ = try await walked
        return (count, tickets)
    }

    /// All the app's devices, for a segment campaign (an explicit list needs none).
    func appDeviceCount(_ campaign: Campaign) async throws -> Int {
        guard case .devices = campaign.audience else { return try await store.audience.count(app: campaign.app, segment: nil) }
        return 0
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
    func produceTasks(
        _ campaign: Campaign, _ ranges: some Collection<PlannedRange>, first: Int = 0, of total: Int? = nil, notBefore sendAt: Int64?
    ) async throws -> [DeliveryTicket] {
        let shards = total ?? ranges.count
        // Each lane gets a partition of its own (while there are enough), at an offset that
        // depends on the app, so lanes spread over the workers (round-robin assignment)
        // instead of wherever the key hash puts them.
        let partitions = try await writer.producer.partitionCount(topic: writer.topics.tasks)
        let lanes = min(settings.lanes, partitions)
        let base = Int(FNV1a.hash(campaign.app) % UInt64(partitions))
        let notBefore = sendAt.flatMap { $0 > epochMillis() ? $0 : nil }
        var batch: [ProducerRecord] = []
        for (offset, range) in ranges.enumerated() {
            let index = first + offset
            let task = TaskRecord(
                campaign: campaign.id, app: campaign.app, shard: index, shards: shards, after: range.after, through: range.through,
                estimate: range.estimate, lane: index % lanes, lanes: lanes, notBefore: notBefore)
            batch.append(ProducerRecord(
                topic: writer.topics.tasks, key: task.kafkaKey, value: MessageCodec.encode(task), partition: Int32((base + task.lane) % partitions)))
        }
        return [try await writer.producer.enqueue(batch)]
    }

    /// The audience: the segment to expand, or the row keys of an explicit device list.
    struct Audience {
        var segment: SegmentExpression?
        var rowKeys: [Int64]?
        var count: Int
    }

    func resolve(_ campaign: Campaign, refuse: (String, String) -> Refusal) async throws -> Audience {
        switch campaign.audience {
        case .segment(let text):
            let segment: SegmentExpression
            do { segment = try SegmentParser.parse(text) } catch {
                throw refuse("invalid_segment", "audience.segment: \(error)")
            }
            return Audience(segment: segment, count: try await store.audience.count(app: campaign.app, segment: segment))
        case .named(let name):
            guard let text = try await store.audience.savedSegment(app: campaign.app, name: name) else {
                throw refuse("unknown_segment", "audience.named: app \(campaign.app) has no saved segment \(name.debugDescription)")
            }
            let segment: SegmentExpression
            do { segment = try SegmentParser.parse(text) } catch {
                throw refuse("invalid_segment", "saved segment \(name): \(error)")
            }
            return Audience(segment: segment, count: try await store.audience.count(app: campaign.app, segment: segment))
        case .devices(let ids):
            let keys = try await store.audience.rowKeys(app: campaign.app, deviceIDs: ids)
            return Audience(rowKeys: keys, count: keys.count)
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
        let total = try await store.audience.count(app: campaign.app, segment: nil)
        let size = shardSize(devices: total)
        let shards = try await store.audience.shards(app: campaign.app, size: size)
        // Shards cover all the app's devices; the segment's share is spread evenly.
        let estimate = total == 0 ? 0 : Int((Double(audience.count) / Double(total) * Double(size)).rounded(.up))
        return shards.map { PlannedRange(after: $0.after, through: $0.through, estimate: estimate) }
    }
}
