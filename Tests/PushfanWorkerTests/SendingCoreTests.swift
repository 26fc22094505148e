import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import Testing

@testable import PushfanWorker

/// The sending core's decisions, in the test's own process and on a clock it moves
/// (`SendingCoreHarness`): what one task sends, retries, records and ends with. The process
/// suites (EndToEndTests) check the same paths through real workers and the simulator.
@Suite(.timeLimit(.minutes(2)))
struct SendingCoreTests {
    @Test("every device gets one request and one final outcome; the campaign completes")
    func deliversEachDeviceOnce() async throws {
        let harness = try await SendingCoreHarness(devices: 250)
        let task = try await harness.campaign("c1")
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.count == 250)
        #expect(Set(harness.apns.requests.map(\.token)).count == 250)
        #expect(try await harness.outcomes(task) == [.delivered: 250])
        #expect(try await harness.store.campaigns.get(task.campaignKey)?.status == .completed)
        await harness.stop()
    }

    @Test("a saved segment edited after the campaign was accepted: the sender reads the copy the campaign was planned with")
    func savedSegmentAsPlanned() async throws {
        let harness = try await SendingCoreHarness(devices: 40)
        try await harness.store.audience.saveSegment(app: SendingCoreHarness.app, name: "shoppers", expression: "locale in (en_US)")
        let task = try await harness.campaign("c1", audience: #"{"named":"shoppers"}"#)
        try await harness.store.audience.saveSegment(app: SendingCoreHarness.app, name: "shoppers", expression: "locale in (xx_XX)")
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.count == 40, "the sender read the saved segment as it is now")
        #expect(try await harness.outcomes(task) == [.delivered: 40])
        await harness.stop()
    }

    @Test("a finished task run again sends nothing: the ledger already holds every outcome")
    func aRedeliveredTaskSendsNothing() async throws {
        let harness = try await SendingCoreHarness(devices: 120)
        let task = try await harness.campaign("c1")
        #expect(await harness.run(task) == .finished)
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.count == 120, "a device was sent twice")
        #expect(try await harness.outcomes(task) == [.delivered: 120])
        await harness.stop()
    }

    @Test("two records of one shard on one worker side by side (a campaign planned again): neither sends what the other waits to retry; each device gets its 503 and one more request")
    func twoRecordsOfOneShardHoldTheirDevicesApart() async throws {
        var policy = RetryPolicy()
        (policy.baseDelay, policy.jitter) = (.seconds(2), .none)
        let harness = try await SendingCoreHarness(devices: 150, retryPolicy: policy) { _, attempt in
            attempt == 1 ? .rejected(503, .serviceUnavailable) : .accepted
        }
        let task = try await harness.campaign("c1")
        #expect(await harness.run(task, records: ["0@10", "0@11"]) == [.finished, .finished])
        let attempts = harness.apns.attempts
        #expect(attempts.count == 150 && attempts.values.allSatisfy { $0 == 2 }, "requests per device: \(Set(attempts.values))")
        #expect(try await harness.outcomes(task) == [.delivered: 150])
        await harness.stop()
    }

    @Test("503 then 200: the device is retried after its backoff and delivered; a 410 invalidates the token and is not retried")
    func retriesAndTokenHygiene() async throws {
        let gone = SendingCoreHarness.token(7)
        var policy = RetryPolicy()
        (policy.baseDelay, policy.jitter) = (.seconds(2), .none)
        let harness = try await SendingCoreHarness(devices: 20, retryPolicy: policy) { token, attempt in
            if token == gone { return .rejected(410, .unregistered) }
            return token == SendingCoreHarness.token(3) && attempt < 3 ? .rejected(503, .serviceUnavailable) : .accepted
        }
        let task = try await harness.campaign("c1")
        let started = harness.clock.now
        #expect(await harness.run(task) == .finished)
        let retried = harness.apns.requests.filter { $0.token == SendingCoreHarness.token(3) }
        #expect(retried.count == 3)
        // Backoff without jitter: 2 s, then 4 s.
        if retried.count == 3 {
            #expect(retried[1].at - retried[0].at >= .seconds(2))
            #expect(retried[2].at - retried[1].at >= .seconds(4))
        }
        #expect(harness.clock.now - started >= .seconds(6), "the retries' delays passed on the clock")
        #expect(harness.apns.attempts[gone] == 1, "a 410 is final")
        #expect(try await harness.outcomes(task) == [.delivered: 19, .invalidToken: 1])
        #expect(try await harness.store.devices.get(app: SendingCoreHarness.app, deviceID: "d-7")?.status == .invalid)
        await harness.stop()
    }

    @Test("never faster than the app's rate: 300 devices at 100/s take at least 2.95 s of the clock (5 at once, then the bucket's refill)")
    func keepsTheRate() async throws {
        let harness = try await SendingCoreHarness(devices: 300, rate: 100)
        let task = try await harness.campaign("c1")
        let started = harness.clock.now
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.count == 300)
        // The bucket holds 50 ms of the rate (5 sends) and refills at 100/s: 295 more
        // sends need 2.95 s. (The clock moves only to a sleeper's deadline, so it
        // never runs short; a request's own time is when the stand-in ran it, which may
        // lag its grant, so the bound is on the whole run.)
        let elapsed = harness.clock.now - started
        #expect(elapsed >= .milliseconds(2_950), "300 sends in \(elapsed) at 100/s")
        #expect(try await harness.outcomes(task) == [.delivered: 300])
        await harness.stop()
    }

    @Test("at a low rate each answered batch is recorded before the next wait for the rate, not once 64 batches are out: a crash then sends again at most the last batch or two")
    func answersAreRecordedBehindTheSends() async throws {
        // 40 devices at 20/s: one page, batches of one request every 50 ms.
        let harness = try await SendingCoreHarness(devices: 40, rate: 20)
        let task = try await harness.campaign("c1")
        let unrecorded = Locked<[Int]>([])
        harness.apns.beforeEachBatch { sent in
            let recorded = (try? await harness.outcomes(task))?[.delivered] ?? 0
            unrecorded.withLock { $0.append(sent - recorded) }
        }
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.count == 40)
        let behind = unrecorded.withLock { $0 }
        #expect(behind.count == 40)
        // Usually one or two; a batch slow to finish on a loaded machine (the clock moves
        // after 2 ms of real time) is taken back a little later, so the median is what is
        // asked. Taken back only once 64 were out, it was about 20 (0 growing to 39).
        let median = behind.sorted()[behind.count / 2]
        #expect(median <= 3, "requests answered but not recorded when each batch went out: \(behind)")
        #expect(try await harness.outcomes(task) == [.delivered: 40])
        await harness.stop()
    }

    @Test("paused mid-task by the operator (the store, then the control record): no request starts while paused; after the resume every device is sent once")
    func pauseAndResumeMidTask() async throws {
        let harness = try await SendingCoreHarness(devices: 200, rate: 20)
        let task = try await harness.campaign("c1")
        let running = Task { await harness.run(task) }
        while harness.apns.requests.count < 40 { try await Task.sleep(for: .milliseconds(2)) }
        try await harness.command(.pause, task)
        let pausedAt = harness.clock.now
        // What was already granted may still start; nothing after that.
        while harness.clock.now - pausedAt < .seconds(1) { try await Task.sleep(for: .milliseconds(2)) }
        let atPause = harness.apns.requests.count
        while harness.clock.now - pausedAt < .seconds(30) { try await Task.sleep(for: .milliseconds(2)) }
        #expect(harness.apns.requests.count == atPause, "\(harness.apns.requests.count - atPause) requests while paused")
        #expect(atPause < 200)
        try await harness.command(.resume, task)
        #expect(await running.value == .finished)
        #expect(harness.apns.requests.count == 200)
        #expect(harness.apns.attempts.values.allSatisfy { $0 == 1 }, "a device was sent twice")
        #expect(try await harness.outcomes(task) == [.delivered: 200])
        await harness.stop()
    }

    @Test("stopped past its lease while a batch waited for a stream: the worker sends nothing another worker took over and ended cancelled meanwhile")
    func stoppedPastItsLease() async throws {
        let harness = try await SendingCoreHarness(devices: 50, lease: 15)
        let task = try await harness.campaign("c1")
        harness.apns.beforeFirstBatch {
            // Stopped (SIGSTOP) for 20 s: the lease runs out, the campaign is cancelled, and
            // another worker takes every device over and ends it without a request.
            harness.clock.advance(by: .seconds(20))
            let now = harness.clock.wallMillis
            guard let claim = await harness.rivalClaim(task) else { return }
            let ended = claim.toSend.map { LedgerOutcome(rowKey: $0.rowKey, state: .cancelled, attempts: 0, reason: "cancelled") }
            _ = try? await harness.store.ledger.record(campaign: task.campaignKey, ended, now: now)
        }
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.isEmpty, "\(harness.apns.requests.count) devices sent that another worker had ended unsent")
        #expect(try await harness.outcomes(task) == [.cancelled: 50])
        await harness.stop()
    }

    @Test("another owner's answer recorded first: the ledger keeps it, and the result this worker writes is the ledger's, not its own later answer")
    func resultsFollowTheLedger() async throws {
        let harness = try await SendingCoreHarness(devices: 30) { _, _ in .rejected(400, .badDeviceToken) }
        let task = try await harness.campaign("c1")
        harness.apns.beforeFirstBatch {
            // A worker that took the devices over while this one was stopped got APNs' 200 first.
            guard let targets = try? await harness.targets() else { return }
            let delivered = targets.map { LedgerOutcome(rowKey: $0.rowKey, state: .delivered, attempts: 1, apnsID: "a", status: 200) }
            _ = try? await harness.store.ledger.record(campaign: task.campaignKey, delivered, owner: "w2", now: harness.clock.wallMillis)
        }
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.count == 30)
        #expect(try await harness.outcomes(task) == [.delivered: 30])
        let results = try await harness.results(count: 30)
        #expect(results.count == 30 && results.allSatisfy { $0.outcome == .delivered }, "results contradict the ledger: \(Set(results.map(\.outcome)))")
        // Counted by the worker whose outcome the ledger took, not again here.
        #expect(harness.context.metrics.notifications.value([SendingCoreHarness.app, "invalid_token", "BadDeviceToken"]) == 0)
        await harness.stop()
    }

    @Test("a page that waits longer than its lease for the rate keeps its claims: renewed before each batch, no other worker can take them over, each device sent once")
    func longWaitsRenewTheLease() async throws {
        // 60 devices at 2/s take 30 s, twice the lease.
        let harness = try await SendingCoreHarness(devices: 60, rate: 2, lease: 15)
        let task = try await harness.campaign("c1")
        let rival = Locked<DeliveryLedger.Claim?>(nil)
        harness.apns.beforeEachBatch { sent in
            // 20 s in: a worker that runs the same task tries to claim the page.
            guard sent >= 40, rival.withLock({ $0 == nil }) else { return }
            let claim = await harness.rivalClaim(task)
            rival.withLock { $0 = claim }
        }
        #expect(await harness.run(task) == .finished)
        let claim = try #require(rival.withLock { $0 })
        #expect(claim.toSend.isEmpty, "the other worker took over \(claim.toSend.count) devices this one still had to send")
        #expect(claim.heldElsewhere > 0 && claim.heldElsewhere + claim.alreadyFinal == 60)
        #expect(harness.apns.withdrawn == 0, "requests withdrawn because their claims ran short")
        #expect(harness.apns.requests.count == 60)
        #expect(Set(harness.apns.requests.map(\.token)).count == 60)
        #expect(try await harness.outcomes(task) == [.delivered: 60])
        await harness.stop()
    }

    @Test("stopped past its lease, another worker holding its devices now: it sends none of them, waits for that worker, and takes them back once that worker's lease runs out")
    func takenOverDevicesAreWaitedFor() async throws {
        // Batches of 5, one out at a time: after the stop the rest meet the renewal.
        let harness = try await SendingCoreHarness(devices: 50, rate: 100, lease: 15, batchesInFlight: 1)
        let task = try await harness.campaign("c1")
        let rival = Locked<DeliveryLedger.Claim?>(nil)
        harness.apns.beforeFirstBatch {
            harness.clock.advance(by: .seconds(20))
            let claim = await harness.rivalClaim(task)
            rival.withLock { $0 = claim }
        }
        let started = harness.clock.now
        #expect(await harness.run(task) == .finished)
        #expect(rival.withLock { $0?.toSend.count } == 50, "the other worker took every device over")
        // Nothing went out on w2's claims: each device was sent once, after they ran out.
        #expect(harness.apns.requests.count == 50)
        #expect(Set(harness.apns.requests.map(\.token)).count == 50)
        #expect(harness.apns.requests.allSatisfy { $0.at - started >= .seconds(35) })
        #expect(try await harness.outcomes(task) == [.delivered: 50])
        await harness.stop()
    }

    @Test("stopped for more than half its lease while the campaign was cancelled, its control record missed: the renewal reads the store's status and nothing more is sent")
    func aLongStopReadsTheStatusAgain() async throws {
        // One batch out at a time: the next waits for the first's answers (and the stop in them).
        let harness = try await SendingCoreHarness(devices: 50, rate: 100, lease: 15, batchesInFlight: 1)
        let task = try await harness.campaign("c1")
        let started = try await harness.context.controls.refresh(task.campaignKey)
        harness.apns.beforeFirstBatch {
            harness.clock.advance(by: .seconds(10))
            _ = try? await harness.store.campaigns.control(task.campaignKey, .cancel, now: harness.clock.wallMillis)
        }
        #expect(await harness.run(task) == .finished)
        #expect(started == .running)
        let firstBatch = harness.apns.requests.count
        #expect(firstBatch > 0 && firstBatch < 50, "\(firstBatch) sent")
        #expect(try await harness.outcomes(task) == [.delivered: firstBatch, .cancelled: 50 - firstBatch])
        await harness.stop()
    }

    @Test("stopped past its lease with nobody taking over: the batch is withdrawn unsent, claimed again, and every device sent once")
    func lapsedClaimsAreClaimedAgain() async throws {
        let harness = try await SendingCoreHarness(devices: 50, lease: 15)
        let task = try await harness.campaign("c1")
        harness.apns.beforeFirstBatch { harness.clock.advance(by: .seconds(20)) }
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.count == 50)
        #expect(Set(harness.apns.requests.map(\.token)).count == 50)
        #expect(try await harness.outcomes(task) == [.delivered: 50])
        await harness.stop()
    }

    @Test("a campaign cancelled before its task runs ends every device cancelled without a request")
    func cancelledBeforeStart() async throws {
        let harness = try await SendingCoreHarness(devices: 40)
        let task = try await harness.campaign("c1")
        _ = try await harness.store.campaigns.control(task.campaignKey, .cancel, now: harness.clock.wallMillis)
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.isEmpty)
        #expect(try await harness.outcomes(task) == [.cancelled: 40])
        await harness.stop()
    }

    @Test("past its apns-expiration nothing starts: every device ends expired")
    func expiredBeforeStart() async throws {
        let harness = try await SendingCoreHarness(devices: 30)
        let expiration = Int64(harness.clock.wall.timeIntervalSince1970) + 60
        let task = try await harness.campaign("c1", options: #"{"expiration":\#(expiration)}"#)
        harness.clock.advance(by: .seconds(61))
        #expect(await harness.run(task) == .finished)
        #expect(harness.apns.requests.isEmpty)
        #expect(try await harness.outcomes(task) == [.expired: 30])
        await harness.stop()
    }

    @Test("devices inside their quiet hours wait only where they would get a push then: a zone skipped under late: skip and a dry run end now, with no hold")
    func quietHoursHoldOnlyWhatWouldBeSent() async throws {
        let harness = try await SendingCoreHarness(devices: 20)
        // Quiet from an hour before now to an hour after, in the app's zone (UTC).
        let minute = Int(harness.clock.wallMillis / 60_000 % 1_440)
        let window = try QuietHours(start: (minute + 1_380) % 1_440, end: (minute + 60) % 1_440)
        for record in try await harness.store.devices.list(app: SendingCoreHarness.app, limit: 100) {
            var device = DeviceRegistration(record)
            device.quietHours = window
            _ = try await harness.store.devices.register(app: SendingCoreHarness.app, device)
        }
        var skipped = try await harness.campaign("late")
        skipped.skip = LatePolicy.skippedReason
        #expect(await harness.run(skipped) == .finished)
        #expect(try await harness.outcomes(skipped) == [.skipped: 20])
        let dry = try await harness.campaign("dry", options: #"{"dry_run":true}"#)
        #expect(await harness.run(dry) == .finished)
        #expect(try await harness.outcomes(dry) == [.skipped: 20])
        // The same devices, sent normally: each waits for its hours' end in a hold.
        let held = try await harness.campaign("held")
        #expect(await harness.run(held) == .finished)
        #expect(try await harness.outcomes(held)[.skipped] == nil)
        let holds = try await harness.store.waves.due(now: harness.clock.wallMillis + 3 * 3_600_000, lead: .zero, staleAfter: .seconds(60))
        #expect(holds.map(\.campaign) == [CampaignKey(app: SendingCoreHarness.app, id: "held")], "\(holds)")
        #expect(harness.apns.requests.isEmpty)
        await harness.stop()
    }
}
