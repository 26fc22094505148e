import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport

/// The pages of one task's shard, in row-key order, each read while the one before it is
/// being sent. A segment audience pages through the shard's row-key range with the segment
/// applied in SQL; an explicit audience (or a quiet-hours hold) reads its listed devices by
/// row key, never the app's other devices in the range. A zone wave's task reads only the
/// devices in its zones; a winner campaign's task keeps only the devices of its phase.
///
/// Only reading runs ahead: a page is claimed when its turn comes, so a crash leaves nothing
/// claimed that was not about to be sent.
struct ShardPages {
    private enum Source {
        case range(segment: SegmentExpression?, shard: ShardRange)
        case listed(rowKeys: ArraySlice<Int64>)
        /// A broadcast: one page of the channel alone.
        case channel(BroadcastTarget)
    }

    private let store: DeviceStore
    private let app: String
    private let pageSize: Int
    private let source: Source
    /// A zone wave's zones: only its devices are read.
    private let zones: [String]?
    /// A personalised campaign's pages carry each device's versions and attributes.
    private let traits: Bool
    /// A push to another kind of token: each device's token of that kind.
    private let tokens: TokenSelection?
    /// A winner campaign's phase, and the campaign that tells each device's.
    private let phase: (Campaign.Phase, Campaign)?
    private var next: Task<[DeviceTarget], any Error>?
    /// Explicit audience: where the next page starts in `rowKeys`.
    private var listedOffset = 0

    init(store: DeviceStore, plan: CampaignPlan, task: TaskRecord, pageSize: Int) {
        self.store = store
        app = task.app
        self.pageSize = pageSize
        let shard = ShardRange(after: task.after, through: task.through)
        zones = task.zones
        traits = plan.personalised
        tokens = plan.campaign.tokenSelection
        phase = task.phase.map { ($0, plan.campaign) }
        if let channel = plan.channel {
            source = .channel(channel)
        } else if let rows = task.rows {
            // A quiet-hours hold: exactly its devices.
            source = .listed(rowKeys: ArraySlice(rows.sorted()))
        } else if let keys = plan.rowKeys {
            // The listed keys inside (after, through]: the planner cut its shards from them.
            let start = task.after.map { after in keys.partitioningIndex(where: { $0 > after }) } ?? keys.startIndex
            let end = task.through.map { through in keys.partitioningIndex(where: { $0 > through }) } ?? keys.endIndex
            source = .listed(rowKeys: keys[start..<max(start, end)])
        } else {
            source = .range(segment: plan.segment, shard: shard)
        }
        next = read(after: nil)
    }

    /// The next page; nil when the shard is done. A page may be empty (none of its listed
    /// devices is active any more) without the shard being done.
    mutating func nextPage() async throws -> [DeviceTarget]? {
        guard let reading = next else { return nil }
        let page = try await reading.value
        switch source {
        case .range:
            next = page.count < pageSize ? nil : read(after: page.last?.rowKey)
        case .listed(let keys):
            listedOffset = min(listedOffset + pageSize, keys.count)
            next = listedOffset < keys.count ? read(after: nil) : nil
        case .channel:
            next = nil
        }
        guard let (wanted, campaign) = phase else { return page }
        return page.filter { campaign.phase(of: $0.deviceID) == wanted }
    }

    /// Stops the read in progress, if any.
    func cancel() { next?.cancel() }

    private func read(after cursor: Int64?) -> Task<[DeviceTarget], any Error> {
        let (store, app, limit, zones, traits, tokens) = (self.store, self.app, pageSize, self.zones, self.traits, self.tokens)
        switch source {
        case .range(let segment, let shard):
            return Task { try await store.audience.page(app: app, segment: segment, shard: shard, cursor: cursor, limit: limit, zones: zones, traits: traits, tokens: tokens, now: store.clock.wallMillis) }
        case .listed(let keys):
            let start = keys.startIndex + listedOffset
            let page = Array(keys[start..<min(start + limit, keys.endIndex)])
            return Task { page.isEmpty ? [] : try await store.audience.devices(app: app, rowKeys: page, zones: zones, traits: traits, tokens: tokens, now: store.clock.wallMillis) }
        case .channel(let channel):
            return Task { [channel.target] }
        }
    }
}

extension RandomAccessCollection {
    /// The first index whose element satisfies `belongs`, for a collection where every such
    /// element comes after every other (binary search).
    func partitioningIndex(where belongs: (Element) -> Bool) -> Index {
        var low = startIndex
        var count = self.count
        while count > 0 {
            let half = count / 2
            let middle = index(low, offsetBy: half)
            if belongs(self[middle]) {
                count = half
            } else {
                low = index(after: middle)
                count -= half + 1
            }
        }
        return low
    }
}
