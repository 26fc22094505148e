import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics

@testable import PushfanWorker

/// The planner in the test's own process: a SQLite store in a temporary directory with one
/// app and its devices, an in-process Kafka mock cluster its tasks are produced to, and a
/// clock that stands still. A campaign record is handed to the planner as a `KafkaRecord`
/// built from its bytes, as the planner role receives it; what the planner produced is read
/// back by kcat, in a process of its own. (No consumer runs in the test process: a full run
/// once aborted inside librdkafka 2.0.2 just after suites that made and closed in-process
/// consumers, `rd_kafka_broker_destroy_final` asserting it ran on the wrong thread.)
final class PlanningCoreHarness: Sendable {
    let clock = ManualClock()
    let store: DeviceStore
    let planner: CampaignPlanner
    let topics = TopicNames()
    private let pipeline: InProcessPipeline
    private let logger = Logger(label: "test", threshold: .error)
    /// The next offset of the campaigns topic's one partition, as a consumer would number it.
    private let nextOffset = Locked<Int64>(0)

    /// `devices` devices `d-0`…, in locale en_US, or de_DE for every `germanEvery`-th one.
    init(devices: Int, germanEvery: Int = 4, shardSize: Int = 50) async throws {
        let pipeline = try await InProcessPipeline.start(
            devices: devices, locale: { $0 % germanEvery == 0 ? "de_DE" : "en_US" },
            topics: [(topics.tasks, 4), (topics.results, 1), (topics.deadletter, 1)], clock: clock, logger: logger)
        (self.pipeline, store) = (pipeline, pipeline.store)
        var settings = PushfanConfiguration.Worker()
        settings.shardSize = shardSize
        planner = CampaignPlanner(store: store, writer: ResultsWriter(producer: pipeline.producer, topics: topics), settings: settings, clock: clock, logger: logger)
    }

    /// The record as a producer would send it, handed to the planner: what became of it.
    func submit(_ json: String) async throws -> CampaignPlanner.Outcome {
        let offset = nextOffset.withLock { next in
            defer { next += 1 }
            return next
        }
        let record = KafkaRecord(topic: topics.campaigns, partition: 0, offset: offset, key: Array("k".utf8), value: Array(json.utf8))
        return try await planner.handle(record)
    }

    /// Every task on the tasks topic, by shard.
    func tasks() async throws -> [TaskRecord] {
        try await values(topics.tasks).map { try MessageCodec.decode(TaskRecord.self, from: Data($0.utf8)) }.sorted { $0.shard < $1.shard }
    }

    /// The values of every record of `topic` (one line of JSON each), read by kcat from the
    /// beginning to the end of each partition.
    func values(_ topic: String) async throws -> [String] {
        let read = try await CommandLineTool.run(
            "kcat", ["-C", "-b", pipeline.cluster.bootstrapServers, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\\n"])
        guard read.status == 0 else { throw TestFailure("kcat could not read \(topic): \(read.error)") }
        return read.output.split(separator: "\n").map(String.init)
    }

    func stop() async {
        await pipeline.stop()
    }
}
