import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

@testable import PushfanWorker

@Suite("Rate buckets")
struct RateLimiterTests {
    @Test("a bucket holds 50 ms of its rate, at least one send")
    func capacityIsFiftyMillisecondsOfTheRate() {
        #expect(TokenBucket(rate: 1_000, clock: ManualClock()).capacity == 50)
        #expect(TokenBucket(rate: 2_000 / 4, clock: ManualClock()).capacity == 25)
        #expect(TokenBucket(rate: 10, clock: ManualClock()).capacity == 1)
        #expect(TokenBucket(rate: 0.5, clock: ManualClock()).capacity == 1)
    }

    @Test("a full bucket grants up to its capacity at once; exactly-n requests are clamped to it")
    func grantsAreBoundedByCapacity() async throws {
        let bucket = TokenBucket(rate: 1_000, clock: ManualClock())
        #expect(try await bucket.acquire(upTo: 10_000) == 50)
        let other = TokenBucket(rate: 1_000, clock: ManualClock())
        #expect(try await other.acquire(exactly: 500) == 50)
        #expect(try await TokenBucket(rate: 1_000, clock: ManualClock()).acquire(upTo: 7) == 7)
    }

    @Test("sends never come faster than the rate: after the first 50 at 1,000/s, each further grant waits for time to pass")
    func neverFasterThanTheRate() async throws {
        let clock = ManualClock()
        let bucket = TokenBucket(rate: 1_000, clock: clock)
        #expect(try await bucket.acquire(upTo: 150) == 50)
        // Empty: the next grant waits on the clock until 10 ms have passed, then takes 10.
        let next = Task { try await bucket.acquire(upTo: 100) }
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(10))
        #expect(try await next.value == 10)
        // 100 ms more refill the bucket only to its capacity.
        clock.advance(by: .milliseconds(100))
        #expect(try await bucket.acquire(upTo: 1_000) == 50)
    }

    @Test("an exactly-n acquire waits until all n are there")
    func exactlyWaitsForAll() async throws {
        let clock = ManualClock()
        let bucket = TokenBucket(rate: 1_000, clock: clock)
        _ = try await bucket.acquire(upTo: 50)
        let waiting = Task { try await bucket.acquire(exactly: 20) }
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(5))
        // 5 tokens are not 20: still waiting.
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(15))
        #expect(try await waiting.value == 20)
    }

    @Test("a transactional batch goes ahead of a waiting campaign batch, borrowing at most one burst; the campaign then waits for the debt, so the rate holds")
    func aheadBorrowsOneBurst() async throws {
        let clock = ManualClock()
        let bucket = TokenBucket(rate: 1_000, clock: clock)
        #expect(try await bucket.acquire(upTo: 50) == 50)
        // Empty bucket: the campaign's batch waits for time to pass...
        let campaign = Task { try await bucket.acquire(exactly: 50) }
        await clock.waitForSleepers(1)
        // ...while a message's batch is granted at once, from the tokens to come.
        #expect(try await bucket.acquire(upTo: 30, ahead: true) == 30)
        // It may borrow one burst at most: the next 30 would be 60 in debt, so it waits for 10 ms.
        let second = Task { try await bucket.acquire(upTo: 30, ahead: true) }
        await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(10))
        #expect(try await second.value == 30)
        // The campaign's 50 need the 50 borrowed paid back and 50 more: at 110 ms, not at
        // 50 ms (what it would have waited without the messages).
        clock.advance(by: .milliseconds(90))
        await clock.waitForSleepers(1)
        #expect(bucket.usage.granted == 110)
        clock.advance(by: .milliseconds(10))
        #expect(try await campaign.value == 50)
        #expect(bucket.usage.granted == 160)
    }

    @Test("a lowered rate applies to the next grant and caps the saved tokens")
    func setRateLowersCapacity() async throws {
        let bucket = TokenBucket(rate: 10_000, clock: ManualClock())
        bucket.setRate(100)
        #expect(bucket.capacity == 5)
        #expect(try await bucket.acquire(upTo: 1_000) == 5)
    }

    @Test("a waiting acquire ends with CancellationError when its task is cancelled")
    func waitingAcquireIsCancellable() async throws {
        let clock = ManualClock()
        let bucket = TokenBucket(rate: 0.01, clock: clock)
        _ = try await bucket.acquire(upTo: 1)
        let waiter = Task { try await bucket.acquire(upTo: 1) }
        await clock.waitForSleepers(1)
        waiter.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiter.value }
    }

    @Test("lanes share one bucket per key, and a key gets the latest rate")
    func lanesShareBuckets() {
        let lanes = RateLanes(clock: ManualClock())
        let first = lanes.bucket(.app("shop", lane: 0), rate: 1_000)
        #expect(lanes.bucket(.app("shop", lane: 0), rate: 1_000) === first)
        #expect(lanes.bucket(.app("shop", lane: 1), rate: 1_000) !== first)
        // A campaign named like an app has buckets of its own.
        #expect(lanes.bucket(.campaign(CampaignKey(app: "shop", id: "shop"), lane: 0), rate: 1_000) !== first)
        _ = lanes.bucket(.app("shop", lane: 0), rate: 200)
        #expect(first.capacity == 10)
        #expect(LaneKey.app("shop", lane: 2).description == "shop#2")
        #expect(LaneKey.campaign(CampaignKey(app: "shop", id: "spring"), lane: 2).description == "campaign:shop/spring#2")
    }

    @Test("the worker's backoff doubles up to its longest wait")
    func backoffDoubles() {
        var backoff = Backoff(first: .milliseconds(500), longest: .seconds(3))
        #expect((0..<5).map { _ in backoff.next() } == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(3), .seconds(3)])
    }

    @Test("lane partitions come from a hash that is the same in every process (FNV-1a)")
    func stableHashIsFNV1a() {
        #expect(FNV1a.hash("") == 0xcbf2_9ce4_8422_2325)
        #expect(FNV1a.hash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(FNV1a.hash("foobar") == 0x8594_4171_f739_67e8)
    }
}
