import Foundation
import PushfanMessages
import PushfanSupport
import Testing

@testable import PushfanStore

/// The dashboard's saved tallies on both backends: a partition's tallies and offset are saved
/// together, merged across partitions, read back by campaign, and cleared for a recount.
@Suite struct DashboardTalliesTests {
    static func tally(_ delivered: Int, at: Int64, app: String? = "shop") -> CampaignTally {
        var tally = CampaignTally()
        tally.app = app
        tally.outcomes = ["delivered": delivered]
        tally.perSecond = [at / 1000: delivered]
        tally.firstAt = at
        tally.lastAt = at
        return tally
    }

    @Test(arguments: Backend.enabled)
    func partitionsSaveWithTheirOffsetsAndMerge(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let dashboard = store.dashboard
        #expect(try dashboard.nextOffsets([("pushfan.results", 0)]).isEmpty)

        var zero = DashboardTallies.PartitionProgress(topic: "pushfan.results", partition: 0, nextOffset: 10)
        zero.tallies = ["c1": Self.tally(3, at: 5_000), "c2": Self.tally(1, at: 9_000, app: "news")]
        var one = DashboardTallies.PartitionProgress(topic: "pushfan.results", partition: 1, nextOffset: 4)
        one.tallies = ["c1": Self.tally(2, at: 6_000, app: nil)]
        try await dashboard.save([zero, one], now: 100)

        #expect(try dashboard.nextOffsets([("pushfan.results", 0), ("pushfan.results", 1), ("pushfan.results", 2)]) == ["pushfan.results": [0: 10, 1: 4]])
        #expect(try await dashboard.tallies(topic: "pushfan.results", partition: 1, campaigns: ["c1", "c2"]) == ["c1": Self.tally(2, at: 6_000, app: nil)])
        let recent = try await dashboard.recentCampaigns(limit: 10)
        #expect(recent.map(\.campaign) == ["c2", "c1"] && recent.allSatisfy { $0.savedAt == 100 })
        let merged = try await dashboard.merged(["c1", "c2"])
        #expect(merged["c1"]?.outcomes == ["delivered": 5] && merged["c1"]?.app == "shop")
        #expect(merged["c1"]?.perSecond == [5: 3, 6: 2])
        #expect(merged["c2"]?.app == "news")

        // A later save of one partition replaces its tally and offset only.
        one.nextOffset = 9
        one.tallies = ["c1": Self.tally(4, at: 7_000, app: nil)]
        try dashboard.saveBlocking([one], now: 200)
        #expect(try dashboard.nextOffsets([("pushfan.results", 0), ("pushfan.results", 1)]) == ["pushfan.results": [0: 10, 1: 9]])
        #expect(try await dashboard.merged(["c1"])["c1"]?.outcomes == ["delivered": 7])
        #expect(try await dashboard.recentCampaigns(limit: 10).map { "\($0.campaign)@\($0.savedAt)" } == ["c2@100", "c1@200"], "saved now, still ordered by activity")

        try await dashboard.clear()
        #expect(try dashboard.nextOffsets([("pushfan.results", 0)]).isEmpty)
        #expect(try await dashboard.recentCampaigns(limit: 10).isEmpty)
    }

    @Test(arguments: Backend.enabled)
    func onlyTheLatestDeadLettersAreKept(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        var progress = DashboardTallies.PartitionProgress(topic: "pushfan.deadletter", partition: 0, nextOffset: 0)
        for offset in 0..<(DashboardTallies.deadLettersKept + 20) {
            progress.deadLetters.append(DashboardSnapshot.DeadLetter(DeadLetterRecord(
                topic: "pushfan.campaigns", partition: 0, offset: Int64(offset), key: "k\(offset)", error: "not_json", reason: "not JSON",
                original: "", at: 1_000 + Int64(offset))))
        }
        progress.nextOffset = Int64(progress.deadLetters.count)
        try await store.dashboard.save([progress], now: store.clock.wallMillis)
        let letters = try await store.dashboard.deadLetters(limit: 1_000)
        #expect(letters.count == DashboardTallies.deadLettersKept)
        #expect(letters.first?.offset == Int64(DashboardTallies.deadLettersKept + 19), "newest first")
        #expect(try await store.dashboard.deadLetters(limit: 3).map(\.key) == ["k119", "k118", "k117"])
    }
}
