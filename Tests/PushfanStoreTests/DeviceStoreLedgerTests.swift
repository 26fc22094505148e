import Foundation
import PushfanMessages
@testable import PushfanStore
import PushfanSupport
import PushfanTestSupport
import Testing

/// The shared suite's second half: the delivery ledger, campaign shards, provider tokens, and
/// a store that becomes unavailable.
extension DeviceStoreTests {
    @Test("per-variant running totals count the rows that changed, once, beside the campaign's", arguments: Backend.enabled)
    func ledgerKeepsPerVariantTotals(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let targets = try await store.importSynthetic(30, now: now)
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "ab"), audience: 30, shards: 1, now: store.clock.wallMillis))
        _ = try await store.ledger.claim(campaign: shop("ab"), targets: targets, owner: "w", now: now)
        func outcome(_ index: Int) -> LedgerOutcome {
            var outcome = LedgerOutcome(rowKey: targets[index].rowKey, state: index % 3 == 0 ? .invalidToken : index < 20 ? .delivered : .skipped)
            outcome.variant = index < 10 ? "a" : index < 20 ? "b" : "holdout"
            return outcome
        }
        #expect(try await store.ledger.record(campaign: shop("ab"), (0..<30).map(outcome), now: store.clock.wallMillis).count == 30)
        // The same outcomes again (a page re-processed after a crash) change nothing.
        #expect(try await store.ledger.record(campaign: shop("ab"), (0..<30).map(outcome), now: store.clock.wallMillis).count == 0)
        let variants = try await store.ledger.variantCounts(campaign: shop("ab"))
        #expect(variants == [
            "a": [.invalidToken: 4, .delivered: 6], "b": [.invalidToken: 3, .delivered: 7], "holdout": [.invalidToken: 3, .skipped: 7],
        ])
        let total = try await store.ledger.progressCounts(campaign: shop("ab"))
        #expect(total == [.invalidToken: 10, .delivered: 13, .skipped: 7])
        #expect(try await store.ledger.variantCounts(campaign: shop("other")).isEmpty)
    }

    @Test("renewing claims: the owner's own (even past their lease) are renewed; one taken over, one final or another's are not, and the renewal keeps a takeover out; an outcome decided without a request is recorded only by the row's holder", arguments: Backend.enabled)
    func renewingClaims(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let targets = try await store.importSynthetic(6, now: now)
        let keys = targets.map(\.rowKey)
        let start = store.clock.wallMillis
        #expect(try await store.ledger.claim(campaign: shop("r"), targets: Array(targets[0..<4]), owner: "w1", lease: .seconds(10), now: start).leaseUntil == start + 10_000)
        _ = try await store.ledger.claim(campaign: shop("r"), targets: [targets[4]], owner: "w2", lease: .seconds(10), now: start)
        // 15 s on, every lease has run out: w2 takes device 2 over, device 3 is final.
        let later = start + 15_000
        #expect(try await store.ledger.claim(campaign: shop("r"), targets: [targets[2]], owner: "w2", lease: .seconds(10), now: later).toSend.count == 1)
        #expect(try await store.ledger.record(campaign: shop("r"), [LedgerOutcome(rowKey: keys[3], state: .cancelled)], now: later).count == 1)
        // Device 4 is w2's, device 5 was never claimed.
        let kept = try await store.ledger.renew(campaign: shop("r"), owner: "w1", rowKeys: keys, lease: .seconds(10), now: later)
        #expect(kept == [keys[0], keys[1]])
        // Renewed until later + 10 s: a third worker cannot take them over before then.
        let third = try await store.ledger.claim(campaign: shop("r"), targets: Array(targets[0..<2]), owner: "w3", lease: .seconds(10), now: later + 9_000)
        #expect(third.toSend.isEmpty && third.heldElsewhere == 2)
        #expect(try await store.ledger.renew(campaign: shop("r"), owner: "w1", rowKeys: [], lease: .seconds(10), now: later).isEmpty)
        // w1 records device 2, which w2 holds now: an outcome decided without a request is
        // refused; APNs' answer to a request w1 sent before is recorded (the first wins).
        #expect(try await store.ledger.record(campaign: shop("r"), [LedgerOutcome(rowKey: keys[2], state: .cancelled)], owner: "w1", now: later).count == 0)
        #expect(try await store.ledger.record(campaign: shop("r"), [LedgerOutcome(rowKey: keys[2], state: .delivered, status: 200)], owner: "w1", now: later).count == 1)
        #expect(try await store.ledger.record(campaign: shop("r"), [LedgerOutcome(rowKey: keys[0], state: .expired)], owner: "w1", now: later).count == 1)
    }

    @Test("a page's takeover takes only its own devices' stale claims, not those of other devices in its key range (another zone wave's, a hold's)", arguments: Backend.enabled)
    func takeoverKeepsToItsPage(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let targets = try await store.importSynthetic(5, now: now)
        let start = store.clock.wallMillis
        _ = try await store.ledger.claim(campaign: shop("t"), targets: targets, owner: "w1", lease: .seconds(10), now: start)
        // w1 died. w2 re-runs one zone's page, devices 0 and 4; devices 1-3, inside its key
        // range, are another zone's.
        let later = start + 15_000
        let page = try await store.ledger.claim(campaign: shop("t"), targets: [targets[0], targets[4]], owner: "w2", lease: .seconds(10), now: later)
        #expect(page.toSend.map(\.rowKey) == [targets[0].rowKey, targets[4].rowKey])
        // The other zone's task, re-run as well, takes its own devices back at once.
        let other = try await store.ledger.claim(campaign: shop("t"), targets: Array(targets[1...3]), owner: "w3", lease: .seconds(10), now: later + 1)
        #expect(other.toSend.count == 3 && other.heldElsewhere == 0, "\(other.heldElsewhere) held by w2, which does not send them")
    }

    @Test(arguments: Backend.enabled)
    func ledgerClaimsAreIdempotentAndFinalOutcomesStick(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        let store = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        let targets = try await store.importSynthetic(200, now: now)
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "c1"), audience: 200, shards: 1, now: store.clock.wallMillis))
        #expect(try await !store.campaigns.record(CampaignKey(app: "shop-ios", id: "c1"), audience: 200, shards: 1, now: store.clock.wallMillis))

        // Two processes (two connections) claim the same page at once: each device has one owner.
        let other = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        async let a = store.ledger.claim(campaign: shop("c1"), targets: targets, owner: "worker-a", now: now)
        async let b = other.ledger.claim(campaign: shop("c1"), targets: targets, owner: "worker-b", now: now)
        let (claimA, claimB) = try await (a, b)
        #expect(claimA.toSend.count + claimB.toSend.count == 200)
        #expect(Set(claimA.toSend.map(\.rowKey)).isDisjoint(with: claimB.toSend.map(\.rowKey)))

        // Outcomes for half; the first final outcome wins.
        let half = Array((claimA.toSend.isEmpty ? claimB.toSend : claimA.toSend).prefix(100))
        let recorded = try await store.ledger.record(campaign: shop("c1"), half.map { LedgerOutcome(rowKey: $0.rowKey, state: .delivered, apnsID: "id-\($0.rowKey)") }, now: store.clock.wallMillis)
        #expect(recorded.count == half.count)
        #expect(try await store.ledger.record(campaign: shop("c1"), half.map { LedgerOutcome(rowKey: $0.rowKey, state: .failed) }, now: store.clock.wallMillis).count == 0)

        // Re-processing the page after a crash: finished devices are not claimed again; the rest
        // are held by the other owner until its lease runs out, then taken over.
        let again = try await store.ledger.claim(campaign: shop("c1"), targets: targets, owner: "worker-c", now: now + 1_000)
        #expect(again.alreadyFinal == half.count)
        #expect(again.toSend.count + again.heldElsewhere == 200 - half.count)
        let takeover = try await store.ledger.claim(campaign: shop("c1"), targets: targets, owner: "worker-c", now: now + 120_000)
        #expect(takeover.toSend.count == 200 - half.count)
        #expect(takeover.alreadyFinal == half.count)
        #expect(try await store.ledger.unfinished(campaign: shop("c1")).count == 200 - half.count)
        let counts = try await store.ledger.outcomeCounts(campaign: shop("c1"))
        #expect(counts[.delivered] == half.count && counts[.claimed] == 200 - half.count)
        let finished = try await store.ledger.finished(campaign: shop("c1"), after: nil, limit: 1000)
        #expect(finished.count == half.count && finished.allSatisfy { $0.state == .delivered && $0.apnsID == "id-\($0.rowKey)" })
    }

    @Test(arguments: Backend.enabled)
    func theLastOfTwoConcurrentFinishersSeesEveryShard(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        let store = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        let other = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        for round in 0..<20 {
            _ = try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "race-\(round)"), audience: 2, shards: 2, now: store.clock.wallMillis)
            // Two workers finish the campaign's two shards at the same moment.
            async let first = store.campaigns.finishTask(campaign: shop("race-\(round)"), shard: 0, now: store.clock.wallMillis)
            async let second = other.campaigns.finishTask(campaign: shop("race-\(round)"), shard: 1, now: other.clock.wallMillis)
            let counts = try await [first, second].map(\.finished)
            #expect(counts.max() == 2, "round \(round): both finishers saw \(counts)")
        }
    }

    @Test(arguments: Backend.enabled)
    func providerTokensAreSharedAndReplacedOnlyWhenOld(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let t0: Int64 = 1_790_000_000
        #expect(try store.providerTokens.exchange(teamID: "T1", keyID: "K1", jwt: "a", issuedAt: t0, replaceAfter: 2400) == ("a", t0))
        // A worker that comes 10 minutes later gets the stored token, not its own.
        #expect(try store.providerTokens.exchange(teamID: "T1", keyID: "K1", jwt: "b", issuedAt: t0 + 600, replaceAfter: 2400) == ("a", t0))
        // Another key is separate.
        #expect(try store.providerTokens.exchange(teamID: "T1", keyID: "K2", jwt: "c", issuedAt: t0 + 600, replaceAfter: 2400) == ("c", t0 + 600))
        // 40 minutes on, the offered token replaces the stored one for everyone.
        #expect(try store.providerTokens.exchange(teamID: "T1", keyID: "K1", jwt: "d", issuedAt: t0 + 2400, replaceAfter: 2400) == ("d", t0 + 2400))
        #expect(try store.providerTokens.exchange(teamID: "T1", keyID: "K1", jwt: "e", issuedAt: t0 + 2500, replaceAfter: 2400) == ("d", t0 + 2400))
    }

    @Test(arguments: Backend.enabled)
    func workerLedgerOperations(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let targets = try await store.importSynthetic(50, now: now)

        // The campaign row keeps the definition; its status changes for exactly one caller.
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "c2"), audience: 50, shards: 2, definition: CampaignDefinition(record: #"{"v":1}"#), status: .planning, now: store.clock.wallMillis))
        #expect(try await store.campaigns.stored(shop("c2"))?.record == #"{"v":1}"#)
        #expect(try await store.campaigns.stored(shop("nope")) == nil)
        #expect(try await store.campaigns.transition(shop("c2"), from: .planning, to: .running, now: store.clock.wallMillis))
        #expect(try await !store.campaigns.transition(shop("c2"), from: .planning, to: .running, now: store.clock.wallMillis))
        #expect(try await store.campaigns.get(shop("c2"))?.status == .running)
        // A step the lifecycle does not allow never reaches the database.
        await #expect(throws: StoreError.invalidInput("a campaign cannot go from completed to running")) {
            _ = try await store.campaigns.transition(shop("c2"), from: .completed, to: .running, now: store.clock.wallMillis)
        }

        // Finished shards count once each, however often a task is re-processed.
        #expect(try await store.campaigns.finishTask(campaign: shop("c2"), shard: 0, now: store.clock.wallMillis) == (1, 2))
        #expect(try await store.campaigns.finishTask(campaign: shop("c2"), shard: 0, now: store.clock.wallMillis) == (1, 2))
        #expect(try await store.campaigns.finishTask(campaign: shop("c2"), shard: 1, now: store.clock.wallMillis) == (2, 2))

        // Shards the planner is still finding: no finisher reaches the count until it settles,
        // holds added meanwhile included.
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "c3"), audience: 0, shards: CampaignRegistry.shardsNotYetKnown, status: .planning, now: store.clock.wallMillis))
        #expect(try await store.campaigns.finishTask(campaign: shop("c3"), shard: 0, now: store.clock.wallMillis).shards == CampaignRegistry.shardsNotYetKnown)
        let held = try await store.waves.hold(campaign: shop("c3"), key: "quiet-0-1-1", sendAt: 1, lane: 0, rowKeys: [1])
        try await store.campaigns.settleShards(shop("c3"), shards: 2, now: store.clock.wallMillis)
        try await store.campaigns.settleShards(shop("c3"), shards: 2, now: store.clock.wallMillis)
        #expect(try await store.campaigns.get(shop("c3"))?.shards == 3)
        // The hold is numbered past the settled count, and its shard counts all the same.
        #expect(held >= CampaignRegistry.shardsNotYetKnown)
        #expect(try await store.campaigns.finishTask(campaign: shop("c3"), shard: 1, now: store.clock.wallMillis) == (2, 3))
        #expect(try await store.campaigns.finishTask(campaign: shop("c3"), shard: held, now: store.clock.wallMillis) == (3, 3))

        // A released claim is taken over at once, without waiting for its lease.
        let claim = try await store.ledger.claim(campaign: shop("c2"), targets: targets, owner: "worker-a", lease: .seconds(600), now: now)
        #expect(claim.toSend.count == 50)
        let keys = targets.map(\.rowKey)
        try await store.ledger.release(campaign: shop("c2"), owner: "worker-b", rowKeys: keys)  // not b's: no effect
        #expect(try await store.ledger.claim(campaign: shop("c2"), targets: targets, owner: "worker-b", now: now + 1).heldElsewhere == 50)
        try await store.ledger.release(campaign: shop("c2"), owner: "worker-a", rowKeys: Array(keys.prefix(20)))
        let takeover = try await store.ledger.claim(campaign: shop("c2"), targets: targets, owner: "worker-b", now: now + 2)
        #expect(takeover.toSend.map(\.rowKey) == Array(keys.prefix(20)))
        #expect(takeover.heldElsewhere == 30)

        // Final entries of a row-key range, for re-emitting results.
        try await store.ledger.record(campaign: shop("c2"), keys.prefix(10).map { LedgerOutcome(rowKey: $0, state: .invalidToken, attempts: 2, status: 410, reason: "Unregistered") }, now: store.clock.wallMillis)
        let range = try await store.ledger.finished(campaign: shop("c2"), after: keys[4], through: keys[20])
        #expect(range.map(\.rowKey) == Array(keys[5..<10]))
        #expect(range.allSatisfy { $0.state == .invalidToken && $0.status == 410 && $0.reason == "Unregistered" && $0.attempts == 2 })

        // Running totals count each device once, whatever is recorded again.
        try await store.ledger.record(campaign: shop("c2"), keys.prefix(12).map { LedgerOutcome(rowKey: $0, state: .delivered) }, now: store.clock.wallMillis)
        #expect(try await store.ledger.progressCounts(campaign: shop("c2")) == [.invalidToken: 10, .delivered: 2])
        let counted = try await store.ledger.outcomeCounts(campaign: shop("c2"))
        #expect(counted[.invalidToken] == 10 && counted[.delivered] == 2)

        // An explicit audience: only active devices of this app, sorted.
        let ids = targets.suffix(5).map(\.deviceID) + ["no-such-device"]
        #expect(try await store.audience.rowKeys(app: "shop-ios", deviceIDs: ids.reversed(), tokens: nil) == Array(keys.suffix(5)))
        #expect(try await store.audience.rowKeys(app: "other-app", deviceIDs: ids, tokens: nil) == [])
    }

    @Test func aSecondProcessHoldingTheSQLiteWriteLockMeansUnavailable() async throws {
        let url = try Backend.sqlite.freshDatabase()
        let store = try await DeviceStore.open(url + "?busy_timeout_ms=100", logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        // Another process (the sqlite3 CLI) takes the write lock and keeps it.
        let holder = try ManagedProcess("sqlite3", [String(url.dropFirst("sqlite:".count))])
        holder.send("BEGIN IMMEDIATE; INSERT INTO segments VALUES ('x', 'y', 'z', 0); SELECT 'locked';")
        #expect(await holder.waitForOutput { $0.contains("locked") } != nil)
        await #expect {
            _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "a", token: Synthetic.token(1)))
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.isUnavailable && error.description.contains("locked")
        }
        holder.send("ROLLBACK;")
        holder.closeInput()
        _ = await holder.waitForExit()
        #expect(try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "a", token: Synthetic.token(1))).created)
    }

    /// Stops and restarts a PostgreSQL server of its own (not the one the other tests share).
    /// The server and pg_ctl run through `system`, not Foundation's `Process`, whose exit
    /// detection never fires for a child whose descendants daemonise (as postgres does).
    @Test(.enabled(if: Backend.enabled.contains(.postgres)))
    func postgresStoppedMidExpansionIsUnavailableThenResumes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-pg-restart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = { (name: String) in directory.appendingPathComponent(name).path }
        let (urlFile, controlFile, stopFile, doneFile) = (file("url"), file("ctl"), file("stop"), file("done"))
        let script = TestBinaries.packageRoot.appendingPathComponent("scripts/with-postgres").path
        let serve = #"echo "$PUSHFAN_TEST_POSTGRES" > \#(urlFile); echo "$PUSHFAN_TEST_PG_CTL" > \#(controlFile); while [ ! -e \#(stopFile) ]; do sleep 0.2; done"#
        #expect(system("(\(script) sh -c '\(serve)'; touch \(doneFile)) >/dev/null 2>&1 &") == 0)
        defer {
            _ = FileManager.default.createFile(atPath: stopFile, contents: nil)
            for _ in 0..<300 where !FileManager.default.fileExists(atPath: doneFile) { usleep(100_000) }
        }
        for _ in 0..<600 where !FileManager.default.fileExists(atPath: controlFile) { try await Task.sleep(for: .milliseconds(100)) }
        let url = try String(contentsOfFile: urlFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let control = try String(contentsOfFile: controlFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)

        let store = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        try await store.importSynthetic(100, now: now)
        let all = ShardRange(after: nil, through: nil)
        let first = try await store.audience.page(app: "shop-ios", segment: nil, shard: all, cursor: nil, limit: 40, now: store.clock.wallMillis)
        #expect(first.count == 40)

        try await run("\(control) stop -m fast -w")
        await #expect {
            _ = try await store.audience.page(app: "shop-ios", segment: nil, shard: all, cursor: first.last?.rowKey, limit: 40, now: store.clock.wallMillis)
        } throws: { error in
            (error as? StoreError)?.isUnavailable == true
        }
        try await run("\(control) start -w")
        // The same store reconnects by itself and the expansion continues where it stopped.
        var seen = first
        var cursor = first.last?.rowKey
        while true {
            let page = try await store.audience.page(app: "shop-ios", segment: nil, shard: all, cursor: cursor, limit: 40, now: store.clock.wallMillis)
            seen += page
            guard let last = page.last else { break }
            cursor = last.rowKey
        }
        #expect(seen.count == 100 && Set(seen.map(\.rowKey)).count == 100)
    }

    private func run(_ command: String) async throws {
        #expect(system(command + " >/dev/null") == 0, "\(command) failed")
    }
}
