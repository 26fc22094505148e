import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics

@testable import PushfanWorker

/// The sending core (`ShardSender` and the rooms it runs: pages, claims, `SendRound`,
/// `BatchTransmitter`, `OutcomeRecorder`, `CampaignCompletion`) inside the test's own
/// process: a SQLite store in a temporary directory, results produced to an in-process Kafka
/// mock cluster, requests answered by a script instead of APNs, and time on a clock the
/// harness moves to the next sleeper's deadline, never past it. No process is started.
final class SendingCoreHarness: Sendable {
    let clock = ManualClock()
    let store: DeviceStore
    let apns: ScriptedAPNs
    let context: SenderContext
    private let pipeline: InProcessPipeline
    /// Applies operators' records to the store, as the worker's control role does.
    private let controlWrites: Task<Void, Never>
    static let app = InProcessPipeline.app

    /// An app sending `rate` per second with `devices` devices `d-0`…, tokens 1…, in locale
    /// en_US; the worker's claims last `lease` seconds, and at most `batchesInFlight` batches
    /// of a round are out at once.
    init(
        devices: Int, rate: Int = 1_000, lease: Int = 30, batchesInFlight: Int = 64, retryPolicy: RetryPolicy = RetryPolicy(),
        answer: @escaping ScriptedAPNs.Script = { _, _ in .accepted }
    ) async throws {
        let logger = Logger(label: "test", threshold: .error)
        let topics = TopicNames()
        pipeline = try await InProcessPipeline.start(
            devices: devices, rate: rate, topics: [(topics.results, 1), (topics.deadletter, 1), (topics.control, 1)], clock: clock, logger: logger)
        store = pipeline.store
        let writer = ResultsWriter(producer: pipeline.producer, topics: topics)
        apns = ScriptedAPNs(clock: clock, answer: answer)
        var settings = PushfanConfiguration.Worker()
        settings.pageSize = 100
        settings.leaseSeconds = lease
        var context = SenderContext(
            workerID: "w1", store: store, writer: writer,
            catalog: CampaignCatalog(store: store, clients: APNsClients(), endpointOverride: nil), apns: apns,
            rates: RateLanes(clock: clock), pauses: AppPauses(logger: logger, clock: clock), circuits: LaneCircuits(logger: logger, clock: clock),
            controls: CampaignControls(store: store, logger: logger, clock: clock),
            progress: ProgressReporter(store: store, writer: writer, interval: .seconds(3_600), clock: clock, logger: logger),
            settings: settings, retryPolicy: retryPolicy, clock: clock, logger: logger)
        context.batchesInFlight = batchesInFlight
        self.context = context
        let (controls, stop) = (context.controls, StopSignal(clock: clock))
        controlWrites = Task { await controls.runWrites(until: stop) }
    }

    static func token(_ index: Int) -> String { InProcessPipeline.token(index) }

    /// Stores a running campaign to every device of the app (by default), as the planner
    /// leaves it (its definition made by `DeviceStore.definition(of:)`), and returns its one
    /// task (one shard, one lane).
    func campaign(_ id: String, audience: String = #"{"segment":"locale in (en_US)"}"#, options: String = "{}") async throws -> TaskRecord {
        let json = #"{"v":1,"id":"\#(id)","app":"\#(Self.app)","audience":\#(audience),"notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"}}},"options":\#(options)}"#
        let campaign = try Campaign.decodeRecord(Array(json.utf8))
        let devices = try await store.audience.count(app: Self.app, segment: nil, now: clock.wallMillis)
        _ = try await store.campaigns.record(
            campaign.key, audience: devices, shards: 1, definition: try await store.definition(of: campaign), status: .running, now: clock.wallMillis)
        return TaskRecord(campaign: id, app: Self.app, shard: 0, shards: 1, after: nil, through: nil, estimate: devices, lane: 0, lanes: 1)
    }

    /// Runs the task to its end. While it runs, time moves to the next deadline whenever a
    /// task sleeps on the clock (a rate, a retry's delay, a pause), after a short real pause
    /// that lets the store's and Kafka's threads finish what they do.
    func run(_ task: TaskRecord) async -> TaskEnd {
        await run(task, records: ["0@0"])[0]
    }

    /// Runs the task once per record place at the same time, as a worker runs two records of
    /// one shard (a campaign planned again) side by side.
    func run(_ task: TaskRecord, records: [String]) async -> [TaskEnd] {
        let context = context
        let senders = records.map { record in Task { await ShardSender(context: context, task: task, record: record).run() } }
        let done = Locked(false)
        let driver = Task {
            while !done.withLock({ $0 }) {
                // A real pause lets the store's queues and Kafka's threads finish what they
                // do before time moves; it never decides what the test sees.
                try? await Task.sleep(for: .milliseconds(2))
                if clock.sleeping > 0 { clock.advanceToNextDeadline() }
            }
        }
        var ends: [TaskEnd] = []
        for sender in senders { ends.append(await sender.value) }
        done.withLock { $0 = true }
        await driver.value
        return ends
    }

    /// An operator's pause, resume or cancel as `OperatorCommand` makes it: the store first,
    /// then the record a worker reads from the control topic.
    func command(_ action: ControlRecord.Action, _ task: TaskRecord) async throws {
        _ = try await store.campaigns.control(task.campaignKey, action, now: clock.wallMillis)
        context.controls.read(ControlRecord(campaign: task.campaignKey, action: action, at: clock.wallMillis))
    }

    /// Every device of the app, as a page of the audience gives them to the sender.
    func targets() async throws -> [DeviceTarget] {
        try await store.audience.page(
            app: Self.app, segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 100_000, zones: nil, traits: false,
            tokens: nil, now: clock.wallMillis)
    }

    /// Another worker ("w2") claiming every device of the task's campaign now, as after a
    /// rebalance: it takes over claims whose lease ran out; nil if the store failed.
    func rivalClaim(_ task: TaskRecord) async -> DeliveryLedger.Claim? {
        guard let targets = try? await targets() else { return nil }
        return try? await store.ledger.claim(campaign: task.campaignKey, targets: targets, owner: "w2", lease: .seconds(15), now: clock.wallMillis)
    }

    /// The first `count` device results on the results topic.
    func results(count: Int) async throws -> [DeviceResult] {
        try await pipeline.deviceResults(topic: TopicNames().results, count: count)
    }

    /// Final outcomes in the ledger, by state.
    func outcomes(_ task: TaskRecord) async throws -> [LedgerState: Int] {
        try await store.ledger.outcomeCounts(campaign: task.campaignKey)
    }

    func stop() async {
        context.controls.finishReading()
        await controlWrites.value
        await pipeline.stop()
    }
}

/// APNs as a script: each request is answered by `answer(token, attempt)` (attempt 1 for the
/// token's first request), and kept with the clock's time it came at.
final class ScriptedAPNs: APNsConnector, APNsRequestSink {
    typealias Script = @Sendable (_ token: String, _ attempt: Int) -> Answer

    enum Answer: Sendable {
        case accepted
        case rejected(Int, APNsReason, timestamp: Date? = nil)
        case failed(APNsTransportFailure.Cause)
    }

    struct Request: Sendable {
        let token: String
        let at: ContinuousClock.Instant
    }

    /// Runs before a batch is answered, with the number of requests answered so far: what
    /// happens while the batch waits in the client's queue for a stream.
    typealias BatchHook = @Sendable (_ requestsSoFar: Int) async -> Void

    private let clock: ManualClock
    private let answer: Script
    private let log = Locked<[Request]>([])
    private let hook = Locked<BatchHook?>(nil)
    private let withdrawals = Locked(0)

    init(clock: ManualClock, answer: @escaping Script) {
        (self.clock, self.answer) = (clock, answer)
    }

    var requests: [Request] { log.withLock { $0 } }

    /// Requests the sender withdrew before they went on a stream.
    var withdrawn: Int { withdrawals.withLock { $0 } }

    func beforeEachBatch(_ run: @escaping BatchHook) { hook.withLock { $0 = run } }

    /// Runs `work` once, before the first batch is answered.
    func beforeFirstBatch(_ work: @escaping @Sendable () async -> Void) {
        let done = Locked(false)
        beforeEachBatch { _ in
            let first = done.withLock { done in
                defer { done = true }
                return !done
            }
            if first { await work() }
        }
    }

    /// Requests per token.
    var attempts: [String: Int] { Dictionary(requests.map { ($0.token, 1) }, uniquingKeysWith: +) }

    func requests(for app: AppRecord, environment: APNsEnvironment) throws(CatalogError) -> any APNsRequestSink { self }

    func send(batch: [APNsNotification], started: (@Sendable () -> Void)?, ahead: Bool, withdrawn: (@Sendable () -> Bool)?) async -> [APNsSendResult] {
        defer { started?() }
        if let run = hook.withLock({ $0 }) { await run(requests.count) }
        return batch.map { notification in
            if withdrawn?() == true {
                withdrawals.withLock { $0 += 1 }
                return .failed(APNsTransportFailure(.withdrawn))
            }
            let token = notification.token?.hex ?? ""
            let attempt = log.withLock { log in
                log.append(Request(token: token, at: clock.now))
                return log.filter { $0.token == token }.count
            }
            switch answer(token, attempt) {
            case .accepted: return .response(.accepted(apnsID: UUID().uuidString, uniqueID: nil))
            case .rejected(let status, let reason, let timestamp): return .response(.rejected(status: status, reason: reason, timestamp: timestamp))
            case .failed(let cause): return .failed(APNsTransportFailure(cause))
            }
        }
    }
}
