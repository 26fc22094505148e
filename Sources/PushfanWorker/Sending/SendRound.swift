import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// One round of a task: devices this worker owns now, each decided once. A device ends
/// without a request (dry run, expired, credentials given up, a request that cannot be
/// built), or is sent and its answer turned by the decider into a final outcome, a retry,
/// the app's pause or a hand-back. Finals are recorded before anything is given back.
struct SendRound {
    let context: SenderContext
    let task: TaskRecord
    let plan: CampaignPlan

    static let expiredReason = "expired before sending"
    static let credentialsReason = "credentials"
    static let cancelledReason = "cancelled by an operator"

    private var recorder: OutcomeRecorder { OutcomeRecorder(context: context, task: task) }

    /// Sends within the rate limit, records final outcomes and produces their results;
    /// retryable ones go to `state.retries`. Each answered batch is recorded while the next
    /// ones are on the wire, so the answers in hand and not yet in the ledger (what a crash
    /// would send again) are never more than the batches in flight. Throws
    /// `CancellationError` (after giving the unsent devices back) when the task is stopped
    /// between batches, and a recording's error after giving back what it did not send.
    func send(_ pending: [ShardSender.Pending], state: inout ShardSender.TaskState) async throws {
        guard !pending.isEmpty else { return }
        var finals = OutcomeRecorder.Finals(plan: plan)
        let now = context.clock.wallMillis
        switch context.controls.current(task.campaignKey) {
        case .paused?:
            // They wait, claimed, for the resume; the retry pass claims them again first.
            state.claimAgain(pending, now: context.clock.now)
            return
        case .cancelled?:
            try await end(pending, as: .cancelled, reason: Self.cancelledReason, state: &state)
            context.controls.obeyed(task.campaignKey)
            return
        default:
            break
        }
        if let reason = task.skip {
            // A zone whose local time had passed, under `late: skip`.
            try await end(pending, as: .skipped, reason: reason, state: &state)
            return
        }
        let ready = prepare(pending, finals: &finals, state: &state, at: now)
        var unsent: [ShardSender.Pending] = []
        var failure: (any Error)?
        if !ready.isEmpty {
            var delivered = false
            let pausesBefore = state.credentialFailures
            let transmission = await BatchTransmitter(context: context, task: task, plan: plan).transmit(ready, page: state.page) { answers in
                for (item, result, answeredAt) in answers {
                    if case .response(.accepted) = result { delivered = true }
                    await classify(item, result, answeredAt: answeredAt, finals: &finals, state: &state)
                }
                guard failure == nil else { return false }
                do {
                    try await flush(&finals, state: &state)
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
            // Credentials work again only if nothing in this round said otherwise.
            if delivered && state.credentialFailures == pausesBefore { context.pauses.recovered(task.app) }
            let at = context.clock.wallMillis
            for item in transmission.expired { finals.add(item, state: .expired, reason: Self.expiredReason, at: at) }
            for item in transmission.givenUp { finals.add(item, state: .failed, reason: Self.credentialsReason, at: at) }
            for item in transmission.cancelled { finals.add(item, state: .cancelled, reason: Self.cancelledReason, at: at) }
            state.claimAgain(transmission.paused + transmission.lapsed, now: context.clock.now)
            if !transmission.takenOver.isEmpty {
                // Another owner took them over while this worker could not renew (stopped, or
                // cut off from the store): theirs to send and record. The task waits for their
                // outcomes like any device held elsewhere, and takes them back if that owner dies.
                context.logger.warning("task.claims_taken_over", [
                    "campaign.id": task.campaignKey.stored, "task.shard": String(task.shard), "devices": String(transmission.takenOver.count),
                ])
                state.held += transmission.takenOver.map(\.target)
            }
            unsent = transmission.unsent
        }
        if failure == nil { try await flush(&finals, state: &state) }
        context.progress.touch(campaign: task.campaignKey)
        if !unsent.isEmpty {
            // Cancelled between batches (or recording failed): these were never sent; give them back.
            try await context.store.ledger.release(campaign: task.campaignKey, owner: context.ledgerOwner, rowKeys: unsent.map(\.target.rowKey))
        }
        if let failure { throw failure }
        if !unsent.isEmpty { throw CancellationError() }
    }

    /// Records what `finals` holds so far and empties it.
    private func flush(_ finals: inout OutcomeRecorder.Finals, state: inout ShardSender.TaskState) async throws {
        let taken = finals
        finals = OutcomeRecorder.Finals(plan: plan)
        if let ticket = try await recorder.record(taken) { state.tickets.append(ticket) }
    }

    /// Every device of `pending` ends `final` without a request.
    func end(_ pending: [ShardSender.Pending], as final: LedgerState, reason: String, state: inout ShardSender.TaskState) async throws {
        var finals = OutcomeRecorder.Finals(plan: plan)
        let now = context.clock.wallMillis
        for item in pending { finals.add(item, state: final, reason: reason, at: now) }
        try await flush(&finals, state: &state)
        context.progress.touch(campaign: task.campaignKey)
    }

    /// The requests to send; devices that end without one go to `finals`. Requests are
    /// built before waiting for the rate: a device whose request cannot be built (its
    /// locale's texts make the payload too large) is final without a send.
    private func prepare(
        _ pending: [ShardSender.Pending], finals: inout OutcomeRecorder.Finals, state: inout ShardSender.TaskState, at now: Int64
    ) -> [(ShardSender.Pending, APNsNotification)] {
        let campaign = plan.campaign
        let expired = context.hasExpired(campaign)
        let givenUp = context.pauses.hasGivenUp(task.app)
        var ready: [(ShardSender.Pending, APNsNotification)] = []
        ready.reserveCapacity(pending.count)
        for item in pending {
            if campaign.options.dryRun {
                finals.add(item, state: .skipped, reason: "dry_run", at: now)
            } else if expired {
                finals.add(item, state: .expired, reason: Self.expiredReason, at: now)
            } else if givenUp {
                finals.add(item, state: .failed, reason: Self.credentialsReason, at: now)
            } else {
                let variant: Int?
                switch campaign.share(of: item.target.deviceID) {
                case .holdout:
                    finals.add(item, state: .skipped, reason: Campaign.holdoutReason, at: now)
                    continue
                case .variant(let index): variant = index
                case .base: variant = nil
                }
                guard let tokenText = item.target.token(for: plan.tokenKind) else {
                    // Never to another kind's token: its rejection would invalidate that one.
                    finals.add(item, state: .skipped, reason: APNsTokenKind.missingTokenReason, at: now)
                    continue
                }
                do {
                    let payload = try state.payload(for: item.target, variant: variant, plan: plan)
                    if plan.channel != nil {
                        ready.append((item, try APNsNotification(
                            channel: tokenText, bundleID: plan.app.topic, prepared: payload,
                            expiration: APNsNotification.Expiration(epochSeconds: campaign.options.expiration))))
                    } else {
                        let token = try DeviceToken(tokenText)
                        ready.append((item, try APNsNotification(campaign: campaign, token: token, topic: plan.app.topic, prepared: payload)))
                    }
                } catch {
                    finals.add(item, state: .rejected, reason: error.code, at: now)
                }
            }
        }
        return ready
    }

    /// Performs what the decider makes of one APNs answer: a final outcome (with token
    /// hygiene), a retry, the app's pause, or a hand-back.
    private func classify(
        _ item: ShardSender.Pending, _ result: APNsSendResult, answeredAt: Date, finals: inout OutcomeRecorder.Finals,
        state: inout ShardSender.TaskState
    ) async {
        var item = item
        let now = context.clock.wall
        item.attempts += 1
        let firstAttemptAt = item.firstAttemptAt ?? now
        item.firstAttemptAt = firstAttemptAt
        let decision = context.decider.decide(
            result, attempt: item.attempts, expiration: APNsNotification.Expiration(epochSeconds: plan.campaign.options.expiration),
            firstAttemptAt: firstAttemptAt, now: now)
        switch decision {
        case .final(let final):
            finals.add(
                item, state: final.state, status: final.status, reason: final.reason, apnsID: final.apnsID,
                at: epochMillis(answeredAt))
            if let hygiene = final.hygiene { finals.marks.append(Self.mark(item.target, hygiene, reason: final.reason ?? "", answeredAt: epochMillis(answeredAt))) }
        case .retry(let after):
            item.notBefore = context.clock.now + after
            state.retries.append(item)
            context.metrics.retried(app: task.app, after: result)
        case .pauseApp(let reason):
            await pauseForCredentials(item, reason: reason, finals: &finals, state: &state)
        case .handBack:
            // Shutting down: never sent; it stays claimed for the next owner.
            item.attempts -= 1
            state.retries.append(item)
        }
    }

    /// Not the device's fault: the attempt does not count, and the device waits with its
    /// app, unless the credentials have failed past the limit. The campaign's submitter is
    /// told of the pause with a `paused` event.
    private func pauseForCredentials(
        _ item: ShardSender.Pending, reason: String, finals: inout OutcomeRecorder.Finals, state: inout ShardSender.TaskState
    ) async {
        var item = item
        item.attempts -= 1
        state.credentialFailures += 1
        let verdict = context.pauses.pause(task.app, campaign: task.campaignKey, for: context.credentialsPause, reason: reason)
        // Advisory, like progress: it must never cost the answers in hand, so a store or
        // Kafka problem only skips it.
        if verdict.announce, let event = try? await CampaignTotals.running(
            .paused, context.store, campaign: task.campaignKey,
            error: "the app's APNs credentials fail (\(reason)); sends resume by themselves once they work", at: context.clock.wallMillis) {
            _ = try? await context.writer.campaign(event)
        }
        if verdict.giveUp {
            finals.add(item, state: .failed, reason: Self.credentialsReason, at: context.clock.wallMillis)
            return
        }
        item.notBefore = context.clock.now + context.credentialsPause
        state.retries.append(item)
    }

    /// The store's mark for a token APNs called bad: 410 invalidates the device unless it
    /// registered again after APNs' timestamp; a token APNs calls bad or not for the topic is
    /// invalidated in that environment.
    private static func mark(_ target: DeviceTarget, _ hygiene: DeliveryDecider.TokenHygiene, reason: String, answeredAt: Int64) -> TokenMark {
        switch hygiene {
        case .unregistered(let timestamp):
            TokenMark(
                environment: target.environment, token: target.token, kind: .unregistered(at: timestamp.map { epochMillis($0) } ?? answeredAt), reason: reason,
                tokenKind: target.tokenKind)
        case .invalidate:
            TokenMark(environment: target.environment, token: target.token, kind: .invalid, reason: reason, tokenKind: target.tokenKind)
        }
    }
}
