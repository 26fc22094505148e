import Foundation
import PushfanMessages
import PushfanStore
import PushfanTestSupport
import Testing

@testable import PushfanWorker

/// The planner's decisions, in the test's own process (`PlanningCoreHarness`): what a
/// campaign record becomes (tasks, a campaign row, a parked schedule) and what it is refused
/// for, and how a parked campaign is dispatched. The process suites (EndToEndTests) check the
/// same paths through real workers.
@Suite(.timeLimit(.minutes(2)))
struct PlanningCoreTests {
    static func record(_ id: String, audience: String = #"{"segment":"locale in (en_US)"}"#, body: String = "Hi", options: String = "{}") -> String {
        #"{"v":1,"id":"\#(id)","app":"shop","audience":\#(audience),"notification":{"content":{"default":{"body":"\#(body)"}}},"options":\#(options)}"#
    }

    /// Runs `body` on a new harness and stops it whatever happens.
    static func with(devices: Int, _ body: (PlanningCoreHarness) async throws -> Void) async throws {
        let harness = try await PlanningCoreHarness(devices: devices)
        do { try await body(harness) } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    static let key = CampaignKey(app: "shop", id: "c1")

    @Test("a segment campaign: contiguous shards cover the app's row keys, the audience is the segment's count, the row runs")
    func segmentCampaignIsSharded() async throws {
        try await Self.with(devices: 200) { harness in
            let outcome = try await harness.submit(Self.record("c1"))
            guard case .planned(campaign: "c1", audience: 150, tasks: let count) = outcome else {
                Issue.record("planned as \(outcome)")
                return
            }
            let tasks = try await harness.tasks()
            #expect(tasks.count == count && count > 1)
            #expect(tasks.map(\.shard) == Array(0..<count))
            #expect(tasks.allSatisfy { $0.shards == count && $0.campaign == "c1" && $0.app == "shop" })
            // Open at both ends, each range starting where the one before ended: every row key
            // of the app (including one registered meanwhile) is in exactly one shard.
            #expect(tasks.first?.after == nil && tasks.last?.through == nil)
            #expect(zip(tasks, tasks.dropFirst()).allSatisfy { $0.through != nil && $0.through == $1.after })
            let row = try #require(try await harness.store.campaigns.get(Self.key))
            #expect(row.status == .running && row.audience == 150 && row.shards == count)
        }
    }

    @Test("the same record again is a duplicate with no new task; another campaign under that id is refused")
    func resendsAndConflicts() async throws {
        try await Self.with(devices: 40) { harness in
            guard case .planned = try await harness.submit(Self.record("c1")) else {
                Issue.record("not planned")
                return
            }
            let tasks = try await harness.values(harness.topics.tasks).count
            #expect(try await harness.submit(Self.record("c1")) == .duplicate(campaign: "c1"))
            #expect(try await harness.submit(Self.record("c1", body: "Something else")) == .deadLettered(code: "conflicting_campaign"))
            #expect(try await harness.values(harness.topics.tasks).count == tasks, "a resend or a conflict produced tasks")
            #expect(try await harness.values(harness.topics.deadletter).count == 1)
        }
    }

    @Test("a saved segment the app does not have: dead-lettered unknown_segment with the field and the name, no row, no task")
    func unknownSavedSegmentIsRefused() async throws {
        try await Self.with(devices: 10) { harness in
            #expect(try await harness.submit(Self.record("c1", audience: #"{"named":"ghosts"}"#)) == .deadLettered(code: "unknown_segment"))
            #expect(try await harness.store.campaigns.get(Self.key) == nil)
            #expect(try await harness.values(harness.topics.tasks).count == 0)
            let letter = try #require(try await harness.values(harness.topics.deadletter).first)
            let reason = try MessageCodec.decode(DeadLetterRecord.self, from: Data(letter.utf8)).reason
            #expect(reason == #"audience.named: app shop has no saved segment "ghosts""#)
        }
    }

    @Test("send_at an hour ahead: counted and parked as scheduled, no task yet")
    func farSendAtIsParked() async throws {
        try await Self.with(devices: 30) { harness in
            let sendAt = harness.clock.wallMillis + 3_600_000
            #expect(try await harness.submit(Self.record("c1", options: #"{"send_at":\#(sendAt)}"#)) == .scheduled(campaign: "c1", sendAt: sendAt))
            let row = try #require(try await harness.store.campaigns.get(Self.key))
            #expect(row.status == .scheduled && row.audience == 22)
            #expect(try await harness.values(harness.topics.tasks).count == 0)
        }
    }

    @Test("a parked campaign dispatched after its saved segment was edited: counted and sharded with the expression it was accepted with")
    func dispatchReadsTheSegmentAsAccepted() async throws {
        try await Self.with(devices: 30) { harness in
            try await harness.store.audience.saveSegment(app: "shop", name: "english", expression: "locale in (en_US)")
            let sendAt = harness.clock.wallMillis + 3_600_000
            let parked = try await harness.submit(Self.record("c1", audience: #"{"named":"english"}"#, options: #"{"send_at":\#(sendAt)}"#))
            #expect(parked == .scheduled(campaign: "c1", sendAt: sendAt))
            try await harness.store.audience.saveSegment(app: "shop", name: "english", expression: "locale in (xx_XX)")
            try await harness.planner.dispatch(try #require(try await harness.store.campaigns.get(Self.key)))
            let row = try #require(try await harness.store.campaigns.get(Self.key))
            #expect(row.audience == 22, "counted with the edited segment, not the one it was accepted with")
            #expect(row.shards > 0 && row.status != .scheduled)
            #expect(try await harness.tasks().count == row.shards)
        }
    }

    @Test("a parked campaign read paused, then resumed before its dispatch: the dispatch moves it on from scheduled, so its tasks send")
    func dispatchOfAResumedParkedCampaign() async throws {
        try await Self.with(devices: 30) { harness in
            let sendAt = harness.clock.wallMillis + 3_600_000
            _ = try await harness.submit(Self.record("c1", options: #"{"send_at":\#(sendAt)}"#))
            _ = try await harness.store.campaigns.control(Self.key, .pause, now: harness.clock.wallMillis)
            let stale = try #require(try await harness.store.campaigns.get(Self.key))
            #expect(stale.status == .paused)
            #expect(try await harness.store.campaigns.control(Self.key, .resume, now: harness.clock.wallMillis) == .move(from: .paused, to: .scheduled))
            try await harness.planner.dispatch(stale)
            let row = try #require(try await harness.store.campaigns.get(Self.key))
            #expect(row.status == .running, "\(row.status)")
            #expect(try await harness.tasks().count == row.shards)
        }
    }
}
