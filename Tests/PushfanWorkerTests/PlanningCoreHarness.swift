import Foundation
import PushfanCore
import PushfanKafka
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics

@testable import PushfanWorker

/// The planner in the test's own process: a SQLite store in a temporary directory with one
/// app and its devices, an in-process Kafka mock cluster its tasks are produced to, and a
/// clock that stands still. Campaigns are put in the store as the planner leaves them; the
/// harness runs its later steps (dispatches) and the test reads the store.
final class PlanningCoreHarness: Sendable {
    let clock = ManualClock()
    let store: DeviceStore
    let planner: CampaignPlanner
    let topics = TopicNames()
    private let pipeline: InProcessPipeline
    private let logger = Logger(label: "test", threshold: .error)
    static let app = InProcessPipeline.app

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

    /// Stores `json` as a campaign the planner parked until `sendAt` (its definition made by
    /// `DeviceStore.definition(of:)`, as the planner makes it), and returns its row.
    func parked(_ json: String, audience: Int, sendAt: Int64) async throws -> CampaignRegistry.Row {
        let campaign = try Campaign.decodeRecord(Array(json.utf8))
        _ = try await store.campaigns.record(
            campaign.key, audience: audience, shards: 0, definition: try await store.definition(of: campaign), status: .scheduled,
            sendAt: sendAt, now: clock.wallMillis)
        guard let row = try await store.campaigns.get(campaign.key) else { throw TestFailure("campaign \(campaign.id) was not stored") }
        return row
    }

    func stop() async {
        await pipeline.stop()
    }
}
