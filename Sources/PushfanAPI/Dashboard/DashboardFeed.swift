import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import Synchronization

/// Who looks at the dashboard: the admin sees everything; an app's master secret shows that
/// app's campaigns and rate (not the dead letters, which are not an app's).
package enum DashboardViewer: Hashable, Sendable {
    case admin
    case app(String)
}

/// The live dashboard's data: reads the results and dead-letter topics in a consumer group of
/// its own, counts each campaign per partition (`CampaignTally`), and saves each partition's
/// tallies with the offset they reach in one store transaction, so a restarted (or another)
/// API process goes on exactly where the last save was: no record counted twice or missed.
///
/// Every `interval` it saves what changed, reads the merged tallies of the recent campaigns
/// back from the store (other API processes in the group count the other partitions) and
/// sends each open event stream its snapshot, or a heartbeat when nothing changed.
package final class DashboardFeed: Sendable {
    package struct Settings: Sendable {
        package var interval: Duration = .milliseconds(500)
        /// Campaigns shown: the most recently active.
        package var campaigns = 50
        /// Dead letters shown.
        package var deadLetters = 20
        /// A stream that got nothing for this long gets a comment line, so a client that has
        /// gone is noticed by the failed write.
        package var heartbeat: Duration = .seconds(5)
        /// A campaign's tally leaves memory after this long without records (it stays saved).
        package var idle: Duration = .seconds(600)
        package init() {}
    }

    private let consumer: KafkaConsumer
    private let store: DeviceStore
    /// The store's clock: the API's one time.
    private var clock: any ServiceClock { store.clock }
    private let topics: TopicNames
    private let settings: Settings
    private let logger: Logger
    private let counting = Locked(Counting())
    private let view = Locked(View())
    private let stopping = Atomic<Bool>(false)
    /// Records counted, by kind: `result`, `dead_letter`, `erasure` (a tombstone: the
    /// dashboard keeps counts, no device), or `unreadable` (none of these).
    private let records: Counter

    /// The tallies of the partitions this process reads, shared with the consumer's
    /// rebalance callbacks.
    private struct Counting {
        var partitions: [TopicPartition: PartitionCount] = [:]
    }

    private struct PartitionCount {
        /// The next record to count (nil: none counted yet, reading from the start).
        var nextOffset: Int64?
        /// Saved tallies are not read back (the partition is being counted from its start).
        var fresh: Bool
        var tallies: [String: CampaignTally] = [:]
        var dirty: Set<String> = []
        var deadLetters: [DashboardSnapshot.DeadLetter] = []
        var savedOffset: Int64?
        var touched: [String: ContinuousClock.Instant] = [:]
    }

    /// What the streams are shown, from the last read of the store.
    private struct View {
        var tallies: [String: (savedAt: Int64, tally: CampaignTally)] = [:]
        var limits: [String: Int] = [:]
        var limitsRead: ContinuousClock.Instant?
        var deadLetters: [DashboardSnapshot.DeadLetter] = []
        var streams: [ObjectIdentifier: Subscriber] = [:]
    }

    private struct Subscriber {
        let stream: EventStream
        let viewer: DashboardViewer
        let selected: String?
        /// The last snapshot sent, with its time cleared.
        var lastShown: DashboardSnapshot?
        var lastWrite: ContinuousClock.Instant
    }

    package init(
        kafka: KafkaClientConfiguration, groupID: String, store: DeviceStore, topics: TopicNames, settings: Settings = Settings(),
        metrics: MetricsRegistry, logger: Logger
    ) throws(KafkaError) {
        records = metrics.counter("pushfan_dashboard_records_total", "Results-topic and dead-letter records the dashboard counted, by kind.", labels: ["kind"])
        var configuration = KafkaConsumerConfiguration(client: kafka, groupID: groupID)
        configuration.bufferCapacity = 50_000
        consumer = try KafkaConsumer(configuration: configuration, logger: logger.child("consumer"))
        self.store = store
        self.topics = topics
        self.settings = settings
        self.logger = logger
        consumer.onAssign { [counting, store, logger] partitions in
            Self.assigned(partitions, counting: counting, store: store, logger: logger)
        }
        consumer.onRevoke { [counting, store, logger] partitions in
            let progress = counting.withLock { state in
                partitions.compactMap { partition in state.partitions.removeValue(forKey: partition).flatMap { Self.unsaved(partition, $0) } }
            }
            do { try store.dashboard.saveBlocking(progress, now: store.clock.wallMillis) } catch {
                logger.warning("dashboard.save_failed", ["error": "\(error)"])
            }
        }
        try consumer.subscribe(topics: [topics.results, topics.deadletter])
        metrics.collected("pushfan_dashboard_streams", "Dashboard event streams open.") { [weak self] in [([], Double(self?.streams ?? 0))] }
        // The one place campaign ids are labels: a bounded set of running campaigns.
        let running: @Sendable () -> [DashboardSnapshot.CampaignRow] = { [weak self] in
            guard let self else { return [] }
            return Array(self.snapshot(for: .admin, selected: nil, now: self.clock.wallMillis).campaigns.filter { ["running", "sending", "paused"].contains($0.status) }.prefix(Self.labelledCampaigns))
        }
        metrics.collected(
            "pushfan_campaign_done_devices", "Devices with a final outcome, of the \(Self.labelledCampaigns) most recently active running, sending or paused campaigns.",
            labels: ["campaign", "app"]) { running().map { (Self.labels($0), Double($0.done)) } }
        metrics.collected(
            "pushfan_campaign_audience_devices", "Devices targeted, of the same campaigns.", labels: ["campaign", "app"]
        ) { running().compactMap { row in row.audience.map { (Self.labels(row), Double($0)) } } }
        metrics.collected(
            "pushfan_campaign_send_rate", "Sends per second over the last seconds (the dashboard's), of the same campaigns.", labels: ["campaign", "app"]
        ) { running().map { (Self.labels($0), Double($0.rate)) } }
    }

    /// A row's `campaign` and `app` labels: its id within its app, and the app (the row's
    /// own id is the campaign's `<app>/<id>`).
    private static func labels(_ row: DashboardSnapshot.CampaignRow) -> [String] {
        [CampaignKey(stored: row.id)?.id ?? row.id, row.app ?? ""]
    }

    /// Running campaigns exported with their id as a label: the most recently active.
    static let labelledCampaigns = 20

    /// Reads and publishes until `stop`.
    package func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.consume() }
            group.addTask { await self.tick() }
        }
    }

    /// Ends every stream, saves what was counted and leaves the group.
    package func stop() async {
        stopping.store(true, ordering: .releasing)
        for subscriber in view.withLock({ Array($0.streams.values) }) { subscriber.stream.close() }
        await save()
        await consumer.close()
    }

    /// A stream of snapshots for `viewer`, with `selected`'s send rate; the first at once.
    package func subscribe(_ viewer: DashboardViewer, selected: String?) -> EventStream {
        let stream = EventStream()
        stream.send(Array("retry: 2000\n\n".utf8))
        var first = snapshot(for: viewer, selected: selected, now: clock.wallMillis)
        stream.send(Self.event(first))
        first.at = 0
        view.withLock { $0.streams[ObjectIdentifier(stream)] = Subscriber(stream: stream, viewer: viewer, selected: selected, lastShown: first, lastWrite: clock.now) }
        return stream
    }

    /// Streams open now.
    package var streams: Int { view.withLock { $0.streams.count } }

    /// What `viewer` sees now.
    package func snapshot(for viewer: DashboardViewer, selected: String?, now: Int64) -> DashboardSnapshot {
        view.withLock { Self.snapshot($0, viewer: viewer, selected: selected, now: now, campaigns: settings.campaigns) }
    }

    private static func snapshot(_ view: View, viewer: DashboardViewer, selected: String?, now: Int64, campaigns: Int) -> DashboardSnapshot {
        var tallies: [String: CampaignTally] = [:]
        for (id, entry) in view.tallies {
            if case .app(let app) = viewer, entry.tally.app != app { continue }
            tallies[id] = entry.tally
        }
        return DashboardSnapshot.build(
            tallies: tallies, limits: view.limits, deadLetters: viewer == .admin ? view.deadLetters : [], selected: selected, now: now,
            maxCampaigns: campaigns)
    }

    /// One Server-Sent Event carrying a snapshot as JSON (one line: JSON has no raw newlines).
    static func event(_ snapshot: DashboardSnapshot) -> [UInt8] {
        Array("event: snapshot\ndata: ".utf8) + json(snapshot) + Array("\n\n".utf8)
    }

    static func json(_ snapshot: DashboardSnapshot) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? Array(encoder.encode(snapshot))) ?? Array("{}".utf8)
    }

    // MARK: Counting

    private func consume() async {
        for await event in consumer.events {
            switch event {
            case .records(let records): await count(records)
            case .assigned, .revoked: break
            case .error(let error):
                logger.warning("dashboard.kafka", ["error": error.description])
                if error.isFatal { return }
            }
            if stopping.load(ordering: .acquiring) { return }
        }
    }

    private enum Read {
        case result(ResultRecord)
        case deadLetter(DashboardSnapshot.DeadLetter)
        case erasure
        case unreadable
    }

    private func count(_ batch: [KafkaRecord]) async {
        let results = topics.results
        let read: [(TopicPartition, Int64, Read)] = batch.map { record in
            let value: Read
            if record.topic == results {
                // Pushfan's own spelling first: JSONDecoder would cost most of the counting.
                if let device = record.withValueBytes({ DeviceResult(canonicalJSON: $0) }) {
                    value = .result(.device(device))
                } else {
                    value = (try? MessageCodec.decode(ResultRecord.self, from: record.value)).map(Read.result)
                        ?? ((try? MessageCodec.decode(ErasureRecord.self, from: record.value)) == nil ? .unreadable : .erasure)
                }
            } else {
                value = (try? MessageCodec.decode(DeadLetterRecord.self, from: record.value)).map { .deadLetter(DashboardSnapshot.DeadLetter($0)) } ?? .unreadable
            }
            return (record.topicPartition, record.offset, value)
        }
        // A record is counted only on top of its campaign's saved tally: records whose tally is
        // not in memory (not read yet, or let go meanwhile) wait, with the rest of their
        // partition's, for another read. While stopping they are left for the next reader.
        var pending = read
        while !pending.isEmpty && !stopping.load(ordering: .acquiring) {
            await loadTallies(for: pending)
            pending = apply(pending)
        }
    }

    /// Counts records in order; returns those of partitions that met a campaign whose saved
    /// tally is not in memory, from that record on.
    private func apply(_ read: [(TopicPartition, Int64, Read)]) -> [(TopicPartition, Int64, Read)] {
        let now = clock.now
        var kinds = (results: 0, deadLetters: 0, erasures: 0, unreadable: 0)
        var waiting: [(TopicPartition, Int64, Read)] = []
        counting.withLock { state in
            var held: Set<TopicPartition> = []
            for entry in read {
                let (partition, offset, value) = entry
                if held.contains(partition) {
                    waiting.append(entry)
                    continue
                }
                // A partition no longer ours, or a record already counted (read again after a
                // rebalance): skipped.
                guard var count = state.partitions[partition], offset >= count.nextOffset ?? 0 else { continue }
                if case .result(let record) = value, !count.fresh, count.tallies[record.campaignKey.stored] == nil {
                    held.insert(partition)
                    waiting.append(entry)
                    continue
                }
                count.nextOffset = offset + 1
                switch value {
                case .result(let record):
                    kinds.results += 1
                    let campaign = record.campaignKey.stored
                    count.tallies[campaign, default: CampaignTally()].apply(record)
                    count.dirty.insert(campaign)
                    count.touched[campaign] = now
                case .deadLetter(let letter):
                    kinds.deadLetters += 1
                    count.deadLetters.append(letter)
                case .erasure:
                    kinds.erasures += 1
                case .unreadable:
                    kinds.unreadable += 1
                }
                state.partitions[partition] = count
            }
        }
        for (kind, number) in [("result", kinds.results), ("dead_letter", kinds.deadLetters), ("erasure", kinds.erasures), ("unreadable", kinds.unreadable)]
        where number > 0 {
            self.records.add(Double(number), [kind])
        }
        return waiting
    }

    /// Reads the saved tallies of campaigns this process has not counted yet on a partition,
    /// so counting goes on from them. Waits for the store while it is down.
    private func loadTallies(for read: [(TopicPartition, Int64, Read)]) async {
        let missing: [TopicPartition: Set<String>] = counting.withLock { state in
            var missing: [TopicPartition: Set<String>] = [:]
            for (partition, _, value) in read {
                guard case .result(let record) = value, let count = state.partitions[partition], !count.fresh,
                      count.tallies[record.campaignKey.stored] == nil else { continue }
                missing[partition, default: []].insert(record.campaignKey.stored)
            }
            return missing
        }
        for (partition, campaigns) in missing {
            while !stopping.load(ordering: .acquiring) {
                do {
                    let loaded = try await store.dashboard.tallies(topic: partition.topic, partition: Int(partition.partition), campaigns: Array(campaigns))
                    counting.withLock { state in
                        guard state.partitions[partition] != nil else { return }
                        for campaign in campaigns where state.partitions[partition]?.tallies[campaign] == nil {
                            state.partitions[partition]?.tallies[campaign] = loaded[campaign] ?? CampaignTally()
                        }
                    }
                    break
                } catch {
                    logger.warning("dashboard.store_unavailable", ["error": error.description])
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
    }

    /// On the consumer's poll thread: where each newly assigned partition starts, from the
    /// saved offsets. A partition never saved is counted from its first record.
    private static func assigned(_ partitions: [TopicPartition], counting: Locked<Counting>, store: DeviceStore, logger: Logger) -> [TopicPartition: Int64] {
        var saved: [String: [Int: Int64]]?
        for attempt in 1...30 {
            do {
                saved = try store.dashboard.nextOffsets(partitions.map { ($0.topic, Int($0.partition)) })
                break
            } catch {
                logger.warning("dashboard.store_unavailable", ["error": error.description, "attempt": String(attempt)])
                Thread.sleep(forTimeInterval: 1)
            }
        }
        if saved == nil { logger.error("dashboard.recounting", ["reason": "the store did not answer: these partitions are counted again from their start"]) }
        var starts: [TopicPartition: Int64] = [:]
        counting.withLock { state in
            for partition in partitions {
                let next = saved?[partition.topic]?[Int(partition.partition)]
                state.partitions[partition] = PartitionCount(nextOffset: next, fresh: next == nil, savedOffset: next)
                starts[partition] = next ?? KafkaConsumer.beginning
            }
        }
        return starts
    }

    // MARK: Saving and publishing

    private func tick() async {
        while !stopping.load(ordering: .acquiring) {
            try? await Task.sleep(for: settings.interval)
            if stopping.load(ordering: .acquiring) { return }
            await save()
            await refresh()
            publish()
        }
    }

    /// What a partition counted since its last save, if anything.
    private static func unsaved(_ partition: TopicPartition, _ count: PartitionCount) -> DashboardTallies.PartitionProgress? {
        guard let next = count.nextOffset, next != count.savedOffset || !count.dirty.isEmpty || !count.deadLetters.isEmpty else { return nil }
        var progress = DashboardTallies.PartitionProgress(topic: partition.topic, partition: Int(partition.partition), nextOffset: next)
        for campaign in count.dirty { progress.tallies[campaign] = count.tallies[campaign] }
        progress.deadLetters = count.deadLetters
        return progress
    }

    private func save() async {
        let idleBefore = clock.now - settings.idle
        let progress: [(TopicPartition, DashboardTallies.PartitionProgress)] = counting.withLock { state in
            var progress: [(TopicPartition, DashboardTallies.PartitionProgress)] = []
            for (partition, count) in state.partitions {
                guard let unsaved = Self.unsaved(partition, count) else { continue }
                progress.append((partition, unsaved))
                state.partitions[partition]?.dirty = []
                state.partitions[partition]?.deadLetters = []
                state.partitions[partition]?.savedOffset = unsaved.nextOffset
                // Saved and quiet: kept in the store only, read back if records come again.
                for (campaign, touched) in count.touched where touched < idleBefore && !count.dirty.contains(campaign) {
                    state.partitions[partition]?.tallies[campaign] = nil
                    state.partitions[partition]?.touched[campaign] = nil
                    state.partitions[partition]?.fresh = false
                }
            }
            return progress
        }
        guard !progress.isEmpty else { return }
        do {
            try await store.dashboard.save(progress.map(\.1), now: store.clock.wallMillis)
            // The group's offsets follow the saves, for lag tools; counting starts from the
            // saved offsets, never from these.
            try? consumer.storeNextOffsets(Dictionary(progress.map { ($0.0, $0.1.nextOffset) }, uniquingKeysWith: max))
        } catch {
            logger.warning("dashboard.save_failed", ["error": error.description])
            counting.withLock { state in
                for (partition, unsaved) in progress where state.partitions[partition] != nil {
                    state.partitions[partition]?.dirty.formUnion(unsaved.tallies.keys)
                    state.partitions[partition]?.deadLetters.insert(contentsOf: unsaved.deadLetters, at: 0)
                    state.partitions[partition]?.savedOffset = nil
                }
            }
        }
    }

    /// Reads back the recent campaigns' merged tallies (only those saved since the last read),
    /// the latest dead letters and, every ten seconds, the apps' limits.
    private func refresh() async {
        do {
            let recent = try await store.dashboard.recentCampaigns(limit: settings.campaigns)
            let known = view.withLock { $0.tallies.mapValues(\.savedAt) }
            let changed = recent.filter { known[$0.campaign] != $0.savedAt }
            let merged = changed.isEmpty ? [:] : try await store.dashboard.merged(changed.map(\.campaign))
            let letters = try await store.dashboard.deadLetters(limit: settings.deadLetters)
            let readLimits = view.withLock { $0.limitsRead.map { self.clock.now - $0 > .seconds(10) } ?? true }
            let limits = readLimits ? Dictionary(try await store.apps.list().map { ($0.app, $0.ratePerSecond) }, uniquingKeysWith: { a, _ in a }) : nil
            view.withLock { view in
                var tallies: [String: (savedAt: Int64, tally: CampaignTally)] = [:]
                for (campaign, savedAt) in recent {
                    if let fresh = merged[campaign] { tallies[campaign] = (savedAt, fresh) } else if let old = view.tallies[campaign] { tallies[campaign] = old }
                }
                view.tallies = tallies
                view.deadLetters = letters
                if let limits {
                    view.limits = limits
                    view.limitsRead = self.clock.now
                }
            }
        } catch {
            logger.warning("dashboard.store_unavailable", ["error": error.description])
        }
    }

    /// Sends each stream its snapshot if it changed, a heartbeat if it has been quiet, and
    /// forgets the streams whose clients have gone.
    private func publish() {
        let now = clock.now
        let millis = clock.wallMillis
        view.withLock { view in
            var rendered: [String: (shown: DashboardSnapshot, event: [UInt8])] = [:]
            for (id, var subscriber) in view.streams {
                guard subscriber.stream.isOpen else {
                    view.streams[id] = nil
                    continue
                }
                let key = "\(subscriber.viewer)|\(subscriber.selected ?? "")"
                if rendered[key] == nil {
                    var snapshot = Self.snapshot(view, viewer: subscriber.viewer, selected: subscriber.selected, now: millis, campaigns: settings.campaigns)
                    let event = Self.event(snapshot)
                    snapshot.at = 0
                    rendered[key] = (snapshot, event)
                }
                let (shown, event) = rendered[key]!
                if shown != subscriber.lastShown {
                    subscriber.stream.send(event)
                    subscriber.lastShown = shown
                    subscriber.lastWrite = now
                } else if now - subscriber.lastWrite >= settings.heartbeat {
                    subscriber.stream.send(Array(": heartbeat\n\n".utf8))
                    subscriber.lastWrite = now
                }
                view.streams[id] = subscriber
            }
        }
    }
}
