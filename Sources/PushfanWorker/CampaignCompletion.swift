import PushfanCore
import PushfanStore

/// What happens when a task's shard is done: the task is marked finished, and the worker
/// that finishes a campaign's last task moves it to `completed` and announces it (again,
/// if this task is being re-processed after a crash: the event must not be lost).
struct CampaignCompletion {
    let context: SenderContext
    let task: TaskRecord

    func finish(plan: CampaignPlan) async throws {
        let store = context.store
        let finished = try await store.campaigns.finishTask(campaign: task.campaign, shard: task.shard)
        guard finished >= task.shards else { return }
        let changed = try await store.campaigns.transition(task.campaign, from: .running, to: .completed)
        let status = try await store.campaigns.get(task.campaign)?.status
        guard changed || status == .completed else { return }
        let event = try await CampaignTotals.completed(store, campaign: task.campaign, app: task.app)
        if let failure = await ResultsWriter.firstFailure([try await context.writer.campaign(event)]) {
            throw NotDelivered("the completed event of \(task.campaign)", cause: failure)
        }
        forget(plan)
        if changed {
            context.logger.notice("campaign.completed", ["campaign.id": task.campaign, "audience": String(event.audience ?? 0)])
        }
    }

    /// Drops what this worker kept for the campaign: its progress clock, its plan and its
    /// own rate buckets.
    private func forget(_ plan: CampaignPlan) {
        context.progress.forget(campaign: task.campaign)
        context.catalog.forget(campaign: task.campaign)
        if plan.campaign.options.rate != nil {
            for lane in 0..<task.lanes { context.rates.remove(.campaign(task.campaign, lane: lane)) }
        }
    }
}
