import Testing

@testable import PushfanCore

/// The campaign lifecycle: the only steps allowed are planning → running → completed.
@Suite struct CampaignStatusTests {
    @Test("allowed and refused steps, as a table", arguments: CampaignStatus.allCases)
    func steps(_ from: CampaignStatus) {
        let allowed: [CampaignStatus: Set<CampaignStatus>] = [.planning: [.running], .running: [.completed], .completed: []]
        for to in CampaignStatus.allCases {
            #expect(from.canMove(to: to) == allowed[from]!.contains(to), "\(from) → \(to)")
        }
        #expect(from.isFinal == (from == .completed))
    }

    @Test("statuses are stored by their names")
    func storedNames() {
        #expect(CampaignStatus.allCases.map(\.rawValue) == ["planning", "running", "completed"])
        #expect(CampaignStatus(rawValue: "Running") == nil)
    }
}
