import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics
import Synchronization

/// One worker process: the planner, sender and events roles, each a member of its own
/// consumer group (`<group>-planner` on the campaigns topic, `<group>` on the tasks topic,
/// `<group>-events` on the events topic), so any role can be switched off and any number of
/// workers share the work. A sender also reads the whole control topic in a group of its
/// own, so every sender sees every command.
package final class Worker: Sendable {
    package struct Options: Sendable {
        package var planner = true
        package var sender = true
        /// Count engagement events (`EventCounter`).
        package var events = true
        package var workerID: String
        package var kafka: KafkaClientConfiguration
        package var groupID: String
        package var topics: TopicNames
        package var settings: PushfanConfiguration.Worker
        package var apns: APNsClientConfiguration
        package var endpointOverride: APNsEndpoint?
        package var retryPolicy = RetryPolicy()
        /// Where this worker's metrics are counted (`--metrics-port` serves them).
        package var metrics = WorkerMetrics()

        package init(
            workerID: String, kafka: KafkaClientConfiguration, groupID: String, topics: TopicNames, settings: PushfanConfiguration.Worker,
            apns: APNsClientConfiguration, endpointOverride: APNsEndpoint?
        ) {
            self.workerID = workerID
            self.kafka = kafka
            self.groupID = groupID
            self.topics = topics
            self.settings = settings
            self.apns = apns
            self.endpointOverride = endpointOverride
        }
    }

    private let options: Options
    private let store: DeviceStore
    private let logger: Logger
    private let producer: KafkaProducer
    private let writer: ResultsWriter
    private let clients: APNsClients
    private let plannerConsumer: KafkaConsumer?
    private let senderConsumer: KafkaConsumer?
    private let controlConsumer: KafkaConsumer?
    private let eventsConsumer: KafkaConsumer?
    private let controls: CampaignControls
    private let scheduler: TaskScheduler?
    private let stopping: StopSignal
    private let clock: any ServiceClock
    private let plannerJoined = Atomic<Bool>(false)
    private let senderJoined = Atomic<Bool>(false)
    private let controlJoined = Atomic<Bool>(false)
    private let eventsJoined = Atomic<Bool>(false)
    private let shutdown = Locked<Task<Void, Never>?>(nil)

    package init(options: Options, store: DeviceStore, logger: Logger) throws {
        self.options = options
        self.store = store
        self.logger = logger
        // The store's clock: the one the process was started with, so rows and records agree.
        let clock = store.clock
        self.clock = clock
        stopping = StopSignal(clock: clock)
        var producerConfiguration = KafkaProducerConfiguration(client: options.kafka)
        producerConfiguration.linger = .milliseconds(5)
        producer = try KafkaProducer(configuration: producerConfiguration, logger: logger.child("producer"))
        writer = ResultsWriter(producer: producer, topics: options.topics)
        // One provider token per signing key across all workers (through the store): APNs
        // refuses a key's token changing more often than every 20 minutes.
        let sharedTokens = ProviderTokenCache.shared(through: store.providerTokens, clock: clock) { error in
            logger.warning("worker.token_not_shared", ["error": "\(error)"])
        }
        clients = APNsClients(configuration: options.apns, tokenCache: sharedTokens, logger: logger, metrics: options.metrics.apns)

        func makeConsumer(
            group: String, topic: String, from reset: KafkaConsumerConfiguration.OffsetReset = .earliest, pollBatch: Int = 1_000
        ) throws -> KafkaConsumer {
            var client = options.kafka
            // Cooperative: a worker joining or leaving moves only the partitions that change
            // owner, and every other lane keeps sending through the rebalance (an eager
            // assignor stops every worker's tasks for the whole join).
            if client.properties["partition.assignment.strategy"] == nil { client.properties["partition.assignment.strategy"] = "cooperative-sticky" }
            var configuration = KafkaConsumerConfiguration(client: client, groupID: group)
            configuration.offsetReset = reset
            configuration.pollBatch = pollBatch
            let consumer = try KafkaConsumer(configuration: configuration, logger: logger.child(group))
            try consumer.subscribe(topics: [topic])
            return consumer
        }
        plannerConsumer = options.planner ? try makeConsumer(group: options.groupID + "-planner", topic: options.topics.campaigns) : nil
        // Events are counted a poll at a time in one transaction: many share the B-tree pages
        // their random ids and devices touch, where batches of 1,000 wrote most pages anew
        // (scripts/bench-events: the stats caught up 0.9 s after a burst instead of 2.1 s
        // with 5,000; with 20,000, 0.5-0.8 s instead of 0.9-1.2 s at 1.5 times that API rate).
        eventsConsumer = options.events ? try makeConsumer(group: options.groupID + "-events", topic: options.topics.events, pollBatch: 20_000) : nil
        if options.sender {
            let consumer = try makeConsumer(group: options.groupID, topic: options.topics.tasks)
            controls = CampaignControls(store: store, logger: logger, clock: clock)
            // A group of its own per process, from the newest record: commands given before
            // this worker started are in the store, which senders read before each page.
            controlConsumer = try makeConsumer(
                group: "\(options.groupID)-control-\(options.workerID)-\(UInt32.random(in: 0...UInt32.max))", topic: options.topics.control, from: .latest)
            let pauses = AppPauses(logger: logger, giveUpAfter: .seconds(options.settings.credentialsGiveUpSeconds), clock: clock)
            let rates = RateLanes(clock: clock)
            let context = SenderContext(
                workerID: options.workerID, store: store, writer: writer,
                catalog: CampaignCatalog(store: store, clients: clients, endpointOverride: options.endpointOverride),
                rates: rates, pauses: pauses,
                circuits: LaneCircuits(logger: logger, clock: clock), controls: controls,
                progress: ProgressReporter(store: store, writer: writer, interval: .milliseconds(options.settings.progressIntervalMs), clock: clock, logger: logger),
                settings: options.settings, retryPolicy: options.retryPolicy, clock: clock, metrics: options.metrics, logger: logger)
            let writer = self.writer
            let scheduler = TaskScheduler(
                consumer: consumer, logger: logger, makeSender: { ShardSender(context: context, task: $0, record: $1) },
                deadLetter: { record, code, reason in
                    let letter = ResultsWriter.deadLetter(for: record, code: code, reason: reason, at: clock.wallMillis)
                    if let ticket = try? await writer.deadLetter(letter) { _ = await ResultsWriter.delivered([ticket]) }
                    logger.warning("sender.dead_letter", ["error": code, "reason": reason])
                })
            // A revoked partition's tasks stop before the partition can move: its lanes are
            // never sent by two workers at once.
            let handBack = Duration.seconds(options.settings.shutdownTimeoutSeconds) / 2
            consumer.onRevoke { partitions in scheduler.revoke(partitions, timeout: handBack) }
            let registry = options.metrics.registry
            registry.collected("pushfan_worker_tasks", "Tasks of this worker's partitions, by state (queued, running).", labels: ["state"]) {
                let counts = scheduler.counts
                return [(["queued"], Double(counts.queued)), (["running"], Double(counts.running))]
            }
            registry.collected(
                "pushfan_app_credentials_paused", "1 for an app whose sends are paused after a credentials failure (alert on it).", labels: ["app"]
            ) { pauses.pausedApps().map { ([$0], 1) } }
            // A lane's use of its budget: rate(pushfan_lane_sends_granted_total[1m]) / pushfan_lane_budget_per_second.
            registry.collected("pushfan_lane_budget_per_second", "The send budget of each app lane this worker sends (the app's rate / its lanes).", labels: ["app", "lane"]) {
                rates.appLanes.map { ([$0.app, String($0.lane)], $0.rate) }
            }
            registry.collectedCounter("pushfan_lane_sends_granted_total", "Sends each app lane's budget granted on this worker.", labels: ["app", "lane"]) {
                rates.appLanes.map { ([$0.app, String($0.lane)], Double($0.granted)) }
            }
            senderConsumer = consumer
            self.scheduler = scheduler
        } else {
            senderConsumer = nil
            controlConsumer = nil
            controls = CampaignControls(store: store, logger: logger, clock: clock)
            scheduler = nil
        }
        // Lag of the two shared groups (the control group is per process: no label for it).
        let consumers = [
            (options.groupID + "-planner", plannerConsumer), (options.groupID, senderConsumer), (options.groupID + "-events", eventsConsumer),
        ].compactMap { group, consumer in
            consumer.map { (group, $0) }
        }
        let producer = self.producer
        options.metrics.registry.collected(
            "pushfan_kafka_consumer_lag", "Records behind the partition's end for this worker's partitions, from librdkafka's statistics (every 5 s).",
            labels: ["group", "topic", "partition"]
        ) { consumers.flatMap { group, consumer in consumer.lag.map { ([group, $0.topic, String($0.partition)], Double($0.lag)) } } }
        options.metrics.registry.collected("pushfan_kafka_producer_queue", "Records queued or in flight to the brokers (results, tasks, events).") {
            [([], Double(producer.queueDepth))]
        }
    }

    /// True once each enabled role has received its first partition assignment.
    package var hasJoined: Bool {
        (plannerConsumer == nil || plannerJoined.load(ordering: .relaxed)) && (senderConsumer == nil || senderJoined.load(ordering: .relaxed))
            && (controlConsumer == nil || controlJoined.load(ordering: .relaxed)) && (eventsConsumer == nil || eventsJoined.load(ordering: .relaxed))
    }

    /// Runs until `stop()`; returns after the graceful shutdown.
    package func run() async {
        logger.notice("worker.started", [
            "worker.id": options.workerID, "worker.planner": String(options.planner), "worker.sender": String(options.sender),
            "worker.events": String(options.events),
            "store": store.location,
        ])
        await withTaskGroup(of: Void.self) { group in
            if let plannerConsumer {
                group.addTask { await self.runPlanner(plannerConsumer) }
                // Parked campaigns start from the store, whichever planner sees them due first.
                let dispatcher = CampaignDispatcher(store: store, planner: planner, clock: clock, logger: logger)
                group.addTask { await dispatcher.run(until: self.stopping) }
            }
            if let senderConsumer, let scheduler { group.addTask { await self.runSender(senderConsumer, scheduler) } }
            if let eventsConsumer { group.addTask { await self.runEvents(eventsConsumer) } }
            if let controlConsumer {
                group.addTask { await self.runControl(controlConsumer) }
                group.addTask { await self.controls.runWrites(until: self.stopping) }
            }
        }
    }

    /// SIGTERM: stop taking work, hand back or finish what is in flight, store offsets,
    /// flush results, leave the groups; all within `shutdown_timeout_s`.
    /// Idempotent: every caller waits for the one shutdown.
    package func stop() async {
        let task = shutdown.withLock { shutdown in
            if let shutdown { return shutdown }
            let task = Task { await self.shutDown() }
            shutdown = task
            return task
        }
        await task.value
    }

    private func shutDown() async {
        stopping.raise()
        let bound = Duration.seconds(options.settings.shutdownTimeoutSeconds)
        let started = clock.now
        logger.notice("worker.stopping", ["worker.id": options.workerID])
        if let scheduler {
            let budget = bound * 0.5
            await BlockingWork.run { scheduler.stop(timeout: budget) }
        }
        // Leaving the groups commits the stored offsets and moves partitions at once.
        await withTaskGroup(of: Void.self) { group in
            if let plannerConsumer { group.addTask { await plannerConsumer.close() } }
            if let senderConsumer { group.addTask { await senderConsumer.close() } }
            if let controlConsumer { group.addTask { await controlConsumer.close() } }
            if let eventsConsumer { group.addTask { await eventsConsumer.close() } }
        }
        let left = max(bound - (clock.now - started) - .milliseconds(500), .milliseconds(100))
        await producer.close(timeout: left * 0.8)
        await clients.shutdown()
        logger.notice("worker.stopped", ["worker.id": options.workerID, "elapsed_ms": String((clock.now - started).milliseconds)])
    }

    private var planner: CampaignPlanner { CampaignPlanner(store: store, writer: writer, settings: options.settings, clock: clock, logger: logger) }

    private func runPlanner(_ consumer: KafkaConsumer) async {
        let planner = self.planner
        for await event in consumer.events {
            if case .assigned = event { plannerJoined.store(true, ordering: .relaxed) }
            guard case .records(let records) = event else {
                if case .error(let error) = event { logger.warning("planner.kafka", ["error": error.description]) }
                continue
            }
            for record in records {
                var backoff = Backoff(first: .milliseconds(500), longest: .seconds(30))
                while !stopping.isRaised {
                    do {
                        _ = try await planner.handle(record)
                        try? consumer.storeOffset(record)
                        break
                    } catch {
                        // The store or Kafka is unavailable: the record waits, nothing is lost.
                        let delay = backoff.next()
                        logger.warning("planner.retry", ["kafka.offset": String(record.offset), "error": "\(error)", "retry_in_ms": String(delay.milliseconds)])
                        await stopping.sleep(for: delay)
                    }
                }
                if stopping.isRaised { break }
            }
        }
    }

    /// Control records, obeyed as they are read and written to the store in order behind
    /// (`CampaignControls`); one that does not decode is logged and left (it is an
    /// operator's, who sees the refusal from `pushfan campaigns`; a raw record's producer
    /// sees it in the log).
    private func runControl(_ consumer: KafkaConsumer) async {
        defer { controls.finishReading() }
        for await event in consumer.events {
            switch event {
            case .assigned: controlJoined.store(true, ordering: .relaxed)
            case .records(let records):
                for record in records {
                    do {
                        controls.read(try MessageCodec.decode(ControlRecord.self, from: Data(record.value)))
                    } catch {
                        logger.warning("control.unreadable", ["kafka.offset": String(record.offset), "kafka.partition": String(record.partition), "error": "\(error)"])
                    }
                }
            case .revoked: break
            case .error(let error): logger.warning("control.kafka", ["error": error.description])
            }
        }
    }

    /// Engagement events, counted a poll at a time, in poll order; checking a poll against
    /// the store (read only) overlaps counting the poll before it (scripts/bench-events). A
    /// store or Kafka outage is waited out with the same records (counting them again changes
    /// nothing), and their offsets are stored only once they are counted.
    private func runEvents(_ consumer: KafkaConsumer) async {
        let metrics = options.metrics
        let counter = EventCounter(store: store, writer: writer, logger: logger, clock: clock) { app, kind in metrics.events.add(1, [app, kind.rawValue]) }
        let (logger, stopping) = (logger, stopping)
        var counting: Task<Void, Never>?
        var nextPrune = clock.now
        for await event in consumer.events {
            if clock.now >= nextPrune {
                // Hourly: ids of events too old to be accepted again (`EngagementTallies.prune`).
                nextPrune = clock.now + .seconds(3_600)
                do {
                    let forgotten = try await store.engagement.prune(now: clock.wallMillis)
                    if forgotten > 0 { logger.info("events.pruned", ["event_ids": String(forgotten)]) }
                } catch {
                    logger.warning("events.prune_failed", ["error": "\(error)"])
                }
            }
            switch event {
            case .assigned: eventsJoined.store(true, ordering: .relaxed)
            case .records(let records):
                guard let checked = await Self.untilDone(records, logger, stopping, { try await counter.check(records) }) else { break }
                await counting?.value
                counting = Task {
                    guard await Self.untilDone(records, logger, stopping, { try await counter.deadLetter(checked) }) != nil,
                          let new = await Self.untilDone(records, logger, stopping, { try await counter.count(checked) })
                    else { return }
                    try? consumer.storeOffsets(records)
                    logger.info("events.counted", ["records": String(records.count), "new": String(new)])
                }
            case .revoked: break
            case .error(let error): logger.warning("events.kafka", ["error": error.description])
            }
        }
        await counting?.value
    }

    /// `step`, tried again after a growing pause while it throws; nil once the worker stops.
    private static func untilDone<T: Sendable>(
        _ records: [KafkaRecord], _ logger: Logger, _ stopping: StopSignal, _ step: @Sendable () async throws -> T
    ) async -> T? {
        var backoff = Backoff(first: .milliseconds(500), longest: .seconds(30))
        while !stopping.isRaised {
            do {
                return try await step()
            } catch {
                let delay = backoff.next()
                logger.warning("events.retry", ["records": String(records.count), "error": "\(error)", "retry_in_ms": String(delay.milliseconds)])
                await stopping.sleep(for: delay)
            }
        }
        return nil
    }

    private func runSender(_ consumer: KafkaConsumer, _ scheduler: TaskScheduler) async {
        for await event in consumer.events {
            switch event {
            case .assigned(let partitions):
                scheduler.assigned(partitions)
                senderJoined.store(true, ordering: .relaxed)
            case .records(let records): await scheduler.enqueue(records)
            case .revoked: break  // handled synchronously by onRevoke
            case .error(let error): logger.warning("sender.kafka", ["error": error.description])
            }
        }
    }
}
