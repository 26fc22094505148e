import Foundation
import PushfanCore
import PushfanKafka
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics

@testable import PushfanWorker

/// The planner in the test's own process: a SQLite store in a temporary directory with one
/// app and its devices, an in-process Kafka mock cluster, and a clock that stands still. A
/// campaign record goes onto the campaigns topic and comes back as a real `KafkaRecord`, as
/// the planner role reads it; the tasks it produced are read back from the tasks topic.
final class PlanningCoreHarness: Sendable {
    let clock = ManualClock()
    let store: DeviceStore
    let planner: CampaignPlanner
    let topics = TopicNames()
    private let pipeline: InProcessPipeline
    /// Asks for watermarks only; never joins a group.
    private let watcher: KafkaConsumer
    private let logger = Logger(label: "test", threshold: .error)
    static let app = InProcessPipeline.app

    /// `devices` devices `d-0`…, in locale en_US, or de_DE for every `germanEvery`-th one.
    init(devices: Int, germanEvery: Int = 4, shardSize: Int = 50) async throws {
        let pipeline = try await InProcessPipeline.start(
            devices: devices, locale: { $0 % germanEvery == 0 ? "de_DE" : "en_US" },
            topics: [(topics.campaigns, 1), (topics.tasks, 4), (topics.results, 1), (topics.deadletter, 1)], clock: clock, logger: logger)
        (self.pipeline, store) = (pipeline, pipeline.store)
        do {
            watcher = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(client: KafkaClientConfiguration(bootstrapServers: pipeline.cluster.bootstrapServers), groupID: "watermarks"),
                logger: logger)
        } catch {
            await pipeline.stop()
            throw error
        }
        var settings = PushfanConfiguration.Worker()
        settings.shardSize = shardSize
        planner = CampaignPlanner(store: store, writer: ResultsWriter(producer: pipeline.producer, topics: topics), settings: settings, clock: clock, logger: logger)
    }

    /// The record as a producer would send it, planned: what became of it.
    func submit(_ json: String) async throws -> CampaignPlanner.Outcome {
        let before = try await count(topics.campaigns)
        _ = try await pipeline.producer.send(ProducerRecord(topic: topics.campaigns, key: "k", value: Data(json.utf8)))
        let record = try await records(topics.campaigns).dropFirst(before).first
        guard let record else { throw TestFailure("the campaign record did not come back") }
        return try await planner.handle(record)
    }

    /// Every task on the tasks topic, by shard.
    func tasks() async throws -> [TaskRecord] {
        try await records(topics.tasks).map { try MessageCodec.decode(TaskRecord.self, from: Data($0.value)) }.sorted { $0.shard < $1.shard }
    }

    /// Every record of `topic`, in offset order per partition; read by a consumer group of
    /// its own until it has as many as the partitions' high watermarks add up to.
    func records(_ topic: String) async throws -> [KafkaRecord] {
        let expected = try await count(topic)
        guard expected > 0 else { return [] }
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                client: KafkaClientConfiguration(bootstrapServers: pipeline.cluster.bootstrapServers), groupID: "read-\(UUID().uuidString.prefix(8))"),
            logger: logger)
        try consumer.subscribe(topics: [topic])
        var received: [KafkaRecord] = []
        let deadline = ContinuousClock.now + .seconds(30)
        for await event in consumer.events {
            if case .records(let records) = event { received += records }
            if received.count >= expected || ContinuousClock.now > deadline { break }
        }
        await consumer.close()
        guard received.count >= expected else { throw TestFailure("read \(received.count) of \(expected) records of \(topic)") }
        return received.sorted { ($0.partition, $0.offset) < ($1.partition, $1.offset) }
    }

    /// How many records `topic` holds (the sum of its partitions' high watermarks).
    func count(_ topic: String) async throws -> Int {
        let partitions = topic == topics.tasks ? 4 : 1
        let marks = try await watcher.watermarks((0..<partitions).map { TopicPartition(topic: topic, partition: Int32($0)) })
        return Int(marks.values.map(\.high).reduce(0, +))
    }

    func stop() async {
        await watcher.close()
        await pipeline.stop()
    }
}
