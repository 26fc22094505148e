import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// What happens when a task's shard is done: the task is marked finished, and the worker
/// that finishes a campaign's last task ends it: `completed` (from running, or from paused
/// when the pause came after the last send), or, for a cancelled campaign, the `cancelled`
/// event with its counts. Announced again if this task is being re-processed after a crash:
/// the event must not be lost. The worker forgets what it kept for the campaign either way.
struct CampaignCompletion {
    let context: SenderContext
    let task: TaskRecord

    func finish(plan: CampaignPlan) async throws {
        // The store's count, not the task's: the planner may still be finding shards, and
        // quiet-hours holds add shards while the campaign sends.
        let (finished, shards) = try await context.store.campaigns.finishTask(campaign: task.campaignKey, shard: task.shard, now: context.clock.wallMillis)
        guard finished >= shards else { return }
        try await Self.end(
            store: context.store, writer: context.writer, logger: context.logger, campaign: task.campaignKey,
            lastFinisher: finished == shards)
        forget(plan)
    }

    /// The planner's half: a campaign whose every task finished before the planner marked
    /// it running (its tasks go out before its `accepted` answer) was not ended by its last
    /// finisher; the planner ends it once it has marked it running.
    static func completeIfFinished(store: DeviceStore, writer: ResultsWriter, logger: Logger, campaign: CampaignKey) async throws {
        guard let shards = try await store.campaigns.get(campaign)?.shards, try await store.campaigns.finishedTasks(campaign) >= shards else { return }
        try await end(store: store, writer: writer, logger: logger, campaign: campaign, lastFinisher: true)
    }

    /// Ends a campaign whose every task finished: `completed` (moved there from running or
    /// paused by exactly one caller, announced again by a re-processed task) or, once
    /// cancelled, the `cancelled` event. Still planning: the planner ends it
    /// (`completeIfFinished`), so its `accepted` answer always comes first.
    private static func end(store: DeviceStore, writer: ResultsWriter, logger: Logger, campaign: CampaignKey, lastFinisher: Bool) async throws {
        guard var status = try await store.campaigns.get(campaign)?.status else { return }
        // A pause, resume or cancel landing between the read and the move: read again and
        // move from there (a command finishes no task, so nobody else would end the campaign).
        var moved = false
        for _ in 0..<3 where status == .running || status == .paused {
            if try await store.campaigns.transition(campaign, from: status, to: .completed, now: store.clock.wallMillis) {
                (moved, status) = (true, .completed)
                break
            }
            guard let now = try await store.campaigns.get(campaign)?.status else { return }
            status = now
        }
        let ending: CampaignEvent.Event
        var changed = false
        switch status {
        case .running, .paused:
            // Commands kept moving it: the next finisher, or the planner, ends it.
            return
        case .completed:
            // Ours, or another finisher's (then only announced again).
            ending = .completed
            changed = moved
        case .cancelled:
            ending = .cancelled
            changed = lastFinisher
        case .scheduled, .planning:
            return
        }
        let event = try await CampaignTotals.final(ending, store, campaign: campaign, at: store.clock.wallMillis)
        if let failure = await ResultsWriter.firstFailure([try await writer.campaign(event)]) {
            throw NotDelivered("the \(ending.rawValue) event of \(campaign)", cause: failure)
        }
        if changed {
            logger.notice("campaign.\(ending.rawValue)", ["campaign.id": campaign.stored, "audience": String(event.audience ?? 0)])
        }
    }

    /// Drops what this worker kept for the campaign: its progress clock, its plan, its
    /// controls and its own rate buckets.
    private func forget(_ plan: CampaignPlan) {
        context.progress.forget(campaign: task.campaignKey)
        context.catalog.forget(campaign: task.campaignKey)
        context.controls.forget(task.campaignKey)
        if plan.campaign.options.rate != nil {
            for lane in 0..<task.lanes { context.rates.remove(.campaign(task.campaignKey, lane: lane)) }
        }
    }
}
