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

    /// What a dispatcher does with c1's dispatch left stale: lists it, claims it and
    /// dispatches it. Returns the row after.
    static func takeOverStaleDispatch(_ harness: PlanningCoreHarness) async throws -> CampaignRegistry.Row {
        let store = harness.store
        let stale = try await store.campaigns.dispatchable(now: harness.clock.wallMillis, lead: CampaignDispatcher.lead, staleAfter: CampaignDispatcher.staleAfter)
        let row = try #require(stale.first { $0.id == key.id })
        #expect(try await store.campaigns.claimDispatch(key, staleAfter: CampaignDispatcher.staleAfter, now: harness.clock.wallMillis))
        try await harness.planner.dispatch(row)
        return try #require(try await store.campaigns.get(key))
    }

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

    @Test("a parked campaign's dispatch taken over after its worker died: the shards the first try cut, and a quiet-hours hold its tasks parked, stay the count")
    func takenOverDispatchKeepsItsShards() async throws {
        try await Self.with(devices: 200) { harness in
            let store = harness.store
            let sendAt = harness.clock.wallMillis + 3_600_000
            _ = try await harness.submit(Self.record("c1", options: #"{"send_at":\#(sendAt)}"#))
            // The first try claims the dispatch (the row moves to planning), cuts two shards and dies;
            // one of its tasks has held a device for its quiet hours, as shard 2.
            harness.clock.advance(minutes: 60)
            #expect(try await store.campaigns.claimDispatch(Self.key, staleAfter: CampaignDispatcher.staleAfter, now: harness.clock.wallMillis))
            #expect(try await store.campaigns.dispatchShards(Self.key, cut: 2, now: harness.clock.wallMillis) == 2)
            #expect(try await store.waves.hold(campaign: Self.key, key: "quiet-1", sendAt: sendAt + 3_600_000, lane: 0, rowKeys: [7]) == 2)

            harness.clock.advance(minutes: 2)
            let after = try await Self.takeOverStaleDispatch(harness)
            #expect(after.shards == 3 && after.status == .running, "\(after.shards) \(after.status)")
            let tasks = try await harness.tasks()
            #expect(tasks.map(\.shard) == [0, 1], "as many shards as the first try cut, not the 3 or more 150 devices would get now")
            #expect(tasks.first?.after == nil && tasks.last?.through == nil && tasks.first?.through == tasks.last?.after)
        }
    }

    @Test("a local-time campaign listed as a stale dispatch while its first wave is produced: moved on to running, its shards as planned, no task of its own")
    func localTimeIsNotDispatchedAsParked() async throws {
        try await Self.with(devices: 30) { harness in
            let store = harness.store
            let format = DateFormatter()
            (format.dateFormat, format.timeZone, format.locale) = ("yyyy-MM-dd'T'HH:mm", TimeZone(identifier: "UTC"), Locale(identifier: "en_US_POSIX"))
            let tomorrow = format.string(from: Date(timeIntervalSince1970: Double(harness.clock.wallMillis) / 1_000 + 86_400))
            guard case .scheduled = try await harness.submit(Self.record("c1", options: #"{"local_time":"\#(tomorrow)","ignore_quiet_hours":true}"#)) else {
                Issue.record("not scheduled")
                return
            }
            let planned = try #require(try await store.campaigns.get(Self.key))
            // Its first wave's dispatch has moved the row to planning and is producing its
            // tasks; the row was recorded (its dispatch time) long before.
            #expect(try await store.campaigns.transition(Self.key, from: .scheduled, to: .planning, now: harness.clock.wallMillis))
            harness.clock.advance(minutes: 2)
            let after = try await Self.takeOverStaleDispatch(harness)
            #expect(after.shards == planned.shards && after.status == .running)
            #expect(try await harness.values(harness.topics.tasks).isEmpty, "no task sent at the first wave's time whatever the device's zone")
        }
    }

    @Test("a campaign planned again after its planner died: as many shards as the first try recorded, or, over its placeholder, the count found now")
    func replanKeepsTheRecordedShards() async throws {
        try await Self.with(devices: 200) { harness in
            let store = harness.store
            // The first try recorded 3 shards, produced some tasks and died.
            #expect(try await store.campaigns.record(Self.key, audience: 0, shards: 3, status: .planning, now: harness.clock.wallMillis))
            guard case .planned(campaign: "c1", audience: 150, tasks: 3) = try await harness.submit(Self.record("c1")) else {
                Issue.record("not planned in 3 shards")
                return
            }
            let tasks = try await harness.tasks()
            #expect(tasks.map(\.shard) == [0, 1, 2] && tasks.allSatisfy { $0.shards == 3 })
            #expect(tasks.first?.after == nil && tasks.last?.through == nil && zip(tasks, tasks.dropFirst()).allSatisfy { $0.through == $1.after })
            #expect(try #require(try await store.campaigns.get(Self.key)).shards == 3)

            // The first try of c2 died walking a large app (the placeholder count); this one
            // counts the app small, and settles the count all the same.
            let c2 = CampaignKey(app: "shop", id: "c2")
            #expect(try await store.campaigns.record(c2, audience: 0, shards: CampaignRegistry.shardsNotYetKnown, status: .planning, now: harness.clock.wallMillis))
            guard case .planned(campaign: "c2", audience: 150, tasks: let count) = try await harness.submit(Self.record("c2")) else {
                Issue.record("c2 not planned")
                return
            }
            #expect(try #require(try await store.campaigns.get(c2)).shards == count)
        }
    }
}
