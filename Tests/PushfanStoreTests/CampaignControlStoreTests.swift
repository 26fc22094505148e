import Foundation
import PushfanMessages
import PushfanSupport
import Testing

@testable import PushfanStore

/// A campaign of app shop-ios, as the store names it.
private func shop(_ id: String) -> CampaignKey { CampaignKey(app: "shop-ios", id: id) }

/// Operators' commands on the campaign row, on both backends: the row moves once, a repeat
/// changes nothing, an unknown campaign is told apart, and senders read many statuses at once.
@Suite struct CampaignControlStoreTests {
    @Test("an app's campaigns page newest first, by id within a moment, of one status if asked, however many the app has: the page after a campaign starts right after it", arguments: Backend.enabled)
    func campaignsPageInTheStore(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let made: [(String, Int64, CampaignStatus)] = [("c1", 1_000, .completed), ("c2", 2_000, .running), ("c3", 2_000, .completed), ("c4", 3_000, .completed), ("c5", 4_000, .running)]
        for (id, at, status) in made { #expect(try await store.campaigns.record(shop(id), audience: 1, shards: 1, status: status, now: at)) }
        #expect(try await store.campaigns.record(CampaignKey(app: "other", id: "c9"), audience: 1, shards: 1, now: 5_000))
        var seen: [String] = []
        var after: String?
        repeat {
            let page = try await store.campaigns.page(app: "shop-ios", status: nil, after: after, limit: 2)
            seen += page.map(\.id)
            after = page.count == 2 ? page.last?.id : nil
        } while after != nil
        #expect(seen == ["c5", "c4", "c2", "c3", "c1"])
        #expect(try await store.campaigns.page(app: "shop-ios", status: .completed, after: "c4", limit: 10).map(\.id) == ["c3", "c1"])
        #expect(try await store.campaigns.page(app: "shop-ios", status: .completed, after: "c5", limit: 1).map(\.id) == ["c4"], "after one of another status")
        #expect(try await store.campaigns.page(app: "shop-ios", status: nil, after: "gone", limit: 10).isEmpty)
    }

    @Test("a winner's decision is written only over the record as it was read: the first decision stands, a late one gets it back", arguments: Backend.enabled)
    func firstDecisionStands(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let accepted = #"{"v":1,"id":"ab","app":"shop-ios","decision":null}"#
        #expect(try await store.campaigns.record(shop("ab"), audience: 10, shards: 1, definition: CampaignDefinition(record: accepted), now: store.clock.wallMillis))
        let first = #"{"v":1,"id":"ab","app":"shop-ios","decision":"a"}"#
        let late = #"{"v":1,"id":"ab","app":"shop-ios","decision":"b"}"#
        #expect(try await store.campaigns.decide(shop("ab"), record: first, replacing: accepted, now: store.clock.wallMillis) == first)
        #expect(try await store.campaigns.decide(shop("ab"), record: late, replacing: accepted, now: store.clock.wallMillis) == first)
        #expect(try await store.campaigns.stored(shop("ab"))?.record == first)
    }

    @Test(arguments: Backend.enabled)
    func commandsMoveTheRowOnce(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "p1"), audience: 10, shards: 1, status: .planning, now: store.clock.wallMillis))
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "r1"), audience: 10, shards: 1, status: .running, now: store.clock.wallMillis))

        // Cancel while planning, then again.
        #expect(try await store.campaigns.control(shop("p1"), .cancel, now: store.clock.wallMillis) == .move(from: .planning, to: .cancelled))
        #expect(try await store.campaigns.control(shop("p1"), .cancel, now: store.clock.wallMillis) == .already(.cancelled))
        #expect(try await store.campaigns.control(shop("p1"), .resume, now: store.clock.wallMillis) == .refused(reason: "campaign p1 was cancelled; it cannot be resumed"))
        #expect(try await store.campaigns.get(shop("p1"))?.status == .cancelled)
        // The planner's own step no longer applies to it.
        #expect(try await !store.campaigns.transition(shop("p1"), from: .planning, to: .running, now: store.clock.wallMillis))

        // Pause and resume a running one.
        #expect(try await store.campaigns.control(shop("r1"), .pause, now: store.clock.wallMillis) == .move(from: .running, to: .paused))
        #expect(try await store.campaigns.statuses([shop("r1"), shop("p1"), shop("unknown"), CampaignKey(app: "other", id: "r1")]) == [shop("r1"): .paused, shop("p1"): .cancelled])
        #expect(try await store.campaigns.control(shop("r1"), .resume, now: store.clock.wallMillis) == .move(from: .paused, to: .running))
        #expect(try await store.campaigns.control(shop("r1"), .resume, now: store.clock.wallMillis) == .already(.running))

        #expect(try await store.campaigns.control(shop("nope"), .cancel, now: store.clock.wallMillis) == nil)
        #expect(try await store.campaigns.list(limit: 10).map(\.id).sorted() == ["p1", "r1"])
    }

    @Test(arguments: Backend.enabled)
    func racingCommandsLeaveOneWinner(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "c1"), audience: 10, shards: 1, status: .running, now: store.clock.wallMillis))
        // Eight workers apply the same cancel record at once: one moves it, the others see it done.
        let decisions = try await withThrowingTaskGroup(of: ControlDecision?.self) { group in
            for _ in 0..<8 { group.addTask { try await store.campaigns.control(shop("c1"), .cancel, now: store.clock.wallMillis) } }
            return try await group.reduce(into: [ControlDecision?]()) { $0.append($1) }
        }
        #expect(decisions.filter { $0 == .move(from: .running, to: .cancelled) }.count == 1)
        #expect(decisions.filter { $0 == .already(.cancelled) }.count == 7)
    }

    @Test(arguments: Backend.enabled)
    func parkedCampaignsAreDispatchedOnceWhenDue(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let now: Int64 = 1_800_000_000_000
        #expect(try await store.campaigns.record(CampaignKey(app: "a", id: "soon"), audience: 5, shards: 0, status: .scheduled, sendAt: now + 5_000, now: now))
        #expect(try await store.campaigns.record(CampaignKey(app: "a", id: "later"), audience: 5, shards: 0, status: .scheduled, sendAt: now + 3_600_000, now: now))
        #expect(try await store.campaigns.record(CampaignKey(app: "a", id: "now"), audience: 5, shards: 1, status: .planning, sendAt: now - 1_000, now: now))
        #expect(try await store.campaigns.get(CampaignKey(app: "a", id: "soon"))?.parked == true)
        #expect(try await store.campaigns.get(CampaignKey(app: "a", id: "now"))?.parked == false)

        // Due within the lead: only "soon"; a cancelled parked one is due at once.
        #expect(try await store.campaigns.dispatchable(now: now, lead: .seconds(10), staleAfter: .seconds(60)).map(\.id) == ["soon"])
        #expect(try await store.campaigns.control(CampaignKey(app: "a", id: "later"), .cancel, now: store.clock.wallMillis) == .move(from: .scheduled, to: .cancelled))
        #expect(try await store.campaigns.dispatchable(now: now, lead: .seconds(10), staleAfter: .seconds(60)).map(\.id) == ["soon", "later"])

        // One claim wins; afterwards it is no longer listed.
        #expect(try await store.campaigns.claimDispatch(CampaignKey(app: "a", id: "soon"), staleAfter: .seconds(60), now: now))
        #expect(try await !store.campaigns.claimDispatch(CampaignKey(app: "a", id: "soon"), staleAfter: .seconds(60), now: now))
        #expect(try await store.campaigns.get(CampaignKey(app: "a", id: "soon"))?.status == .planning, "claimed and moved on in one update")
        #expect(try await store.campaigns.dispatchable(now: now + 1_000, lead: .seconds(10), staleAfter: .seconds(60)).map(\.id) == ["later"])
        // Its dispatcher died mid-way: a minute later it is taken again.
        #expect(try await store.campaigns.dispatchable(now: now + 61_000, lead: .seconds(10), staleAfter: .seconds(60)).map(\.id).contains("soon"))
        #expect(try await store.campaigns.claimDispatch(CampaignKey(app: "a", id: "soon"), staleAfter: .seconds(60), now: now + 61_000))

        // A parked campaign paused and resumed goes back to waiting for its time.
        #expect(try await store.campaigns.record(CampaignKey(app: "a", id: "held"), audience: 5, shards: 0, status: .scheduled, sendAt: now + 3_600_000, now: now))
        #expect(try await store.campaigns.control(CampaignKey(app: "a", id: "held"), .pause, now: store.clock.wallMillis) == .move(from: .scheduled, to: .paused))
        #expect(try await store.campaigns.control(CampaignKey(app: "a", id: "held"), .resume, now: store.clock.wallMillis) == .move(from: .paused, to: .scheduled))
    }
}
