import Foundation
import PushfanMessages
import PushfanSupport

/// A token bucket: `rate` sends per second on average, at most `capacity` at once.
///
/// One bucket serves one rate lane of one app inside one worker (see `RateLanes`); the
/// callers are the tasks of that lane, so contention is low and a mutex suffices.
package final class TokenBucket: Sendable {
    private struct State {
        var rate: Double
        var capacity: Double
        var tokens: Double
        var updated: ContinuousClock.Instant
        /// Sends granted since the bucket was made.
        var granted = 0
    }

    private let state: Locked<State>
    private let clock: any ServiceClock

    /// Starts full. `burst` is how many seconds of `rate` may go out at once: small enough
    /// that every one-second window stays close to `rate`, large enough for useful batches.
    package init(rate: Double, burst: Duration = .milliseconds(50), clock: any ServiceClock) {
        let capacity = Self.capacity(rate: rate, burst: burst)
        self.clock = clock
        state = Locked(State(rate: max(rate, 0.001), capacity: capacity, tokens: capacity, updated: clock.now))
    }

    private static func capacity(rate: Double, burst: Duration) -> Double {
        max(1, (rate * burst.seconds).rounded(.down))
    }

    /// Most sends one `acquire` can grant.
    package var capacity: Int { Int(state.withLock { $0.capacity }) }

    /// Its rate per second and the sends it has granted, for metrics.
    package var usage: (rate: Double, granted: Int) { state.withLock { ($0.rate, $0.granted) } }

    /// Changes the rate (an app's limit was edited); tokens already saved are kept up to the
    /// new capacity.
    package func setRate(_ rate: Double, burst: Duration = .milliseconds(50)) {
        state.withLock { state in
            state.rate = max(rate, 0.001)
            state.capacity = Self.capacity(rate: rate, burst: burst)
            state.tokens = min(state.tokens, state.capacity)
        }
    }

    /// Waits until at least one send is allowed and takes up to `wanted` (at most
    /// `capacity`); returns how many were taken. Throws only when the task is cancelled.
    ///
    /// `ahead` (a transactional message's batch) goes before everyone waiting: it takes up to
    /// `capacity` at once, borrowing from the tokens to come when the bucket is short, as long
    /// as the debt stays within one `capacity`. Those waiting then wait for the debt to be
    /// paid, so the bucket's long-run rate is unchanged and any window of `t` seconds grants
    /// at most `rate × t` plus two bursts.
    package func acquire(upTo wanted: Int, ahead: Bool = false) async throws -> Int {
        try await take(wanted, all: ahead, borrow: ahead ? 1 : 0)
    }

    /// Waits until `count` sends (clamped to `capacity`) are allowed and takes them.
    package func acquire(exactly count: Int) async throws -> Int {
        try await take(count, all: true, borrow: 0)
    }

    /// `borrow`: how many capacities the tokens may go below zero (1 for `ahead`).
    private func take(_ wanted: Int, all: Bool, borrow: Double) async throws -> Int {
        precondition(wanted > 0)
        while true {
            try Task.checkCancellation()
            let now = clock.now
            let outcome: (granted: Int, wait: Double) = state.withLock { state in
                let elapsed = (now - state.updated).seconds
                state.tokens = min(state.capacity, state.tokens + elapsed * state.rate)
                state.updated = now
                let needed = (all ? min(Double(wanted), state.capacity) : 1) - borrow * state.capacity
                if state.tokens >= needed {
                    let granted = all ? Int(needed + borrow * state.capacity) : min(wanted, Int(state.tokens.rounded(.down)))
                    state.tokens -= Double(granted)
                    state.granted += granted
                    return (granted, 0)
                }
                return (0, (needed - state.tokens) / state.rate)
            }
            if outcome.granted > 0 { return outcome.granted }
            try await clock.sleep(until: now + .seconds(max(outcome.wait, 0.0005)))
        }
    }
}

/// The rate buckets of one worker: one per (app, lane) and one per (campaign, lane) for
/// campaigns that ask for less than their app's limit.
///
/// Why the sum over all workers stays within an app's limit: the planner gives every task a
/// lane in `0 ..< lanes`, and all tasks of one lane share the Kafka key `<app>#<lane>`, so
/// they sit on one partition of the tasks topic. A partition is owned by one worker at a
/// time, and a worker stops a partition's tasks before giving it up (`onRevoke`), so at any
/// moment each lane is sent by at most one bucket of `rate / lanes`: `lanes` buckets of
/// `rate / lanes` add up to `rate` at most, however partitions move.
package final class RateLanes: Sendable {
    private let buckets = Locked<[LaneKey: TokenBucket]>([:])
    private let clock: any ServiceClock

    package init(clock: any ServiceClock) {
        self.clock = clock
    }

    /// The bucket for `key` at `rate` per second, created on first use; an existing bucket
    /// takes the new rate.
    package func bucket(_ key: LaneKey, rate: Double) -> TokenBucket {
        buckets.withLock { buckets in
            if let existing = buckets[key] {
                existing.setRate(rate)
                return existing
            }
            let bucket = TokenBucket(rate: rate, clock: clock)
            buckets[key] = bucket
            return bucket
        }
    }

    /// Each app lane's bucket here: (app, lane, rate per second, sends granted).
    package var appLanes: [(app: String, lane: Int, rate: Double, granted: Int)] {
        buckets.withLock { buckets in
            buckets.compactMap { key, bucket in
                guard case .app(let app) = key.owner else { return nil }
                let usage = bucket.usage
                return (app, key.lane, usage.rate, usage.granted)
            }
        }
    }

    /// Forgets buckets nobody uses any more (a finished campaign's).
    package func remove(_ key: LaneKey) {
        _ = buckets.withLock { $0.removeValue(forKey: key) }
    }
}
