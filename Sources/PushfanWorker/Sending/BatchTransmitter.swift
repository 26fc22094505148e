import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanStore
import PushfanSupport

/// Hands one round's requests to APNs in rate-sized batches, several in flight, while the
/// operator's controls, the lane's circuit, the app's credentials and the campaign's
/// expiration allow. Each batch's answers go to the caller as soon as the batch is answered
/// (so they are recorded behind the sends, not after the round's slowest answer); what it
/// does not send it gives back, sorted by why.
struct BatchTransmitter {
    /// One answered batch: each request's device, APNs' answer and when it came (the
    /// outcome's time in its result).
    typealias Answers = [(ShardSender.Pending, APNsSendResult, answeredAt: Date)]

    /// A sent batch: its answers, and the requests the pool gave back unsent because an
    /// operator's pause or cancel came while they waited for a stream, or their claims ran
    /// short.
    struct BatchAnswers: Sendable {
        var answers: Answers = []
        var withdrawn: [ShardSender.Pending] = []
        var lapsed: [ShardSender.Pending] = []
    }

    /// What became of the requests handed to `transmit` that were not sent.
    struct Transmission {
        /// Not sent: the task was cancelled, or the caller could not take answers.
        var unsent: [ShardSender.Pending] = []
        /// Not sent: the expiration passed first.
        var expired: [ShardSender.Pending] = []
        /// Not sent: the app's credentials have failed past the limit.
        var givenUp: [ShardSender.Pending] = []
        /// Not sent: an operator cancelled the campaign.
        var cancelled: [ShardSender.Pending] = []
        /// Not sent: an operator paused the campaign; they wait for the resume.
        var paused: [ShardSender.Pending] = []
        /// Not sent: their claims ran short before they went on a stream (or could not be
        /// renewed); to be claimed again first.
        var lapsed: [ShardSender.Pending] = []
        /// Not sent: another owner took them over (or ended them) while their lease ran out.
        var takenOver: [ShardSender.Pending] = []
    }

    let context: SenderContext
    let task: TaskRecord
    let plan: CampaignPlan

    private var lane: LaneKey { .app(task.app, lane: task.lane) }

    /// Sends `ready` in order. Each batch takes its budget from the campaign's bucket (when
    /// the campaign has its own lower rate) and the app lane's, and is checked against the
    /// operator's controls and the expiration just before it starts: a cancel or pause read
    /// from the control topic stops the next batch, and the pool withdraws the requests of
    /// batches already handed to it that are not on a stream yet, so no request starts after it.
    ///
    /// `answered` takes each batch's answers in the caller's task, one batch at a time, while
    /// later batches are on the wire: those answered by the time the next batch is about to
    /// wait (for a pause, the circuit or the rate), and one whenever `batchesInFlight` are
    /// out. It returns false when it cannot
    /// take more (recording failed), and no further batch starts. Batches already sent are
    /// still handed to it.
    /// `page` (a pipelined page's) is told of each batch handed to the client, of each
    /// batch the client has wholly started, and when no further batch will start.
    ///
    /// No request starts on a claim that has run out, or nearly (`SenderContext.leaseMargin`):
    /// a batch whose claims have less than half the lease left renews them first, and the pool
    /// withdraws a request whose claim runs short while it waits for a stream. So a worker
    /// stopped past its lease (SIGSTOP, a long pause of the machine) and then continued does
    /// not send a device another worker took over, and perhaps ended `cancelled` unsent, as
    /// long as the hosts' clocks agree within the margin (the other worker reads the lease on
    /// its own clock) and the stop did not fall between the pool's check and the socket write.
    func transmit(
        _ ready: [(ShardSender.Pending, APNsNotification)], page: PagesOnTheWay.Page? = nil, answered: (Answers) async -> Bool
    ) async -> Transmission {
        var ready = ready
        let appBucket = context.rates.bucket(lane, rate: Double(plan.app.ratePerSecond) / Double(task.lanes))
        var campaignBucket: TokenBucket?
        if let rate = plan.campaign.options.rate, rate < plan.app.ratePerSecond {
            campaignBucket = context.rates.bucket(.campaign(task.campaignKey, lane: task.lane), rate: Double(rate) / Double(task.lanes))
        }
        var transmission = Transmission()
        var index = 0
        var stop: WritableKeyPath<Transmission, [ShardSender.Pending]>?
        /// The batch before: the next one's tokens wait for it to be on streams (`BatchStart`).
        var previous: BatchStart?
        var withdrawn: [ShardSender.Pending] = []
        var lapsed: [ShardSender.Pending] = []
        /// Batches whose answers are all in, told by the batches themselves: those the group
        /// has beyond `taken` are handed over without waiting.
        let answeredBatches = Locked(0)
        await withTaskGroup(of: BatchAnswers.self) { group in
            var running = 0
            var taken = 0
            /// Hands an answered batch to `answered`; false when it can take no more.
            func take(_ done: BatchAnswers) async -> Bool {
                running -= 1
                taken += 1
                withdrawn += done.withdrawn
                lapsed += done.lapsed
                return await answered(done.answers)
            }
            sending: while index < ready.count {
                do {
                    // What is answered is recorded now, before any wait (the app's
                    // credentials pause, the circuit, the rate), not once `batchesInFlight` are out: at a
                    // low rate a round holds many batches, and an answered batch not yet
                    // recorded is what a crash would send again.
                    while answeredBatches.withLock({ $0 }) > taken, let done = await group.next() {
                        guard await take(done) else {
                            stop = \.unsent
                            break sending
                        }
                    }
                    if let held = controlled() {
                        stop = held
                        break
                    }
                    if context.pauses.hasGivenUp(task.app) {
                        stop = \.givenUp
                        break
                    }
                    if let resume = context.pauses.resumeAt(task.app) { try await context.clock.sleep(until: resume) }
                    var granted = ready.count - index
                    var probe = false
                    var launched = false
                    // A probe granted but not sent (the round stops, its claims were taken
                    // over): the lane may probe again at once, not after the probe's timeout.
                    defer { if probe && !launched { context.circuits.probeNotSent(lane) } }
                    switch context.circuits.admit(lane) {
                    case .wait(let until):
                        if context.hasExpired(plan.campaign) {
                            stop = \.expired
                            break sending
                        }
                        try await context.clock.sleep(until: until)
                        continue
                    case .send(let limit):
                        if let limit {
                            granted = min(granted, limit)
                            probe = true
                        }
                    }
                    if let previous { await previous.wait(atMost: Self.startWait, clock: context.clock) }
                    let waitStarted = context.clock.now
                    if let campaignBucket { granted = try await campaignBucket.acquire(upTo: granted) }
                    granted =
                        if campaignBucket == nil {
                            try await appBucket.acquire(upTo: granted, ahead: task.transactional)
                        } else {
                            try await appBucket.acquire(exactly: granted)
                        }
                    context.metrics.rateLimitWait.add((context.clock.now - waitStarted).seconds, [task.app])
                    if running >= context.batchesInFlight, let done = await group.next() {
                        guard await take(done) else {
                            stop = \.unsent
                            break
                        }
                    }
                    do {
                        transmission.takenOver += try await renewShortClaims(&ready, from: index, next: granted)
                    } catch {
                        // The store did not answer: the claims cannot be vouched for, so the
                        // rest waits to be claimed again (the retry pass meets the store's error).
                        context.logger.warning("task.lease_renewal_failed", ["campaign.id": task.campaignKey.stored, "error": "\(error)"])
                        stop = \.lapsed
                        break
                    }
                    granted = min(granted, ready.count - index)
                    guard granted > 0 else { continue }
                    if let held = controlled() {
                        stop = held
                        break
                    }
                    if context.hasExpired(plan.campaign) {
                        stop = \.expired
                        break
                    }
                    let batch = Array(ready[index..<index + granted])
                    index += granted
                    let (send, start) = sendBatch(batch, probe: probe, page: page)
                    previous = start
                    group.addTask {
                        let answers = await send()
                        answeredBatches.withLock { $0 += 1 }
                        return answers
                    }
                    running += 1
                    launched = true
                } catch {
                    stop = \.unsent
                    break
                }
            }
            // Nothing more starts: once the client has started what it holds, the page is on
            // the wire and its next one may be claimed.
            page?.allLaunched()
            while let done = await group.next() { _ = await take(done) }
        }
        if let stop { transmission[keyPath: stop] += ready[index...].map(\.0) }
        transmission.lapsed += lapsed
        if !withdrawn.isEmpty {
            // Withdrawn by a cancel, or by a pause (they wait for the resume, as unsent ones do).
            if context.controls.current(task.campaignKey) == .cancelled {
                transmission.cancelled += withdrawn
            } else {
                transmission.paused += withdrawn
            }
            context.controls.obeyed(task.campaignKey)
        }
        return transmission
    }

    /// Renews the round's claims when those of the next `next` requests run short: those
    /// handed over but not yet recorded too (answers wait for a few batches in flight before
    /// they are recorded). Returns, removed from `ready`, the requests not yet handed over
    /// that are no longer this worker's. The campaign's status is read from the store too: a
    /// worker stopped this long may have missed an operator's record (its control consumer
    /// is still rejoining its group), and the store has the command. Throws the store's error.
    private func renewShortClaims(
        _ ready: inout [(ShardSender.Pending, APNsNotification)], from index: Int, next: Int
    ) async throws(StoreError) -> [ShardSender.Pending] {
        let now = context.clock.wallMillis
        guard Self.soonestLease(ready[index..<index + next]) - now < context.renewBelow.milliseconds else { return [] }
        let rest = ready[index...]
        let kept = try await context.store.ledger.renew(
            campaign: task.campaignKey, owner: context.ledgerOwner, rowKeys: ready.map(\.0.target.rowKey), lease: context.lease, now: now)
        // Before `ready` changes: if the store fails here, the whole rest is claimed again.
        _ = try await context.controls.refresh(task.campaignKey)
        let leaseUntil = now + context.lease.milliseconds
        var mine: [(ShardSender.Pending, APNsNotification)] = []
        var lost: [ShardSender.Pending] = []
        for (item, notification) in rest {
            if kept.contains(item.target.rowKey) {
                var item = item
                item.leaseUntil = leaseUntil
                mine.append((item, notification))
            } else {
                lost.append(item)
            }
        }
        ready.replaceSubrange(index..., with: mine)
        return lost
    }

    /// When the first of `requests`' claims runs out (wall ms; `.max` for none). Reads the
    /// field in place: a key path over the tuples copied each request (a retain and release
    /// of every reference in it), a measurable cost per device at 0 ms answers.
    private static func soonestLease(_ requests: ArraySlice<(ShardSender.Pending, APNsNotification)>) -> Int64 {
        var soonest = Int64.max
        for index in requests.indices { soonest = min(soonest, requests[index].0.leaseUntil) }
        return soonest
    }

    /// Where the rest goes when an operator's command stops the campaign; nil to go on (and
    /// the batch about to start is counted as this worker's latest for the campaign).
    private func controlled() -> WritableKeyPath<Transmission, [ShardSender.Pending]>? {
        guard let status = context.controls.statusStopping(batchOf: task.campaignKey) else { return nil }
        context.controls.obeyed(task.campaignKey)
        return status == .cancelled ? \.cancelled : \.paused
    }

    /// The longest the next batch's tokens wait for the one before to be on streams.
    static let startWait = Duration.milliseconds(250)

    /// One batch's work, to run in the group: one client per environment (a batch mixing
    /// them is split); the answers feed the lane's circuit. The client tells the page and
    /// the returned `BatchStart` when each part is wholly on streams.
    private func sendBatch(
        _ batch: [(ShardSender.Pending, APNsNotification)], probe: Bool, page: PagesOnTheWay.Page?
    ) -> (@Sendable () async -> BatchAnswers, BatchStart) {
        let groups = Dictionary(grouping: batch, by: { $0.0.target.environment })
        for _ in groups { page?.batchLaunched() }
        let start = BatchStart(parts: groups.count)
        let started: @Sendable () -> Void = {
            page?.batchStarted()
            start.partStarted()
        }
        let (apns, circuits, app, lane, clock, ahead) = (context.apns, context.circuits, plan.app, lane, context.clock, task.transactional)
        let (controls, campaign) = (context.controls, task.campaignKey)
        // The last moment a request of the batch may go on a stream: its claim then still has
        // the margin left.
        let startBy = Self.soonestLease(batch[...]) - context.leaseMargin.milliseconds
        let lapsed: @Sendable () -> Bool = { clock.wallMillis >= startBy }
        // The rule `controlled()` applies before each batch, asked again before each request.
        let withdrawn: @Sendable () -> Bool = { (controls.current(campaign).map { !$0.sends } ?? false) || lapsed() }
        // The environments' sends go out together: one after another, the second would wait
        // for the first one's slowest answer before it even started.
        let send: @Sendable () async -> BatchAnswers = {
            await withTaskGroup(of: BatchAnswers.self) { sends in
                for (environment, members) in groups {
                    sends.addTask {
                        do {
                            let requests = try apns.requests(for: app, environment: environment)
                            let answers = await requests.send(batch: members.map(\.1), started: started, ahead: ahead, withdrawn: withdrawn)
                            // The batch's answer time, not the round's end: results' `at` then
                            // follow the sends (a round holds many batches over a second or more).
                            let answeredAt = clock.wall
                            var part = BatchAnswers()
                            let claimsRanShort = lapsed()
                            for (member, answer) in zip(members, answers) {
                                if case .failed(let failure) = answer, failure.cause == .withdrawn {
                                    // A claim run short goes first: claimed again, the device
                                    // meets the cancel or pause in its next round if still ours.
                                    if claimsRanShort { part.lapsed.append(member.0) } else { part.withdrawn.append(member.0) }
                                } else {
                                    part.answers.append((member.0, answer, answeredAt))
                                }
                            }
                            return part
                        } catch {
                            started()
                            let now = clock.wall
                            return BatchAnswers(answers: members.map { ($0.0, .failed(APNsTransportFailure(.credentialsUnavailable, detail: "\(error)")), now) })
                        }
                    }
                }
                var results = BatchAnswers()
                for await part in sends {
                    results.answers += part.answers
                    results.withdrawn += part.withdrawn
                    results.lapsed += part.lapsed
                }
                // Once for the batch: a probe is judged on all of its answers.
                circuits.record(lane, results.answers.map(\.1), probe: probe)
                return results
            }
        }
        return (send, start)
    }
}
