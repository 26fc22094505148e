import Testing

@testable import PushfanMessages

/// The campaign lifecycle and what an operator's command does in each status.
@Suite struct CampaignStatusTests {
    @Test("allowed and refused steps, as a table", arguments: CampaignStatus.allCases)
    func steps(_ from: CampaignStatus) {
        let allowed: [CampaignStatus: Set<CampaignStatus>] = [
            .scheduled: [.planning, .paused, .cancelled],
            .planning: [.running, .paused, .cancelled],
            .running: [.completed, .paused, .cancelled],
            .paused: [.running, .scheduled, .cancelled, .completed],
            .completed: [], .cancelled: [],
        ]
        for to in CampaignStatus.allCases {
            #expect(from.canMove(to: to) == allowed[from]!.contains(to), "\(from) → \(to)")
        }
        #expect(from.isFinal == (from == .completed || from == .cancelled))
        #expect(from.sends == (from == .planning || from == .running))
    }

    @Test("statuses are stored by their names")
    func storedNames() {
        #expect(CampaignStatus.allCases.map(\.rawValue) == ["scheduled", "planning", "running", "paused", "completed", "cancelled"])
        #expect(CampaignStatus(rawValue: "Running") == nil)
    }

    /// Every (command, status) pair and its decision.
    static let decisions: [(ControlRecord.Action, CampaignStatus, ControlDecision)] = [
        (.cancel, .scheduled, .move(from: .scheduled, to: .cancelled)),
        (.pause, .scheduled, .move(from: .scheduled, to: .paused)),
        (.resume, .scheduled, .already(.scheduled)),
        (.cancel, .planning, .move(from: .planning, to: .cancelled)),
        (.cancel, .running, .move(from: .running, to: .cancelled)),
        (.cancel, .paused, .move(from: .paused, to: .cancelled)),
        (.cancel, .cancelled, .already(.cancelled)),
        (.cancel, .completed, .refused(reason: "campaign c1 has completed; there is nothing left to cancel")),
        (.pause, .planning, .move(from: .planning, to: .paused)),
        (.pause, .running, .move(from: .running, to: .paused)),
        (.pause, .paused, .already(.paused)),
        (.pause, .completed, .refused(reason: "campaign c1 has completed; there is nothing left to pause")),
        (.pause, .cancelled, .refused(reason: "campaign c1 was cancelled; it cannot be paused")),
        (.resume, .paused, .move(from: .paused, to: .running)),
        (.resume, .running, .already(.running)),
        (.resume, .planning, .already(.planning)),
        (.resume, .completed, .refused(reason: "campaign c1 has completed; there is nothing left to resume")),
        (.resume, .cancelled, .refused(reason: "campaign c1 was cancelled; it cannot be resumed")),
    ]

    @Test("an operator's command in every status: move, already there, or refused with the reason")
    func controlDecisions() {
        #expect(Self.decisions.count == ControlRecord.Action.allCases.count * CampaignStatus.allCases.count)
        for (action, status, expected) in Self.decisions {
            let decision = ControlDecision.decide(action, campaign: "c1", status: status)
            #expect(decision == expected, "\(action) in \(status)")
            if case .move(let from, let to) = decision { #expect(from.canMove(to: to)) }
        }
        // A campaign paused while parked goes back to waiting for its time.
        #expect(ControlDecision.decide(.resume, campaign: "c1", status: .paused, parked: true) == .move(from: .paused, to: .scheduled))
    }
}
