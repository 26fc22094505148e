import PushfanCore
import PushfanStore

/// What happens when a task's shard is done: the task is marked finished, and the worker
/// that finishes a campaign's last task ends it: `completed` (from running, or from paused
/// when the pause came after the last send), or, for a cancelled campaign, the `cancelled`
/// event with its counts. Announced again if this task is being re-processed after a crash:
/// the event must not be lost.
struct CampaignCompletion {
    let context: SenderContext
    let task: TaskRecord

    func finish(plan: CampaignPlan) async throws {
        let store = context.store
        let finished = try await store.campaigns.finishTask(campaign: task.campaign, shard: task.shard)
        guard finished >= task.shards, let status = try await store.campaigns.get(task.campaign)?.status else { return }
        let ending: CampaignEvent.Event
        var changed = false
        switch status {
        case .running, .paused:
            changed = try await store.campaigns.transition(task.campaign, from: status, to: .completed)
            if !changed {
                // Another finisher (or a command) moved it first: announce only a completion.
                guard try await store.campaigns.get(task.campaign)?.status == .completed else { return }
            }
            ending = .completed
        case .completed:
            ending = .completed
        case .cancelled:
            ending = .cancelled
            changed = finished == task.shards
        case .scheduled, .planning:
            return
        }
        let event = try await CampaignTotals.final(ending, store, campaign: task.campaign, app: task.app)
        if let failure = await ResultsWriter.firstFailure([try await context.writer.campaign(event)]) {
            throw NotDelivered("the \(ending.rawValue) event of \(task.campaign)", cause: failure)
        }
        forget(plan)
        if changed {
            context.logger.notice("campaign.\(ending.rawValue)", ["campaign.id": task.campaign, "audience": String(event.audience ?? 0)])
        }
    }

    /// Drops what this worker kept for the campaign: its progress clock, its plan, its
    /// controls and its own rate buckets.
    private func forget(_ plan: CampaignPlan) {
        context.progress.forget(campaign: task.campaign)
        context.catalog.forget(campaign: task.campaign)
        context.controls.forget(task.campaign)
        if plan.campaign.options.rate != nil {
            for lane in 0..<task.lanes { context.rates.remove(.campaign(task.campaign, lane: lane)) }
        }
    }
}
