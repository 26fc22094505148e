/// Where a campaign is in its life, as the store keeps it, and the one place that says
/// which steps are allowed. Planning starts in the planner, sending ends in the sender;
/// both move a campaign only through `CampaignStatus.canMove(to:)`.
package enum CampaignStatus: String, Sendable, CaseIterable, Hashable {
    /// Being split into tasks; re-planned if its planner crashed.
    case planning
    /// Every task is on the topic; senders are working.
    case running
    /// Every device has its final outcome and the completed event was produced.
    case completed

    /// The statuses a campaign in this one may move to.
    package var successors: Set<CampaignStatus> {
        switch self {
        case .planning: [.running]
        case .running: [.completed]
        case .completed: []
        }
    }

    package func canMove(to next: CampaignStatus) -> Bool { successors.contains(next) }

    /// No step leads on from here.
    package var isFinal: Bool { successors.isEmpty }
}
