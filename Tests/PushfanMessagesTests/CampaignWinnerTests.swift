import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

@Suite("A/B with a winner")
struct CampaignWinnerTests {
    static let base: JSONValue = CampaignTests.base
        .setting("options", ["priority": 10])
        .setting("variants", [["id": "a", "weight": 45], ["id": "b", "weight": 45]])
        .setting("holdout", 10)
        .setting("winner", ["test_percent": 20, "after_s": 3600, "metric": "open_rate"])

    static let rejects: [RejectCase] = [
        RejectCase("a winner with one variant", value: base.setting("variants", [["id": "a", "weight": 1]]), code: "invalid_field", field: "winner",
                   mentions: "at least two variants"),
        RejectCase("a test group of 100 %", value: base.setting("winner.test_percent", 100), code: "invalid_field", field: "winner.test_percent", mentions: "from 1 to 99"),
        RejectCase("a decision after no time", value: base.setting("winner.after_s", 0), code: "invalid_field", field: "winner.after_s", mentions: "from 1 to 604800"),
        RejectCase("an unknown metric", value: base.setting("winner.metric", "clicks"), code: "invalid_field", field: "winner.metric", mentions: "open_rate"),
        RejectCase("a winner with send_at", value: base.setting("options.send_at", 1_796_000_000_000), code: "invalid_field", field: "winner",
                   mentions: "cannot be combined with options.send_at"),
        RejectCase("a decision without a winner", value: base.setting("winner", nil).setting("decision", ["variant": "a", "metric": "open_rate", "rates": [:], "devices": [:], "at": 1_796_000_000_000]),
                   code: "invalid_field", field: "decision", mentions: "has no winner"),
        RejectCase("a decision for no variant", value: base.setting("decision", ["variant": "c", "metric": "open_rate", "rates": [:], "devices": [:], "at": 1_796_000_000_000]),
                   code: "invalid_field", field: "decision.variant", mentions: "one of the variants"),
    ]

    @Test("refuses with a clear error", arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: Campaign.self)
    }

    @Test("the test group is test_percent of the devices, the same every time; before the decision the shares are the weights'")
    func testGroup() throws {
        let campaign = try MessageCodec.decode(Campaign.self, from: Array(Self.base.jsonText.utf8))
        let devices = (0..<100_000).map { "device-\($0)" }
        let tested = devices.filter { campaign.phase(of: $0) == .test }.count
        #expect(abs(Double(tested) / 100_000 - 0.20) < 0.01, "\(tested)")
        #expect(devices.prefix(100).map { campaign.phase(of: $0) } == devices.prefix(100).map { campaign.phase(of: $0) })
        var plain = campaign
        plain.winner = nil
        #expect(devices.prefix(1_000).allSatisfy { campaign.share(of: $0) == plain.share(of: $0) })
        #expect(plain.phase(of: "device-1") == nil)
    }

    @Test("once decided, the rest gets the winner; the test group and the holdout keep theirs")
    func decidedShares() throws {
        var campaign = try MessageCodec.decode(Campaign.self, from: Array(Self.base.jsonText.utf8))
        let before = (0..<20_000).map { campaign.share(of: "device-\($0)") }
        campaign.decision = campaign.decide(delivered: ["a": 100, "b": 100], engaged: ["a": 10, "b": 30], at: 1_796_000_000_000)
        #expect(campaign.decision?.variant == "b" && campaign.decision?.rates == ["a": 0.1, "b": 0.3] && campaign.decision?.devices == ["a": 100, "b": 100])
        for index in 0..<20_000 {
            let device = "device-\(index)"
            let share = campaign.share(of: device)
            if before[index] == .holdout || campaign.phase(of: device) == .test {
                #expect(share == before[index], "\(device)")
            } else {
                #expect(share == .variant(1), "\(device) in the rest got \(share)")
            }
        }
        // Written and read back, the decision stays; a resubmission ignores it.
        let again = try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign))
        #expect(again == campaign)
        let submitted = try MessageCodec.decode(Campaign.self, from: Array(Self.base.jsonText.utf8))
        #expect(submitted.isResubmission(of: again))
        // A submission may not carry one.
        #expect(throws: MessageDecodingError.self) { try again.checkSchedule(now: Date()) }
    }

    @Test("the best rate wins; a tie goes to the variant listed first; with nothing delivered the first wins")
    func decisions() throws {
        let campaign = try MessageCodec.decode(Campaign.self, from: Array(Self.base.jsonText.utf8))
        #expect(campaign.decide(delivered: ["a": 10, "b": 10], engaged: ["a": 3, "b": 3], at: 1)?.variant == "a")
        #expect(campaign.decide(delivered: [:], engaged: [:], at: 1)?.variant == "a")
        #expect(campaign.decide(delivered: ["a": 10, "b": 20], engaged: ["a": 3, "b": 7], at: 1)?.variant == "b")
        var none = campaign
        none.winner = nil
        #expect(none.decide(delivered: ["a": 1], engaged: ["a": 1], at: 1) == nil)
    }
}
