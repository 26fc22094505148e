import Foundation
import PushfanAPNs
import PushfanCore
import PushfanKafka
import PushfanStore

/// Everything the sender role shares across tasks.
package struct SenderContext: Sendable {
    package let workerID: String
    package let store: DeviceStore
    package let writer: ResultsWriter
    package let catalog: CampaignCatalog
    package let rates: RateLanes
    package let pauses: AppPauses
    package let progress: ProgressReporter
    package let settings: PushfanConfiguration.Worker
    package let retryPolicy: RetryPolicy
    package let logger: Logger
    /// How long an app pauses after a credentials failure.
    package var credentialsPause: Duration { .seconds(settings.credentialsPauseSeconds) }
    /// Batches of one task in flight to APNs at once.
    package var batchesInFlight = 8

    package init(
        workerID: String, store: DeviceStore, writer: ResultsWriter, catalog: CampaignCatalog, rates: RateLanes,
        pauses: AppPauses, progress: ProgressReporter, settings: PushfanConfiguration.Worker, retryPolicy: RetryPolicy = RetryPolicy(),
        logger: Logger
    ) {
        self.workerID = workerID
        self.store = store
        self.writer = writer
        self.catalog = catalog
        self.rates = rates
        self.pauses = pauses
        self.progress = progress
        self.settings = settings
        self.retryPolicy = retryPolicy
        self.logger = logger
    }
}

/// How a task ended.
package enum TaskEnd: Sendable, Equatable {
    /// Every device of the shard has its final outcome in the ledger and its result on the
    /// results topic: the task's offset may be stored.
    case finished
    /// Stopped before the end (revoked partition, shutdown): what was sent is recorded, the
    /// rest is released for the next owner, and the offset must not be stored.
    case handedBack
    /// The task can never run (its campaign or app is gone): it goes to the deadletter
    /// topic with this code and reason, and its offset is stored.
    case abandoned(code: String, reason: String)
}

/// The sender role for one task: expands the shard page by page, claims the devices in the
/// ledger, sends each its notification within the app's rate, records the outcomes and
/// produces the results.
package struct ShardSender: Sendable {
    let context: SenderContext
    let task: TaskRecord

    package init(context: SenderContext, task: TaskRecord) {
        self.context = context
        self.task = task
    }

    /// A device waiting for its next attempt.
    struct Pending {
        var target: DeviceTarget
        var attempts: Int
        var firstAttemptAt: Date?
        var notBefore: ContinuousClock.Instant
    }

    /// Final outcomes of one round, written to the ledger and the results topic together.
    struct Finals {
        var ledger: [LedgerOutcome] = []
        var results: [DeviceResult] = []
    }

    /// Runs the task; returns `.handedBack` when cancelled. Store and Kafka outages are
    /// waited out here (the partition's other lanes keep going).
    package func run() async -> TaskEnd {
        var delay = Duration.milliseconds(500)
        while true {
            do {
                return try await attempt()
            } catch is CancellationError {
                return .handedBack
            } catch let error as CatalogError where error.isPermanent {
                return .abandoned(code: error.code, reason: error.description)
            } catch {
                if Task.isCancelled { return .handedBack }
                context.logger.warning("task.retry", [
                    "campaign.id": task.campaign, "task.shard": String(task.shard), "error": "\(error)", "retry_in_ms": String(delay.milliseconds),
                ])
                do { try await Task.sleep(for: delay) } catch { return .handedBack }
                delay = min(delay * 2, .seconds(30))
            }
        }
    }

    private func attempt() async throws -> TaskEnd {
        let plan = try await context.catalog.plan(campaign: task.campaign)
        var state = TaskState()
        do {
            try await expand(plan: plan, state: &state)
        } catch is CancellationError {
            return try await handBack(&state)
        }
        guard await ResultsWriter.delivered(state.tickets) else { throw KafkaError.configuration("results of \(task.campaign) shard \(task.shard) were not delivered") }
        state.tickets = []
        try await finish(plan: plan)
        return .finished
    }

    private func expand(plan: CampaignPlan, state: inout TaskState) async throws {
        let shard = ShardRange(after: task.after, through: task.through)
        var cursor: Int64?
        var exhausted = false
        while !exhausted {
            try Task.checkCancellation()
            var page = try await context.store.page(
                app: task.app, segment: plan.segment, shard: shard, cursor: cursor, limit: context.settings.pageSize)
            exhausted = page.count < context.settings.pageSize
            cursor = page.last?.rowKey
            if let ids = plan.deviceIDs { page = page.filter { ids.contains($0.deviceID) } }
            if !page.isEmpty { try await claimAndSend(page, plan: plan, state: &state) }
            try await sendDueRetries(plan: plan, state: &state, waitForAll: false)
        }
        // Pages done: what remains are retries and devices another worker still holds.
        while !state.retries.isEmpty || !state.held.isEmpty {
            try Task.checkCancellation()
            if !state.held.isEmpty {
                let held = state.held
                state.held = []
                try await claimAndSend(held, plan: plan, state: &state)
            }
            try await sendDueRetries(plan: plan, state: &state, waitForAll: true)
            if !state.held.isEmpty && state.retries.isEmpty { try await Task.sleep(for: .seconds(1)) }
        }
    }

    struct TaskState {
        var retries: [Pending] = []
        var held: [DeviceTarget] = []
        var tickets: [DeliveryTicket] = []
        /// Payloads by device locale: built and checked once, not once per device.
        var payloads: [String: Result<APNsPreparedPayload, APNsRequestError>] = [:]

        mutating func payload(for locale: String?, campaign: Campaign) throws(APNsRequestError) -> APNsPreparedPayload {
            let key = locale ?? ""
            if let known = payloads[key] { return try known.get() }
            let made = Result { () throws(APNsRequestError) -> APNsPreparedPayload in try APNsPreparedPayload(campaign: campaign, locale: locale) }
            payloads[key] = made
            return try made.get()
        }
    }

    /// Claims a page and sends what this worker now owns. Devices already final get their
    /// result produced again from the ledger (the previous owner may have crashed before
    /// producing it); devices another live worker holds are kept to claim again later.
    private func claimAndSend(_ targets: [DeviceTarget], plan: CampaignPlan, state: inout TaskState) async throws {
        let claim = try await context.store.claim(
            campaign: task.campaign, targets: targets, owner: context.workerID, lease: .seconds(context.settings.leaseSeconds))
        let now = ContinuousClock.now
        // The usual case: every device of the page is newly ours.
        if claim.toSend.count == targets.count {
            try await send(targets.map { Pending(target: $0, attempts: 0, firstAttemptAt: nil, notBefore: now) }, plan: plan, state: &state)
            return
        }
        let owned = Set(claim.toSend.map(\.rowKey))
        var finalKeys = Set<Int64>()
        if claim.alreadyFinal > 0, let low = targets.map(\.rowKey).min(), let high = targets.map(\.rowKey).max() {
            let wanted = Set(targets.map(\.rowKey))
            let entries = try await context.store.finished(campaign: task.campaign, after: low - 1, through: high).filter { wanted.contains($0.rowKey) }
            finalKeys = Set(entries.map(\.rowKey))
            let now = epochMillis()
            let results = entries.map { entry in
                DeviceResult(
                    campaign: task.campaign, device: entry.deviceID, outcome: DeviceOutcome(rawValue: entry.state.rawValue) ?? .failed,
                    status: entry.status, reason: entry.reason, apnsID: entry.apnsID, attempts: entry.attempts, at: now)
            }
            if let ticket = try await context.writer.devices(results) { state.tickets.append(ticket) }
        }
        state.held += targets.filter { !owned.contains($0.rowKey) && !finalKeys.contains($0.rowKey) }
        let pending = claim.toSend.map { Pending(target: $0, attempts: 0, firstAttemptAt: nil, notBefore: now) }
        try await send(pending, plan: plan, state: &state)
    }

    private func sendDueRetries(plan: CampaignPlan, state: inout TaskState, waitForAll: Bool) async throws {
        while !state.retries.isEmpty {
            let now = ContinuousClock.now
            let due = state.retries.filter { $0.notBefore <= now }
            if due.isEmpty {
                guard waitForAll else { return }
                let next = state.retries.map(\.notBefore).min() ?? now
                try await Task.sleep(until: min(next, now + .seconds(1)), clock: .continuous)
                if !state.held.isEmpty { return }
                continue
            }
            state.retries.removeAll { $0.notBefore <= now }
            // Claim again: renews the lease, and tells if another worker took a device over.
            let claim = try await context.store.claim(
                campaign: task.campaign, targets: due.map(\.target), owner: context.workerID, lease: .seconds(context.settings.leaseSeconds))
            let owned = Set(claim.toSend.map(\.rowKey))
            try await send(due.filter { owned.contains($0.target.rowKey) }, plan: plan, state: &state)
            if !waitForAll { return }
        }
    }

    /// Sends within the rate limit, records final outcomes and produces their results;
    /// retryable ones go back to `state.retries`.
    private func send(_ pending: [Pending], plan: CampaignPlan, state: inout TaskState) async throws {
        guard !pending.isEmpty else { return }
        var finals = Finals()
        let campaign = plan.campaign
        var sendable: [Pending] = []
        let nowDate = Date()
        for item in pending {
            if campaign.options.dryRun {
                finals.add(item, campaign: task.campaign, state: .skipped, reason: "dry_run")
            } else if let expiration = campaign.options.expiration, expiration > 0, Int64(nowDate.timeIntervalSince1970) > expiration {
                finals.add(item, campaign: task.campaign, state: .expired, reason: "expired before sending")
            } else {
                sendable.append(item)
            }
        }
        // Requests are built before waiting for the rate: a device whose request cannot be
        // built (its locale's texts make the payload too large) is final without a send.
        var ready: [(Pending, APNsNotification)] = []
        for item in sendable {
            do {
                let token = try DeviceToken(item.target.token)
                let payload = try state.payload(for: item.target.locale, campaign: campaign)
                ready.append((item, try APNsNotification(campaign: campaign, token: token, topic: plan.app.topic, prepared: payload)))
            } catch {
                finals.add(item, campaign: task.campaign, state: .rejected, reason: error.code)
            }
        }
        var handBackAfter = false
        if !ready.isEmpty {
            let (outcomes, unsent) = await transmit(ready, plan: plan)
            for (item, result) in outcomes { try await classify(item, result, plan: plan, finals: &finals, state: &state) }
            if !unsent.isEmpty {
                // Cancelled between batches: these were never sent; give them back.
                try await context.store.releaseClaims(campaign: task.campaign, owner: context.workerID, rowKeys: unsent.map(\.target.rowKey))
                handBackAfter = true
            }
        }
        try await record(finals, state: &state)
        context.progress.touch(campaign: task.campaign, app: task.app)
        if handBackAfter { throw CancellationError() }
    }

    private func record(_ finals: Finals, state: inout TaskState) async throws {
        guard !finals.ledger.isEmpty else { return }
        try await context.store.record(campaign: task.campaign, finals.ledger)
        if let ticket = try await context.writer.devices(finals.results) { state.tickets.append(ticket) }
    }

    /// Sends in rate-sized batches, several in flight. Returns each sent item with its
    /// result, and the items not sent because the task was cancelled.
    private func transmit(_ ready: [(Pending, APNsNotification)], plan: CampaignPlan) async -> (sent: [(Pending, APNsSendResult)], unsent: [Pending]) {
        let laneRate = Double(plan.app.ratePerSecond) / Double(task.lanes)
        let appBucket = context.rates.bucket("\(task.app)#\(task.lane)", rate: laneRate)
        var campaignBucket: TokenBucket?
        if let rate = plan.campaign.options.rate, rate < plan.app.ratePerSecond {
            campaignBucket = context.rates.bucket("\(task.campaign)#\(task.lane)", rate: Double(rate) / Double(task.lanes))
        }
        var sent: [(Pending, APNsSendResult)] = []
        var index = 0
        var stopped = false
        await withTaskGroup(of: [(Pending, APNsSendResult)].self) { group in
            var running = 0
            while index < ready.count {
                do {
                    if let resume = context.pauses.resumeAt(task.app) { try await Task.sleep(until: resume, clock: .continuous) }
                    var granted = ready.count - index
                    if let campaignBucket { granted = try await campaignBucket.acquire(upTo: granted) }
                    granted = campaignBucket == nil ? try await appBucket.acquire(upTo: granted) : try await appBucket.acquire(exactly: granted)
                    let chunk = Array(ready[index..<index + granted])
                    index += granted
                    // One client per environment; a chunk mixing them is split.
                    let groups = Dictionary(grouping: chunk, by: { $0.0.target.environment })
                    if running >= context.batchesInFlight, let done = await group.next() {
                        sent += done
                        running -= 1
                    }
                    let catalog = context.catalog
                    let app = plan.app
                    group.addTask {
                        var results: [(Pending, APNsSendResult)] = []
                        for (environment, members) in groups {
                            do {
                                let client = try catalog.client(for: app, environment: environment)
                                let answers = await client.send(batch: members.map(\.1))
                                for (member, answer) in zip(members, answers) { results.append((member.0, answer)) }
                            } catch {
                                for member in members {
                                    results.append((member.0, .failed(APNsTransportFailure(.credentialsUnavailable, detail: "\(error)"))))
                                }
                            }
                        }
                        return results
                    }
                    running += 1
                } catch {
                    stopped = true
                    break
                }
            }
            for await done in group { sent += done }
        }
        let unsent = stopped ? ready[index...].map(\.0) : []
        return (sent, unsent)
    }

    /// Turns one APNs answer into a final outcome, a retry, or an app pause.
    private func classify(_ item: Pending, _ result: APNsSendResult, plan: CampaignPlan, finals: inout Finals, state: inout TaskState) async throws {
        var item = item
        let now = Date()
        item.attempts += 1
        if item.firstAttemptAt == nil { item.firstAttemptAt = now }
        switch result {
        case .response(.accepted(let apnsID, _)):
            finals.add(item, campaign: task.campaign, state: .delivered, status: 200, apnsID: apnsID)
            return
        case .response(.rejected(let status, let reason, let timestamp)):
            switch reason.disposition(status: status) {
            case .invalidateToken:
                finals.add(item, campaign: task.campaign, state: .invalidToken, status: status, reason: reason.rawValue)
                try await applyTokenHygiene(item.target, app: plan.app.app, status: status, reason: reason, timestamp: timestamp)
                return
            case .fixRequest, .doNotRetry:
                finals.add(item, campaign: task.campaign, state: .rejected, status: status, reason: reason.rawValue)
                return
            case .credentialsProblem:
                pauseForCredentials(&item, reason: "APNs answered \(status) \(reason.rawValue)", state: &state)
                return
            default:
                break
            }
        case .failed(let failure):
            if failure.cause == .credentialsUnavailable {
                pauseForCredentials(&item, reason: failure.description, state: &state)
                return
            }
            if failure.cause == .senderClosed {
                // Shutting down: never sent; it stays claimed for the next owner.
                item.attempts -= 1
                state.retries.append(item)
                return
            }
        }
        let decision = context.retryPolicy.decide(
            result, attempt: item.attempts, now: now, expiration: APNsNotification.Expiration(epochSeconds: plan.campaign.options.expiration),
            firstAttemptAt: item.firstAttemptAt ?? now)
        switch decision {
        case .retry(let after):
            item.notBefore = ContinuousClock.now + after
            state.retries.append(item)
        case .expired:
            finals.add(item, campaign: task.campaign, state: .expired, status: Self.status(of: result), reason: Self.reason(of: result))
        case .giveUp, .done:
            finals.add(item, campaign: task.campaign, state: .failed, status: Self.status(of: result), reason: Self.reason(of: result))
        }
    }

    private func pauseForCredentials(_ item: inout Pending, reason: String, state: inout TaskState) {
        // Not the device's fault: the attempt does not count, and the device waits with its app.
        item.attempts -= 1
        context.pauses.pause(task.app, for: context.credentialsPause, reason: reason)
        item.notBefore = ContinuousClock.now + context.credentialsPause
        state.retries.append(item)
    }

    /// 410 invalidates the device unless it registered again after APNs' timestamp; a token
    /// APNs calls bad or not for the topic is invalidated in that environment.
    private func applyTokenHygiene(_ target: DeviceTarget, app: String, status: Int, reason: APNsReason, timestamp: Date?) async throws {
        if status == 410 {
            let at = timestamp.map { epochMillis($0) } ?? epochMillis()
            _ = try await context.store.applyUnregistered(app: app, environment: target.environment, token: target.token, at: at, reason: reason.rawValue)
        } else {
            _ = try await context.store.invalidate(app: app, environment: target.environment, token: target.token, reason: reason.rawValue)
        }
    }

    private static func status(of result: APNsSendResult) -> Int? {
        if case .response(.rejected(let status, _, _)) = result { return status }
        return nil
    }

    private static func reason(of result: APNsSendResult) -> String {
        switch result {
        case .response(.rejected(_, let reason, _)): return reason.rawValue.isEmpty ? "unspecified" : reason.rawValue
        case .response(.accepted): return ""
        case .failed(let failure): return failure.cause.rawValue
        }
    }

    /// Gives back what this task holds and stops.
    private func handBack(_ state: inout TaskState) async throws -> TaskEnd {
        let keys = state.retries.map(\.target.rowKey)
        try await context.store.releaseClaims(campaign: task.campaign, owner: context.workerID, rowKeys: keys)
        _ = await ResultsWriter.delivered(state.tickets)
        return .handedBack
    }

    /// Marks the task finished; the worker that finishes a campaign's last task announces
    /// its completion (again, if this task is being re-processed after a crash).
    private func finish(plan: CampaignPlan) async throws {
        let finished = try await context.store.finishTask(campaign: task.campaign, shard: task.shard)
        guard finished >= task.shards else { return }
        let changed = try await context.store.transitionCampaign(task.campaign, from: CampaignStatus.running, to: CampaignStatus.completed)
        let status = try await context.store.campaign(task.campaign)?.status
        guard changed || status == CampaignStatus.completed else { return }
        let counts = try await context.store.outcomeCounts(campaign: task.campaign)
        let byOutcome = DeviceOutcome.counts(fromLedger: counts)
        let total = byOutcome.values.reduce(0, +)
        let event = CampaignEvent(campaign: task.campaign, app: task.app, event: .completed, audience: total, outcomeCounts: byOutcome, at: epochMillis())
        guard await ResultsWriter.delivered([try await context.writer.campaign(event)]) else {
            throw KafkaError.configuration("the completed event of \(task.campaign) was not delivered")
        }
        context.progress.forget(campaign: task.campaign)
        context.catalog.forget(campaign: task.campaign)
        if plan.campaign.options.rate != nil {
            for lane in 0..<task.lanes { context.rates.remove("\(task.campaign)#\(lane)") }
        }
        if changed {
            context.logger.notice("campaign.completed", ["campaign.id": task.campaign, "audience": String(total)])
        }
    }
}

extension ShardSender.Finals {
    mutating func add(
        _ item: ShardSender.Pending, campaign: String, state: LedgerState, status: Int? = nil, reason: String? = nil, apnsID: String? = nil
    ) {
        ledger.append(LedgerOutcome(rowKey: item.target.rowKey, state: state, attempts: item.attempts, apnsID: apnsID, status: status, reason: reason))
        results.append(DeviceResult(
            campaign: campaign, device: item.target.deviceID, outcome: DeviceOutcome(rawValue: state.rawValue) ?? .failed,
            status: status, reason: reason, apnsID: apnsID, attempts: item.attempts, at: epochMillis()))
    }
}
