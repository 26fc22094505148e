/// Where a campaign is in its life, as the store keeps it, and the one place that says
/// which steps are allowed. Planning starts in the planner, sending ends in the sender, an
/// operator's control record pauses, resumes or cancels; all move a campaign only through
/// `CampaignStatus.canMove(to:)`.
package enum CampaignStatus: String, Sendable, CaseIterable, Hashable {
    /// Accepted and counted, parked in the store until its `send_at` comes near; no task
    /// exists yet, so it holds no partition and no worker's memory.
    case scheduled
    /// Being split into tasks; re-planned if its planner crashed.
    case planning
    /// Every task is on the topic; senders are working.
    case running
    /// An operator paused it: no request starts until it is resumed; every unsent device
    /// waits, none is lost.
    case paused
    /// Every device has its final outcome and the completed event was produced.
    case completed
    /// An operator cancelled it: no request starts any more, and every device not yet sent
    /// ends `cancelled`; the last task to finish produces the `cancelled` event.
    case cancelled

    /// The statuses a campaign in this one may move to.
    package var successors: Set<CampaignStatus> {
        switch self {
        case .scheduled: [.planning, .paused, .cancelled]
        case .planning: [.running, .paused, .cancelled]
        case .running: [.completed, .paused, .cancelled]
        // A pause that came after the last send: the campaign still completes; a campaign
        // paused while parked goes back to waiting for its time.
        case .paused: [.running, .scheduled, .cancelled, .completed]
        case .completed, .cancelled: []
        }
    }

    package func canMove(to next: CampaignStatus) -> Bool { successors.contains(next) }

    /// No step leads on from here.
    package var isFinal: Bool { successors.isEmpty }

    /// Whether senders may start requests for a campaign in this status.
    package var sends: Bool { self == .planning || self == .running }
}

/// What an operator's command does to a campaign in a given status: the pure decision
/// behind `pushfan campaigns cancel|pause|resume`, the API and the workers' control reader.
package enum ControlDecision: Sendable, Equatable {
    /// Move from the first status to the second.
    case move(from: CampaignStatus, to: CampaignStatus)
    /// The campaign is already where the command leads (a second cancel, a pause of a
    /// paused campaign): nothing changes, and that is not an error.
    case already(CampaignStatus)
    /// The command cannot apply (a completed campaign cannot be cancelled): nothing
    /// changes; `reason` says why, for the operator.
    case refused(reason: String)

    /// `parked`: the campaign has not been dispatched yet (a resume puts it back to
    /// `scheduled`, not `running`).
    package static func decide(_ action: ControlRecord.Action, campaign: String, status: CampaignStatus, parked: Bool = false) -> ControlDecision {
        let target = action.target(parked: parked)
        if status == target || (action == .resume && (status.sends || status == .scheduled)) { return .already(status) }
        if status.canMove(to: target) { return .move(from: status, to: target) }
        switch status {
        case .completed: return .refused(reason: "campaign \(campaign) has completed; there is nothing left to \(action.rawValue)")
        case .cancelled: return .refused(reason: "campaign \(campaign) was cancelled; it cannot be \(action == .pause ? "paused" : "resumed")")
        default: return .refused(reason: "campaign \(campaign) is \(status.rawValue); \(action.rawValue) does not apply")
        }
    }
}

extension ControlRecord.Action {
    /// The status the command leads to. `parked`: the campaign has not been dispatched yet,
    /// so a resume puts it back to `scheduled`.
    package func target(parked: Bool = false) -> CampaignStatus {
        switch self {
        case .cancel: .cancelled
        case .pause: .paused
        // Back to where sending goes on; a campaign paused while planning is planned by
        // then (its planner finished or re-plans), so it runs.
        case .resume: parked ? .scheduled : .running
        }
    }
}
