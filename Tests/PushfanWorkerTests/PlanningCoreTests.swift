import Foundation
import PushfanCore
import PushfanStore
import PushfanTestSupport
import Testing

@testable import PushfanWorker

/// The planner's decisions, in the test's own process (`PlanningCoreHarness`): what a
/// campaign record becomes (tasks, a campaign row, a parked schedule) and what it is refused
/// for. The process suites (EndToEndTests) check the same paths through real workers.
@Suite(.timeLimit(.minutes(2)))
struct PlanningCoreTests {
    static func record(_ id: String, audience: String = #"{"segment":"locale in (en_US)"}"#, body: String = "Hi", options: String = "{}") -> String {
        #"{"v":1,"id":"\#(id)","app":"shop","audience":\#(audience),"notification":{"content":{"default":{"body":"\#(body)"}}},"options":\#(options)}"#
    }

    @Test("a segment campaign: contiguous shards cover the app's row keys, the audience is the segment's count, the row runs")
    func segmentCampaignIsSharded() async throws {
        let harness = try await PlanningCoreHarness(devices: 200)
        let outcome = try await harness.submit(Self.record("c1"))
        guard case .planned(campaign: "c1", audience: 150, tasks: let count) = outcome else {
            Issue.record("planned as \(outcome)")
            return await harness.stop()
        }
        let tasks = try await harness.tasks()
        #expect(tasks.count == count && count > 1)
        #expect(tasks.map(\.shard) == Array(0..<count))
        #expect(tasks.allSatisfy { $0.shards == count && $0.campaign == "c1" && $0.app == "shop" })
        // Open at both ends, each range starting where the one before ended: every row key
        // of the app (including one registered meanwhile) is in exactly one shard.
        #expect(tasks.first?.after == nil && tasks.last?.through == nil)
        #expect(zip(tasks, tasks.dropFirst()).allSatisfy { $0.through != nil && $0.through == $1.after })
        let row = try #require(try await harness.store.campaigns.get(CampaignKey(app: "shop", id: "c1")))
        #expect(row.status == .running && row.audience == 150 && row.shards == count)
        await harness.stop()
    }

    @Test("the same record again is a duplicate with no new task; another campaign under that id is refused")
    func resendsAndConflicts() async throws {
        let harness = try await PlanningCoreHarness(devices: 40)
        guard case .planned = try await harness.submit(Self.record("c1")) else { Issue.record("not planned"); return await harness.stop() }
        let tasks = try await harness.count(harness.topics.tasks)
        #expect(try await harness.submit(Self.record("c1")) == .duplicate(campaign: "c1"))
        #expect(try await harness.submit(Self.record("c1", body: "Something else")) == .deadLettered(code: "conflicting_campaign"))
        #expect(try await harness.count(harness.topics.tasks) == tasks, "a resend or a conflict produced tasks")
        #expect(try await harness.count(harness.topics.deadletter) == 1)
        await harness.stop()
    }

    @Test("a saved segment the app does not have: dead-lettered unknown_segment, no row, no task")
    func unknownSavedSegmentIsRefused() async throws {
        let harness = try await PlanningCoreHarness(devices: 10)
        #expect(try await harness.submit(Self.record("c1", audience: #"{"named":"ghosts"}"#)) == .deadLettered(code: "unknown_segment"))
        #expect(try await harness.store.campaigns.get(CampaignKey(app: "shop", id: "c1")) == nil)
        #expect(try await harness.count(harness.topics.tasks) == 0)
        let letter = try #require(try await harness.records(harness.topics.deadletter).first)
        #expect(String(decoding: letter.value, as: UTF8.self).contains("has no saved segment"))
        await harness.stop()
    }

    @Test("send_at an hour ahead: counted and parked as scheduled, no task yet")
    func farSendAtIsParked() async throws {
        let harness = try await PlanningCoreHarness(devices: 30)
        let sendAt = harness.clock.wallMillis + 3_600_000
        let outcome = try await harness.submit(Self.record("c1", options: #"{"send_at":\#(sendAt)}"#))
        #expect(outcome == .scheduled(campaign: "c1", sendAt: sendAt))
        let row = try #require(try await harness.store.campaigns.get(CampaignKey(app: "shop", id: "c1")))
        #expect(row.status == .scheduled && row.audience == 22)
        #expect(try await harness.count(harness.topics.tasks) == 0)
        await harness.stop()
    }
}
