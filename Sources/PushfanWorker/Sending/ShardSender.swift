import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// Everything the sender role shares across tasks.
package struct SenderContext: Sendable {
    package let workerID: String
    package let store: DeviceStore
    package let writer: ResultsWriter
    package let catalog: CampaignCatalog
    /// Where requests go: the catalog's APNs clients, or a test's stand-in.
    package let apns: any APNsConnector
    package let rates: RateLanes
    package let pauses: AppPauses
    package let circuits: LaneCircuits
    /// Operators' cancel, pause and resume, as this worker knows them.
    package let controls: CampaignControls
    package let progress: ProgressReporter
    package let settings: PushfanConfiguration.Worker
    package let logger: Logger
    /// The one clock of the worker's waits, retries, leases and expirations.
    package let clock: any ServiceClock
    /// How long an app pauses after a credentials failure.
    package var credentialsPause: Duration { .seconds(settings.credentialsPauseSeconds) }
    /// Turns each APNs answer into what happens to its device.
    package let decider: DeliveryDecider
    /// What this worker counts for Prometheus.
    package let metrics: WorkerMetrics
    /// Batches of one round in flight to APNs at once: enough that a stalled answer never
    /// keeps a page's later batches from starting.
    package var batchesInFlight = 64
    /// Who holds a task's claims in the ledger: the worker and the task record
    /// (`ShardSender` sets it per task).
    fileprivate(set) var ledgerOwner: String

    package init(
        workerID: String, store: DeviceStore, writer: ResultsWriter, catalog: CampaignCatalog, apns: (any APNsConnector)? = nil, rates: RateLanes,
        pauses: AppPauses, circuits: LaneCircuits, controls: CampaignControls, progress: ProgressReporter, settings: PushfanConfiguration.Worker,
        retryPolicy: RetryPolicy = RetryPolicy(), clock: any ServiceClock, metrics: WorkerMetrics = WorkerMetrics(), logger: Logger
    ) {
        self.workerID = workerID
        self.ledgerOwner = workerID
        self.store = store
        self.writer = writer
        self.catalog = catalog
        self.apns = apns ?? catalog
        self.rates = rates
        self.pauses = pauses
        self.circuits = circuits
        self.controls = controls
        self.progress = progress
        self.settings = settings
        self.decider = DeliveryDecider(retryPolicy: retryPolicy)
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    /// True once the campaign's `apns-expiration` has passed: no request may start after it.
    /// `0` means now or never, which APNs handles on its side.
    func hasExpired(_ campaign: Campaign) -> Bool {
        guard let expiration = campaign.options.expiration, expiration > 0 else { return false }
        return clock.wall.timeIntervalSince1970 >= Double(expiration)
    }

    /// How long a claim holds a device for this worker.
    var lease: Duration { .seconds(settings.leaseSeconds) }
    /// A batch whose claims have less than this left is renewed before it starts: its
    /// devices waited long for the rate, or the process was stopped.
    var renewBelow: Duration { lease / 2 }
    /// No request goes on a stream with less than this left of its claim: after the lease
    /// another worker may take the device over, and end it (cancelled, say) without a request.
    var leaseMargin: Duration { lease / 10 }
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

/// The sender role for one task: expands the shard page by page (`ShardPages`), claims the
/// devices in the ledger, hands what it owns to a `SendRound`, keeps the retries and the
/// devices another worker holds until their turn, and ends with `CampaignCompletion`.
package struct ShardSender: Sendable {
    let context: SenderContext
    let task: TaskRecord
    /// Called once every page of the task is on the wire (it may still wait for answers and
    /// retries): the scheduler then starts the lane's next task beside it.
    var lastPageSent: @Sendable () -> Void = {}

    /// `record`: where the task's record stands on its topic (`partition@offset`). The task's
    /// claims are the worker's and the record's: two tasks of one shard on this worker (a
    /// campaign planned again after its planner was stopped) hold their devices apart as two
    /// workers would, so neither sends what the other has on the wire or waiting for a
    /// retry; the same record run again (a restart under the same worker id) takes its own
    /// claims back at once.
    package init(context: SenderContext, task: TaskRecord, record: String) {
        var context = context
        context.ledgerOwner = "\(context.workerID)/\(record)"
        self.context = context
        self.task = task
    }

    /// A device waiting for its next attempt.
    struct Pending {
        var target: DeviceTarget
        var attempts: Int
        var firstAttemptAt: Date?
        var notBefore: ContinuousClock.Instant
        /// When this worker's claim on the device runs out (wall ms), as the ledger says.
        var leaseUntil: Int64

        /// A device just claimed, not yet attempted.
        init(claimed target: DeviceTarget, until leaseUntil: Int64, at now: ContinuousClock.Instant) {
            (self.target, attempts, firstAttemptAt, notBefore, self.leaseUntil) = (target, 0, nil, now, leaseUntil)
        }
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
                    "campaign.id": task.campaignKey.stored, "task.shard": String(task.shard), "error": "\(error)", "retry_in_ms": String(delay.milliseconds),
                ])
                do { try await context.clock.sleep(until: context.clock.now + delay) } catch { return .handedBack }
            }
        }
    }

    private func attempt() async throws -> TaskEnd {
        let plan = try await context.catalog.plan(campaign: task.campaignKey, decided: task.phase == .rest)
        try await waitForSendAt()
        var state = TaskState()
        do {
            try await expand(plan: plan, state: &state)
        } catch is CancellationError {
            return try await handBack(&state)
        }
        if let failure = await ResultsWriter.firstFailure(state.tickets) {
            throw NotDelivered("results of \(task.campaignKey) shard \(task.shard)", cause: failure)
        }
        state.tickets = []
        try await CampaignCompletion(context: context, task: task).finish(plan: plan)
        return .finished
    }

    /// Pages are pipelined, each claimed, sent and recorded batch by batch by a child task of
    /// its own: the next page is read and claimed while fewer than `pagesAhead` are on their
    /// way to APNs (`PagesOnTheWay`), so the lane's bucket always has a page ready, and earlier
    /// pages wait for their slowest answers (and store round trips) beside the sends of the
    /// later ones. At most `pages_in_flight` pages of a task are out at once. The lane's
    /// rate bucket, shared by all of them, keeps the rate. Once every page is on the wire the
    /// scheduler may start the lane's next task (`lastPageSent`).
    private func expand(plan: CampaignPlan, state: inout TaskState) async throws {
        var pages = ShardPages(store: context.store, plan: plan, task: task, pageSize: context.settings.pageSize)
        defer { pages.cancel() }
        let limit = context.settings.pagesInFlight
        let onTheWay = PagesOnTheWay()
        var failure: (any Error)?
        await withTaskGroup(of: PageRun.self) { group in
            var flying = 0
            do {
                while let page = try await pages.nextPage() {
                    try Task.checkCancellation()
                    try await obeyControls(state: &state)
                    if !page.isEmpty {
                        if flying >= limit, let done = await group.next() {
                            flying -= 1
                            try state.absorb(done)
                        }
                        let child = state.forPage(onTheWay.add())
                        group.addTask { await self.sendPage(page, plan: plan, state: child) }
                        flying += 1
                        try await onTheWay.wait(below: Self.pagesAhead)
                    }
                    try await sendDueRetries(plan: plan, state: &state, waitForAll: false)
                }
                try await onTheWay.wait(below: 1)
                lastPageSent()
            } catch {
                failure = error
            }
            // Every page in flight ends and is merged, even after a failure: what they hold
            // must be released or recorded with the rest.
            for await done in group {
                do { try state.absorb(done) } catch { failure = failure ?? error }
            }
        }
        if let failure { throw failure }
        // Pages done: what remains are retries and devices another worker still holds.
        while !state.retries.isEmpty || !state.held.isEmpty {
            try Task.checkCancellation()
            try await obeyControls(state: &state)
            if !state.held.isEmpty {
                let held = state.held
                state.held = []
                try await claimAndSend(held, plan: plan, state: &state)
            }
            try await sendDueRetries(plan: plan, state: &state, waitForAll: true)
            if !state.held.isEmpty && state.retries.isEmpty { try await context.clock.sleep(until: context.clock.now + .seconds(1)) }
        }
    }

    /// Pages of a task claimed and not yet wholly on the wire, at most: enough that the
    /// lane's bucket always has requests ready while the next claims are in the store.
    static let pagesAhead = 4

    /// What one page's child task ends with: its part of the task's state, and the error
    /// that stopped it, if any.
    struct PageRun: Sendable {
        var state: TaskState
        var error: (any Error)?
    }

    private func sendPage(_ page: [DeviceTarget], plan: CampaignPlan, state: TaskState) async -> PageRun {
        var state = state
        defer { state.page?.handed() }
        do {
            try await claimAndSend(page, plan: plan, state: &state)
            return PageRun(state: state)
        } catch {
            return PageRun(state: state, error: error)
        }
    }

    struct TaskState {
        var retries: [Pending] = []
        var held: [DeviceTarget] = []
        var tickets: [DeliveryTicket] = []
        /// The page a page's child task sends (nil for the task's own retry rounds): it
        /// tells the task when the page is on the wire.
        var page: PagesOnTheWay.Page?
        /// Answers that were credentials failures, so far.
        var credentialFailures = 0
        /// Devices' time zones, for quiet hours and frequency caps' calendar days.
        var zones = DeviceZones()
        /// Payloads by device locale: built and checked once, not once per device.
        var payloads: [String: Result<APNsPreparedPayload, APNsRequestError>] = [:]

        /// Devices to claim again before they are sent: kept while the campaign is paused (due
        /// as soon as it resumes), or whose claim ran short before they went on a stream. The
        /// retry pass claims them again first, renewing the lease and giving way to any owner
        /// that took them over.
        mutating func claimAgain(_ items: [Pending], now: ContinuousClock.Instant) {
            for var item in items {
                item.notBefore = now
                retries.append(item)
            }
        }

        /// A page's own state, to be sent beside the others: the task's caches, none of its
        /// devices.
        func forPage(_ onTheWay: PagesOnTheWay.Page) -> TaskState {
            var page = self
            page.retries = []
            page.held = []
            page.tickets = []
            page.credentialFailures = 0
            page.page = onTheWay
            return page
        }

        /// Takes back a page's devices, tickets and caches; throws the error that stopped it.
        mutating func absorb(_ run: PageRun) throws {
            let page = run.state
            retries += page.retries
            held += page.held
            tickets += page.tickets
            credentialFailures += page.credentialFailures
            payloads.merge(page.payloads) { mine, _ in mine }
            variantCampaigns.merge(page.variantCampaigns) { mine, _ in mine }
            zones = page.zones
            templates = page.templates
            if let error = run.error { throw error }
        }

        /// Personalised texts, parsed once per task.
        var templates = TemplateCache()
        /// The campaign as each variant's devices get it, made once per task.
        var variantCampaigns: [Int: Campaign] = [:]
        /// The campaign's send ids, made ready once per task (and per page: pages start from a
        /// copy made before, and do not hand it back).
        var sendIDs: EngagementMarker.SendIDs?

        /// The payload for a device in its variant (`variant`: an index of
        /// `campaign.variants`, nil for the notification as given), its engagement marker
        /// carrying the device's send id: built once per locale and stamped per device, or,
        /// for a personalised campaign, rendered for the device.
        mutating func payload(for target: DeviceTarget, variant: Int?, plan: CampaignPlan) throws(APNsRequestError) -> APNsPreparedPayload {
            let campaign = plan.campaign
            let locale = target.locale
            var sent = campaign
            if let variant {
                sent = variantCampaigns[variant] ?? campaign.applying(variant: variant)
                variantCampaigns[variant] = sent
            }
            // Made only when a payload is built, not for each device a cached one serves.
            func marker() -> EngagementMarker {
                let variantID = variant.map { campaign.variants[$0].id }
                let notificare = plan.notificare ? NotificareMarker(application: campaign.app, campaign: campaign.id, variant: variantID) : nil
                return EngagementMarker(campaign: campaign.id, variant: variantID, notificare: notificare)
            }
            let sendIDs = self.sendIDs ?? EngagementMarker.SendIDs(campaign.key)
            self.sendIDs = sendIDs
            let sendID = sendIDs.sendID(device: target.deviceID)
            if plan.personalised {
                sent.notification = sent.notification.personalised(for: target.templateDevice, locale: locale, templates: &templates)
                return try APNsPreparedPayload(campaign: sent, locale: locale, marker: marker()).stamped(sendID: sendID)
            }
            let key = variant.map { "\($0)|\(locale ?? "")" } ?? locale ?? ""
            if let known = payloads[key] { return try known.get().stamped(sendID: sendID) }
            let made = Result { () throws(APNsRequestError) -> APNsPreparedPayload in try APNsPreparedPayload(campaign: sent, locale: locale, marker: marker()) }
            payloads[key] = made
            return try made.get().stamped(sendID: sendID)
        }
    }

    /// A scheduled campaign's task arrives before its `send_at` (the dispatcher produces it
    /// early): it waits for the moment, unless the campaign is cancelled meanwhile. The tasks
    /// that start a lane's part of a wave (they waited, or are shards `0 ..< lanes`; the later
    /// ones queue behind them) log how late they started (`task.scheduled_start`, `late_ms`):
    /// the schedule's own precision.
    private func waitForSendAt() async throws {
        guard let notBefore = task.notBefore else { return }
        var waited = false
        while context.clock.wallMillis < notBefore, try await context.controls.refresh(task.campaignKey) != .cancelled {
            let left = Duration.milliseconds(notBefore - context.clock.wallMillis)
            try await context.clock.sleep(until: context.clock.now + min(left, .milliseconds(200)))
            waited = true
        }
        guard waited || task.shard < task.lanes else { return }
        context.logger.info("task.scheduled_start", [
            "campaign.id": task.campaignKey.stored, "task.shard": String(task.shard), "task.lane": String(task.lane),
            "late_ms": String(context.clock.wallMillis - notBefore),
        ])
    }

    /// An operator's command, as the store or a control record says: while the campaign is
    /// paused the task waits here, its devices still claimed; once it is cancelled every
    /// waiting retry is due now, so the next round ends it `cancelled` without a request.
    private func obeyControls(state: inout TaskState) async throws {
        // Paused, or parked again (a parked campaign resumed while its tasks were being
        // made): wait, reading the store now and then, rather than claiming again and again.
        while Self.waits(try await context.controls.refresh(task.campaignKey)) {
            try await context.clock.sleep(until: context.clock.now + .milliseconds(100))
        }
        if context.controls.current(task.campaignKey) == .cancelled {
            let now = context.clock.now
            for index in state.retries.indices { state.retries[index].notBefore = now }
        }
    }

    /// Claims a page and sends what this worker now owns. Devices already final get their
    /// result produced again from the ledger (the previous owner may have crashed before
    /// producing it); devices another live worker holds are kept to claim again later.
    private func claimAndSend(_ targets: [DeviceTarget], plan: CampaignPlan, state: inout TaskState) async throws {
        let now = context.clock.wallMillis
        let claim = try await context.store.ledger.claim(
            campaign: task.campaignKey, targets: targets, owner: context.ledgerOwner, lease: context.lease, now: now,
            admitting: plan.capped ? admission(targets, plan: plan, now: now, state: &state) : nil)
        let round = SendRound(context: context, task: task, plan: plan)
        // The usual case: every device of the page is newly ours.
        if claim.toSend.count != targets.count {
            let owned = Set(claim.toSend.map(\.rowKey))
            let finalKeys = claim.alreadyFinal > 0 ? try await reemitFinished(targets, plan: plan, state: &state) : []
            state.held += targets.filter { !owned.contains($0.rowKey) && !finalKeys.contains($0.rowKey) }
        }
        var owned = claim.toSend
        if !claim.capped.isEmpty {
            let capped = owned.filter { claim.capped.contains($0.rowKey) }
            owned.removeAll { claim.capped.contains($0.rowKey) }
            try await round.end(capped.map { Pending(claimed: $0, until: claim.leaseUntil, at: context.clock.now) },
                                as: .skipped, reason: Campaign.frequencyCapReason, state: &state)
        }
        if holdsQuiet(plan), owned.contains(where: { $0.quietHours != nil }) {
            // The holdout gets no push: it is decided now, not after its quiet hours (one share
            // per device: it hashes the device's id).
            var (holdout, rest): ([DeviceTarget], [DeviceTarget]) = ([], [])
            for device in owned {
                if plan.campaign.share(of: device.deviceID) == .holdout { holdout.append(device) } else { rest.append(device) }
            }
            owned = try await holdout + holdQuiet(rest, plan: plan, round: round, now: now, leaseUntil: claim.leaseUntil, state: &state)
        }
        let start = context.clock.now
        try await round.send(owned.map { Pending(claimed: $0, until: claim.leaseUntil, at: start) }, state: &state)
    }

    /// Frequency caps, checked in the claim's transaction: the page's devices that would be
    /// sent now are admitted (counted) in the store, across every worker and campaign, and a
    /// device that one more push would take over one of its app's caps ends `skipped`,
    /// reason `frequency_cap`. Held-out devices receive nothing and devices inside their
    /// quiet hours are sent later (claimed again then), so neither is a candidate now.
    private func admission(_ targets: [DeviceTarget], plan: CampaignPlan, now: Int64, state: inout TaskState) -> FrequencyLedger.Admission {
        let campaign = plan.campaign
        let quiet = holdsQuiet(plan)
        var candidates: [Int64: TimeZone] = [:]
        for target in targets where campaign.share(of: target.deviceID) != .holdout {
            let zone = state.zones.zone(of: target, defaultZone: plan.app.defaultZone)
            if quiet, let hours = target.quietHours, hours.end(containing: now, in: zone) != nil { continue }
            candidates[target.rowKey] = zone
        }
        return FrequencyLedger.Admission(app: task.app, caps: plan.app.frequencyCaps, candidates: candidates)
    }

    /// Whether devices in their quiet hours wait for the hours' end: only where they would
    /// get a push then. A zone skipped under `late: skip`, a dry run, a cancelled or an
    /// expired campaign decides its devices now (`SendRound`), not hours later.
    private func holdsQuiet(_ plan: CampaignPlan) -> Bool {
        QuietHold.applies(to: plan.campaign) && task.skip == nil && !plan.campaign.options.dryRun && !context.hasExpired(plan.campaign)
            && context.controls.current(task.campaignKey) != .cancelled
    }

    /// Quiet hours: the owned devices inside their window are parked in the store as a hold
    /// (one more shard of the campaign, dispatched when the window ends) and their claims let
    /// go; those whose window outlasts the expiration end `expired`. Returns the rest.
    /// `now` and `leaseUntil`: the claim's, so the split agrees with what the claim admitted
    /// under the caps.
    private func holdQuiet(
        _ owned: [DeviceTarget], plan: CampaignPlan, round: SendRound, now: Int64, leaseUntil: Int64, state: inout TaskState
    ) async throws -> [DeviceTarget] {
        let split = QuietHold.split(
            owned, now: now, defaultZone: plan.app.defaultZone, expiration: plan.campaign.options.expiration, zones: &state.zones)
        for (until, devices) in split.held.sorted(by: { $0.key < $1.key }) {
            let keys = devices.map(\.rowKey)
            // The same page held again (its task re-run) is the same hold.
            let shard = try await context.store.waves.hold(
                campaign: task.campaignKey, key: "quiet-\(task.shard)-\(keys[0])-\(until)", sendAt: until, lane: task.lane, rowKeys: keys)
            try await context.store.ledger.release(campaign: task.campaignKey, owner: context.ledgerOwner, rowKeys: keys)
            context.logger.info("quiet.held", [
                "campaign.id": task.campaignKey.stored, "task.shard": String(task.shard), "devices": String(keys.count), "until": String(until), "hold.shard": String(shard),
            ])
        }
        if !split.expired.isEmpty {
            try await round.end(split.expired.map { Pending(claimed: $0, until: leaseUntil, at: context.clock.now) },
                                as: .expired, reason: QuietHold.expiredReason, state: &state)
        }
        return split.send
    }

    /// Produces again the results of the page's devices that are final in the ledger;
    /// returns their row keys.
    private func reemitFinished(_ targets: [DeviceTarget], plan: CampaignPlan, state: inout TaskState) async throws -> Set<Int64> {
        let finished = try await OutcomeRecorder(context: context, task: task).ledgerResults(
            targets.map(\.rowKey), campaign: plan.campaign, broadcast: plan.channel != nil)
        if let ticket = try await context.writer.devices(finished.map(\.result)) { state.tickets.append(ticket) }
        return Set(finished.map(\.rowKey))
    }

    /// Whether a task waits in this status: paused, or parked (`scheduled`). A completed
    /// campaign's task runs on (a task run again produces its results again); a cancelled
    /// one's ends its devices.
    static func waits(_ status: CampaignStatus?) -> Bool {
        status == .paused || status == .scheduled
    }

    private func sendDueRetries(plan: CampaignPlan, state: inout TaskState, waitForAll: Bool) async throws {
        // Waiting (paused…): the caller waits in `obeyControls`; claiming again now would only spin.
        while !state.retries.isEmpty && !Self.waits(context.controls.current(task.campaignKey)) {
            let now = context.clock.now
            let due = state.retries.filter { $0.notBefore <= now }
            if due.isEmpty {
                guard waitForAll else { return }
                let next = state.retries.map(\.notBefore).min() ?? now
                try await context.clock.sleep(until: min(next, now + .seconds(1)))
                // Held devices, or an operator's command, are the caller's to handle first.
                if !state.held.isEmpty || context.controls.current(task.campaignKey)?.sends == false { return }
                continue
            }
            state.retries.removeAll { $0.notBefore <= now }
            // Claim again: renews the lease, and tells if another worker took a device over.
            let claim = try await context.store.ledger.claim(
                campaign: task.campaignKey, targets: due.map(\.target), owner: context.ledgerOwner, lease: context.lease, now: context.clock.wallMillis)
            let owned = Set(claim.toSend.map(\.rowKey))
            // Taken over by another worker meanwhile: the task waits for their outcomes.
            if claim.toSend.count != due.count { state.held += due.filter { !owned.contains($0.target.rowKey) }.map(\.target) }
            let mine = due.filter { owned.contains($0.target.rowKey) }.map { item in
                var item = item
                item.leaseUntil = claim.leaseUntil
                return item
            }
            try await SendRound(context: context, task: task, plan: plan).send(mine, state: &state)
            if !waitForAll { return }
        }
    }

    /// Gives back what this task holds and stops.
    private func handBack(_ state: inout TaskState) async throws -> TaskEnd {
        let keys = state.retries.map(\.target.rowKey)
        try await context.store.ledger.release(campaign: task.campaignKey, owner: context.ledgerOwner, rowKeys: keys)
        _ = await ResultsWriter.delivered(state.tickets)
        return .handedBack
    }
}
