import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanStore

/// The dashboard's counting and what it shows, as pure functions of the records.
@Suite struct DashboardSnapshotTests {
    static func device(_ campaign: String, _ index: Int, _ outcome: DeviceOutcome, reason: String? = nil, at: Int64) -> ResultRecord {
        .device(DeviceResult(campaign: CampaignKey(app: "shop", id: campaign), device: "d\(index)", outcome: outcome, reason: reason, attempts: 1, at: at))
    }

    static func event(_ campaign: String, _ event: CampaignEvent.Event, audience: Int? = nil, counts: [String: Int] = [:], at: Int64, submission: Bool = false) -> ResultRecord {
        .campaign(CampaignEvent(
            campaign: campaign, app: "shop", event: event, audience: audience, counts: counts,
            submission: submission ? CampaignEvent.Submission(partition: 0, offset: 1) : nil, at: at))
    }

    @Test func tallyCountsOutcomesReasonsAndSecondsAndMergesPartitions() throws {
        var first = CampaignTally()
        first.apply(Self.event("c1", .accepted, audience: 4, at: 1_000))
        first.apply(Self.device("c1", 1, .delivered, at: 1_500))
        first.apply(Self.device("c1", 2, .invalidToken, reason: "BadDeviceToken", at: 2_100))
        var second = CampaignTally()
        second.apply(Self.device("c1", 3, .delivered, at: 2_900))
        second.apply(Self.device("c1", 4, .invalidToken, reason: "BadDeviceToken", at: 3_000))
        // A device result names its app too (ids are named within their app).
        #expect(second.app == "shop" && second.event == nil)

        var merged = first
        merged.merge(second)
        #expect(merged.app == "shop")
        #expect(merged.outcomes == ["delivered": 2, "invalid_token": 2])
        #expect(merged.reasons == ["invalid_token/BadDeviceToken": 2])
        #expect(merged.perSecond == [1: 1, 2: 2, 3: 1])
        #expect(merged.results == 4 && merged.firstAt == 1_000 && merged.lastAt == 3_000)
        #expect(merged.event?.event == .accepted && merged.event?.audience == 4)

        // What the store keeps reads back the same.
        let decoded = try JSONDecoder().decode(CampaignTally.self, from: JSONEncoder().encode(merged))
        #expect(decoded == merged)
    }

    @Test func secondsBeyondTheKeptWindowAreDropped() {
        var tally = CampaignTally()
        let seconds = CampaignTally.secondsKept + 100
        for second in 0..<seconds { tally.apply(Self.device("c1", second, .delivered, at: Int64(second) * 1000)) }
        #expect(tally.perSecond.count <= CampaignTally.secondsKept + 60)
        #expect(tally.perSecond[Int64(seconds - 1)] == 1)
        #expect(tally.perSecond[0] == nil)
        #expect(tally.results == seconds)
    }

    @Test func latestEventWinsAndARefusedResubmissionDoesNotFailTheCampaign() {
        var tally = CampaignTally()
        tally.apply(Self.event("c1", .accepted, audience: 3, at: 1_000))
        tally.apply(Self.event("c1", .failed, at: 2_000, submission: true))
        #expect(tally.event?.event == .accepted)
        tally.apply(Self.event("c1", .progress, audience: 3, counts: ["delivered": 1], at: 3_000))
        tally.apply(Self.event("c1", .paused, at: 2_500))
        #expect(tally.event?.event == .progress, "an older event read later does not win")
        var failing = CampaignTally()
        failing.apply(Self.event("c2", .failed, at: 1_000, submission: true))
        #expect(failing.event?.event == .failed, "a campaign that never ran shows its failure")
    }

    @Test func snapshotShowsStatusProgressRatesAndOnlyTheChosenSeries() throws {
        var running = CampaignTally()
        running.apply(Self.event("run", .progress, audience: 100, counts: ["delivered": 10], at: 9_000))
        for index in 0..<30 { running.apply(Self.device("run", index, .delivered, at: 5_000 + Int64(index % 5) * 1000)) }
        running.apply(Self.device("run", 99, .rejected, reason: "BadTopic", at: 9_500))
        var done = CampaignTally()
        done.apply(Self.device("done", 1, .delivered, at: 1_000))
        done.apply(Self.device("done", 1, .delivered, at: 1_000))  // the same result twice
        done.apply(Self.event("done", .completed, audience: 1, counts: ["delivered": 1], at: 2_000))

        let letter = DashboardSnapshot.DeadLetter(DeadLetterRecord(
            topic: "pushfan.campaigns", partition: 0, offset: 7, key: "k", error: "not_json", reason: "not JSON", original: "", at: 5))
        let snapshot = DashboardSnapshot.build(
            tallies: ["run": running, "done": done], limits: ["shop": 50], deadLetters: [letter], selected: nil, now: 12_200)
        #expect(snapshot.campaigns.map(\.id) == ["run", "done"], "most recently active first")
        let run = snapshot.campaigns[0]
        #expect(run.status == "running" && run.audience == 100 && run.done == 31)
        // At 12.2 s, seconds 5..9 are settled (two seconds are left for late results): 31 over 5 s.
        #expect(run.rate == 6)
        #expect(run.reasons == [DashboardSnapshot.Reason(outcome: "rejected", reason: "BadTopic", count: 1)])
        let finished = snapshot.campaigns[1]
        #expect(finished.status == "completed" && finished.done == 1, "a finished campaign shows the ledger's count, not the records read")
        #expect(run.variants == nil && finished.variants == nil)
        var split = CampaignTally()
        var event = CampaignEvent(campaign: "ab", app: "shop", event: .progress, audience: 4, counts: ["delivered": 3, "skipped": 1], at: 11_000)
        event.variants = ["a": ["delivered": 3], "holdout": ["skipped": 1]]
        split.apply(.campaign(event))
        let splitRow = DashboardSnapshot.row(id: "ab", tally: split, currentSecond: 10)
        #expect(splitRow.variants == ["a": ["delivered": 3], "holdout": ["skipped": 1]])
        // A tally saved before variants were counted reads back without them.
        let old = #"{"outcomes":{},"reasons":{},"per_second":{},"event":{"event":"progress","counts":{},"at":5}}"#
        #expect(try JSONDecoder().decode(CampaignTally.self, from: Data(old.utf8)).event?.variants == nil)
        #expect(snapshot.selected == DashboardSnapshot.Series(name: "run", start: 5, counts: [6, 6, 6, 6, 7]), "no choice: the most recent")
        #expect(snapshot.apps.count == 1 && snapshot.apps[0].limit == 50)
        #expect(snapshot.apps[0].series.counts.count == Int(DashboardSnapshot.appSeconds))
        #expect(snapshot.apps[0].series.counts.reduce(0, +) == 31 + 2, "every campaign of the app in the last minute")
        #expect(snapshot.deadLetters == [letter])

        let chosen = DashboardSnapshot.build(tallies: ["run": running, "done": done], limits: [:], deadLetters: [], selected: "done", now: 12_200)
        #expect(chosen.selected == DashboardSnapshot.Series(name: "done", start: 1, counts: [2]))
        #expect(chosen.apps[0].limit == nil)
        let unknown = DashboardSnapshot.build(tallies: [:], limits: [:], deadLetters: [], selected: "none", now: 12_200)
        #expect(unknown.campaigns.isEmpty && unknown.selected == nil && unknown.apps.isEmpty)
    }
}
