import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport

/// Writes a round's final outcomes: the ledger first (the answers are what a resend would
/// cost), then the token marks they imply, then the results on the results topic. Store
/// writes are retried in place while the store is unavailable.
struct OutcomeRecorder {
    /// Final outcomes of one round, written to the ledger and the results topic together.
    struct Finals {
        /// The campaign, whose variants name each device's in its result.
        let campaign: Campaign
        /// Its devices were admitted under frequency caps: those not delivered give theirs back.
        let capped: Bool
        var ledger: [LedgerOutcome] = []
        var results: [DeviceResult] = []
        /// Tokens APNs refused for good, marked in the store with the page's outcomes.
        var marks: [TokenMark] = []

        /// A broadcast campaign: its one result says so.
        let broadcast: Bool

        init(plan: CampaignPlan) { (campaign, capped, broadcast) = (plan.campaign, plan.capped, plan.channel != nil) }

        /// Devices admitted under the caps that did not receive the push after all.
        var notReceived: [Int64] {
            guard capped else { return [] }
            return ledger.filter { $0.state != .delivered && $0.reason != Campaign.frequencyCapReason && $0.variant != Campaign.holdoutReason }.map(\.rowKey)
        }

        mutating func add(
            _ item: ShardSender.Pending, state: LedgerState, status: Int? = nil, reason: String? = nil, apnsID: String? = nil, at: Int64
        ) {
            var outcome = LedgerOutcome(rowKey: item.target.rowKey, state: state, attempts: item.attempts, apnsID: apnsID, status: status, reason: reason)
            // One hash per device, for both the ledger's per-variant totals and the result.
            let share = campaign.share(of: item.target.deviceID)
            outcome.variant = campaign.countedName(of: share)
            ledger.append(outcome)
            results.append(DeviceResult(
                campaign: campaign.key, device: item.target.deviceID, outcome: DeviceOutcome(rawValue: state.rawValue) ?? .failed,
                status: status, reason: reason, apnsID: apnsID, attempts: item.attempts, at: at, variant: campaign.variantID(of: share),
                broadcast: broadcast))
        }
    }

    let context: SenderContext
    let task: TaskRecord

    /// Records `finals`; returns the ticket of their results, to wait for before the task's
    /// offset may be stored. A device the ledger kept another outcome for (another owner's
    /// answer came first, or this one's write committed before its error) gets the ledger's
    /// as its result, so the results topic ends where the ledger does; one another owner
    /// holds gets none here (its holder writes it).
    func record(_ finals: Finals) async throws -> DeliveryTicket? {
        guard !finals.ledger.isEmpty else { return nil }
        let recorded = try await untilStored {
            try await context.store.ledger.record(campaign: task.campaignKey, finals.ledger, owner: context.ledgerOwner, now: context.clock.wallMillis)
        }
        if !finals.marks.isEmpty { try await untilStored { try await context.store.devices.applyHygiene(app: task.app, finals.marks, now: context.clock.wallMillis) } }
        // The usual case: the ledger took every outcome, and no device needs a second look.
        let mine = recorded.count == finals.ledger.count
            ? finals.results : zip(finals.ledger, finals.results).filter { recorded.contains($0.0.rowKey) }.map(\.1)
        var results = mine
        // A cap's admission is given back by the ledger's final state, not this worker's
        // answer: it stands for a device delivered, or still another owner's to end.
        var standing = Set<Int64>()
        if recorded.count < finals.ledger.count {
            let others = finals.ledger.map(\.rowKey).filter { !recorded.contains($0) }
            let kept = try await untilStored { try await ledgerResults(others, campaign: finals.campaign, broadcast: finals.broadcast) }
            results += kept.map(\.result)
            standing = Set(others).subtracting(kept.filter { $0.result.outcome != .delivered }.map(\.rowKey))
        }
        let notReceived = finals.notReceived.filter { !standing.contains($0) }
        if !notReceived.isEmpty { try await untilStored { try await context.store.frequency.forget(campaign: task.campaignKey, rowKeys: notReceived) } }
        let ticket = try await context.writer.devices(results)
        // Counted once, by the worker whose outcome the ledger took.
        context.metrics.recorded(app: task.app, mine)
        return ticket
    }

    /// The results of these devices as the ledger has them final, with their row keys (none
    /// for a device still claimed).
    func ledgerResults(_ rowKeys: [Int64], campaign: Campaign, broadcast: Bool) async throws -> [(rowKey: Int64, result: DeviceResult)] {
        guard let low = rowKeys.min(), let high = rowKeys.max() else { return [] }
        let wanted = Set(rowKeys)
        let now = context.clock.wallMillis
        return try await context.store.ledger.finished(campaign: task.campaignKey, after: low - 1, through: high).filter { wanted.contains($0.rowKey) }.map { entry in
            (entry.rowKey, DeviceResult(
                campaign: task.campaignKey, device: entry.deviceID, outcome: DeviceOutcome(rawValue: entry.state.rawValue) ?? .failed,
                status: entry.status, reason: entry.reason, apnsID: entry.apnsID, attempts: entry.attempts, at: now,
                variant: campaign.variantID(of: entry.deviceID), broadcast: broadcast))
        }
    }

    /// Runs a store write again while the store is unavailable, until the task is stopped:
    /// the APNs answers it records are in hand, and restarting the task would buy them again
    /// with a second send.
    @discardableResult
    func untilStored<T>(_ write: () async throws -> T) async throws -> T {
        var backoff = Backoff(first: .milliseconds(250), longest: .seconds(5))
        while true {
            do {
                return try await write()
            } catch let error as StoreError where error.isUnavailable {
                let delay = backoff.next()
                context.logger.warning("task.store_retry", [
                    "campaign.id": task.campaignKey.stored, "task.shard": String(task.shard), "error": error.description, "retry_in_ms": String(delay.milliseconds),
                ])
                try await context.clock.sleep(until: context.clock.now + delay)
            }
        }
    }
}
