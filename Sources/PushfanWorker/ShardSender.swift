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
    package let circuits: LaneCircuits
    package let progress: ProgressReporter
    package let settings: PushfanConfiguration.Worker
    package let logger: Logger
    /// How long an app pauses after a credentials failure.
    package var credentialsPause: Duration { .seconds(settings.credentialsPauseSeconds) }
    /// Turns each APNs answer into what happens to its device.
    package let decider: DeliveryDecider
    /// Batches of one task in flight to APNs at once.
    package var batchesInFlight = 8

    package init(
        workerID: String, store: DeviceStore, writer: ResultsWriter, catalog: CampaignCatalog, rates: RateLanes,
        pauses: AppPauses, circuits: LaneCircuits, progress: ProgressReporter, settings: PushfanConfiguration.Worker,
        retryPolicy: RetryPolicy = RetryPolicy(), logger: Logger
    ) {
        self.workerID = workerID
        self.store = store
        self.writer = writer
        self.catalog = catalog
        self.rates = rates
        self.pauses = pauses
        self.circuits = circuits
        self.progress = progress
        self.settings = settings
        self.decider = DeliveryDecider(retryPolicy: retryPolicy)
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
        /// Tokens APNs refused for good, marked in the store with the page's outcomes.
        var marks: [TokenMark] = []
    }

    /// Runs the task; returns `.handedBack` when cancelled. Store and Kafka outages are
    /// waited out here (the partition's other lanes keep going).
    package func run() async -> TaskEnd {
        var backoff = Backoff(first: .milliseconds(500), longest: .seconds(30))
        while true {
            do {
                return try await attempt()
            } catch is CancellationError {
                return .handedBack
            } catch let error as CatalogError where error.isPermanent {
                return .abandoned(code: error.code, reason: error.description)
            } catch {
                if Task.isCancelled { return .handedBack }
                let delay = backoff.next()
                context.logger.warning("task.retry", [
                    "campaign.id": task.campaign, "task.shard": String(task.shard), "error": "\(error)", "retry_in_ms": String(delay.milliseconds),
                ])
                do { try await Task.sleep(for: delay) } catch { return .handedBack }
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
        if let failure = await ResultsWriter.firstFailure(state.tickets) {
            throw NotDelivered("results of \(task.campaign) shard \(task.shard)", cause: failure)
        }
        state.tickets = []
        try await finish(plan: plan)
        return .finished
    }

    private func expand(plan: CampaignPlan, state: inout TaskState) async throws {
        var pages = ShardPages(store: context.store, plan: plan, task: task, pageSize: context.settings.pageSize)
        defer { pages.cancel() }
        while let page = try await pages.nextPage() {
            try Task.checkCancellation()
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
        /// Answers that were credentials failures, so far.
        var credentialFailures = 0
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
        let claim = try await context.store.ledger.claim(
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
            let entries = try await context.store.ledger.finished(campaign: task.campaign, after: low - 1, through: high).filter { wanted.contains($0.rowKey) }
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
            let claim = try await context.store.ledger.claim(
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
        let expired = hasExpired(campaign)
        let givenUp = context.pauses.hasGivenUp(task.app)
        for item in pending {
            if campaign.options.dryRun {
                finals.add(item, campaign: task.campaign, state: .skipped, reason: "dry_run")
            } else if expired {
                finals.add(item, campaign: task.campaign, state: .expired, reason: Self.expiredReason)
            } else if givenUp {
                finals.add(item, campaign: task.campaign, state: .failed, reason: Self.credentialsReason)
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
        var unsent: [Pending] = []
        if !ready.isEmpty {
            let transmission = await transmit(ready, plan: plan)
            var delivered = false
            let pausesBefore = state.credentialFailures
            for (item, result) in transmission.sent {
                if case .response(.accepted) = result { delivered = true }
                try await classify(item, result, plan: plan, finals: &finals, state: &state)
            }
            // Credentials work again only if nothing in this round said otherwise.
            if delivered && state.credentialFailures == pausesBefore { context.pauses.recovered(task.app) }
            for item in transmission.expired { finals.add(item, campaign: task.campaign, state: .expired, reason: Self.expiredReason) }
            for item in transmission.givenUp { finals.add(item, campaign: task.campaign, state: .failed, reason: Self.credentialsReason) }
            unsent = transmission.unsent
        }
        // Answers first: they are what a resend would cost.
        try await record(finals, state: &state)
        context.progress.touch(campaign: task.campaign, app: task.app)
        if !unsent.isEmpty {
            // Cancelled between batches: these were never sent; give them back.
            try await context.store.ledger.release(campaign: task.campaign, owner: context.workerID, rowKeys: unsent.map(\.target.rowKey))
            throw CancellationError()
        }
    }

    static let expiredReason = "expired before sending"
    static let credentialsReason = "credentials"

    /// True once the campaign's `apns-expiration` has passed: no request may start after it.
    /// `0` means now or never, which APNs handles on its side.
    private func hasExpired(_ campaign: Campaign) -> Bool {
        guard let expiration = campaign.options.expiration, expiration > 0 else { return false }
        return Date().timeIntervalSince1970 >= Double(expiration)
    }

    private func record(_ finals: Finals, state: inout TaskState) async throws {
        guard !finals.ledger.isEmpty else { return }
        try await untilStored { try await context.store.ledger.record(campaign: task.campaign, finals.ledger) }
        if !finals.marks.isEmpty { try await untilStored { try await context.store.devices.applyHygiene(app: task.app, finals.marks) } }
        if let ticket = try await context.writer.devices(finals.results) { state.tickets.append(ticket) }
    }

    /// Runs a store write again while the store is unavailable, until the task is stopped:
    /// the APNs answers it records are in hand, and restarting the task would buy them again
    /// with a second send.
    @discardableResult
    private func untilStored<T>(_ write: () async throws -> T) async throws -> T {
        var backoff = Backoff(first: .milliseconds(250), longest: .seconds(5))
        while true {
            do {
                return try await write()
            } catch let error as StoreError where error.isUnavailable {
                let delay = backoff.next()
                context.logger.warning("task.store_retry", [
                    "campaign.id": task.campaign, "task.shard": String(task.shard), "error": error.description, "retry_in_ms": String(delay.milliseconds),
                ])
                try await Task.sleep(for: delay)
            }
        }
    }

    /// What became of the notifications handed to `transmit`.
    struct Transmission {
        var sent: [(Pending, APNsSendResult)] = []
        /// Not sent: the task was cancelled.
        var unsent: [Pending] = []
        /// Not sent: the expiration passed first.
        var expired: [Pending] = []
        /// Not sent: the app's credentials have failed past the limit.
        var givenUp: [Pending] = []
    }

    /// Sends in rate-sized batches, several in flight, while the lane's circuit lets it.
    /// Each batch is checked against the expiration just before it starts.
    private func transmit(_ ready: [(Pending, APNsNotification)], plan: CampaignPlan) async -> Transmission {
        let lane = LaneKey.app(task.app, lane: task.lane)
        let laneRate = Double(plan.app.ratePerSecond) / Double(task.lanes)
        let appBucket = context.rates.bucket(lane, rate: laneRate)
        var campaignBucket: TokenBucket?
        if let rate = plan.campaign.options.rate, rate < plan.app.ratePerSecond {
            campaignBucket = context.rates.bucket(.campaign(task.campaign, lane: task.lane), rate: Double(rate) / Double(task.lanes))
        }
        var transmission = Transmission()
        var index = 0
        var stop: WritableKeyPath<Transmission, [Pending]>?
        await withTaskGroup(of: [(Pending, APNsSendResult)].self) { group in
            var running = 0
            while index < ready.count {
                do {
                    if context.pauses.hasGivenUp(task.app) {
                        stop = \.givenUp
                        break
                    }
                    if let resume = context.pauses.resumeAt(task.app) { try await Task.sleep(until: resume, clock: .continuous) }
                    var granted = ready.count - index
                    var probe = false
                    switch context.circuits.admit(lane) {
                    case .wait(let until):
                        if hasExpired(plan.campaign) {
                            stop = \.expired
                            break
                        }
                        try await Task.sleep(until: until, clock: .continuous)
                        continue
                    case .send(let limit):
                        if let limit {
                            granted = min(granted, limit)
                            probe = true
                        }
                    }
                    if stop != nil { break }
                    if let campaignBucket { granted = try await campaignBucket.acquire(upTo: granted) }
                    granted = campaignBucket == nil ? try await appBucket.acquire(upTo: granted) : try await appBucket.acquire(exactly: granted)
                    if running >= context.batchesInFlight, let done = await group.next() {
                        transmission.sent += done
                        running -= 1
                    }
                    if hasExpired(plan.campaign) {
                        stop = \.expired
                        break
                    }
                    let chunk = Array(ready[index..<index + granted])
                    index += granted
                    // One client per environment; a chunk mixing them is split.
                    let groups = Dictionary(grouping: chunk, by: { $0.0.target.environment })
                    let catalog = context.catalog
                    let circuits = context.circuits
                    let app = plan.app
                    let isProbe = probe
                    group.addTask {
                        var results: [(Pending, APNsSendResult)] = []
                        for (environment, members) in groups {
                            do {
                                let client = try catalog.client(for: app, environment: environment)
                                let answers = await client.send(batch: members.map(\.1))
                                circuits.record(lane, answers, probe: isProbe)
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
                    stop = \.unsent
                    break
                }
            }
            for await done in group { transmission.sent += done }
        }
        if let stop { transmission[keyPath: stop] = ready[index...].map(\.0) }
        return transmission
    }

    /// Performs what the decider makes of one APNs answer: a final outcome (with token
    /// hygiene), a retry, the app's pause, or a hand-back.
    private func classify(_ item: Pending, _ result: APNsSendResult, plan: CampaignPlan, finals: inout Finals, state: inout TaskState) async throws {
        var item = item
        let now = Date()
        item.attempts += 1
        let firstAttemptAt = item.firstAttemptAt ?? now
        item.firstAttemptAt = firstAttemptAt
        let decision = context.decider.decide(
            result, attempt: item.attempts, expiration: APNsNotification.Expiration(epochSeconds: plan.campaign.options.expiration),
            firstAttemptAt: firstAttemptAt, now: now)
        switch decision {
        case .final(let final):
            finals.add(item, campaign: task.campaign, state: final.state, status: final.status, reason: final.reason, apnsID: final.apnsID)
            if let hygiene = final.hygiene { finals.marks.append(Self.mark(item.target, hygiene, reason: final.reason ?? "")) }
        case .retry(let after):
            item.notBefore = ContinuousClock.now + after
            state.retries.append(item)
        case .pauseApp(let reason):
            try await pauseForCredentials(item, reason: reason, finals: &finals, state: &state)
        case .handBack:
            // Shutting down: never sent; it stays claimed for the next owner.
            item.attempts -= 1
            state.retries.append(item)
        }
    }

    /// Not the device's fault: the attempt does not count, and the device waits with its
    /// app, unless the credentials have failed past the limit. The campaign's submitter is
    /// told of the pause with a `paused` event.
    private func pauseForCredentials(_ item: Pending, reason: String, finals: inout Finals, state: inout TaskState) async throws {
        var item = item
        item.attempts -= 1
        state.credentialFailures += 1
        let verdict = context.pauses.pause(task.app, campaign: task.campaign, for: context.credentialsPause, reason: reason)
        // Advisory, like progress: it must never cost the answers in hand, so a store or
        // Kafka problem only skips it.
        if verdict.announce, let event = try? await CampaignTotals.running(
            .paused, context.store, campaign: task.campaign, app: task.app,
            error: "the app's APNs credentials fail (\(reason)); sends resume by themselves once they work") {
            _ = try? await context.writer.campaign(event)
        }
        if verdict.giveUp {
            finals.add(item, campaign: task.campaign, state: .failed, reason: Self.credentialsReason)
            return
        }
        item.notBefore = ContinuousClock.now + context.credentialsPause
        state.retries.append(item)
    }

    /// The store's mark for a token APNs called bad: 410 invalidates the device unless it
    /// registered again after APNs' timestamp; a token APNs calls bad or not for the topic is
    /// invalidated in that environment.
    private static func mark(_ target: DeviceTarget, _ hygiene: DeliveryDecider.TokenHygiene, reason: String) -> TokenMark {
        switch hygiene {
        case .unregistered(let timestamp):
            TokenMark(environment: target.environment, token: target.token, kind: .unregistered(at: timestamp.map { epochMillis($0) } ?? epochMillis()), reason: reason)
        case .invalidate:
            TokenMark(environment: target.environment, token: target.token, kind: .invalid, reason: reason)
        }
    }

    /// Gives back what this task holds and stops.
    private func handBack(_ state: inout TaskState) async throws -> TaskEnd {
        let keys = state.retries.map(\.target.rowKey)
        try await context.store.ledger.release(campaign: task.campaign, owner: context.workerID, rowKeys: keys)
        _ = await ResultsWriter.delivered(state.tickets)
        return .handedBack
    }

    /// Marks the task finished; the worker that finishes a campaign's last task announces
    /// its completion (again, if this task is being re-processed after a crash).
    private func finish(plan: CampaignPlan) async throws {
        let finished = try await context.store.campaigns.finishTask(campaign: task.campaign, shard: task.shard)
        guard finished >= task.shards else { return }
        let changed = try await context.store.campaigns.transition(task.campaign, from: .running, to: .completed)
        let status = try await context.store.campaigns.get(task.campaign)?.status
        guard changed || status == .completed else { return }
        let event = try await CampaignTotals.completed(context.store, campaign: task.campaign, app: task.app)
        if let failure = await ResultsWriter.firstFailure([try await context.writer.campaign(event)]) {
            throw NotDelivered("the completed event of \(task.campaign)", cause: failure)
        }
        context.progress.forget(campaign: task.campaign)
        context.catalog.forget(campaign: task.campaign)
        if plan.campaign.options.rate != nil {
            for lane in 0..<task.lanes { context.rates.remove(.campaign(task.campaign, lane: lane)) }
        }
        if changed {
            context.logger.notice("campaign.completed", ["campaign.id": task.campaign, "audience": String(event.audience ?? 0)])
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
