import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport

@Suite("APNs retry policy")
struct APNsRetryPolicyTests {
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let token = try! DeviceToken(String(repeating: "cd", count: 32))

    /// No jitter, so delays are exact.
    static func policy(_ configure: (inout RetryPolicy) -> Void = { _ in }) -> RetryPolicy {
        var policy = RetryPolicy()
        policy.jitter = .none
        configure(&policy)
        return policy
    }

    static func rejected(_ reason: APNsReason, _ status: Int) -> APNsSendResult {
        .response(.rejected(status: status, reason: reason, timestamp: nil))
    }

    @Test("accepted is done")
    func accepted() {
        #expect(Self.policy().decide(.response(.accepted(apnsID: "x", uniqueID: nil)), attempt: 1, now: Self.now, deadline: nil) == .done)
    }

    @Test("definitive rejections are never resent", arguments: APNsReason.table.filter { !$0.disposition.isRetriable }.map(\.reason))
    func definitive(_ reason: APNsReason) throws {
        let status = try #require(APNsReason.table.first { $0.reason == reason }?.status)
        #expect(Self.policy().decide(Self.rejected(reason, status), attempt: 1, now: Self.now, deadline: nil) == .done)
    }

    @Test("transient rejections are retried with backoff", arguments: APNsReason.table.filter { $0.disposition.isRetriable && $0.reason != .tooManyRequests }.map(\.reason))
    func transient(_ reason: APNsReason) throws {
        let status = try #require(APNsReason.table.first { $0.reason == reason }?.status)
        #expect(Self.policy().decide(Self.rejected(reason, status), attempt: 1, now: Self.now, deadline: nil) == .retry(after: .milliseconds(250)))
    }

    @Test("unknown reasons: 5xx retried, 4xx not")
    func unknown() {
        let policy = Self.policy()
        #expect(policy.decide(Self.rejected(APNsReason(rawValue: "New"), 502), attempt: 1, now: Self.now, deadline: nil) == .retry(after: .milliseconds(250)))
        #expect(policy.decide(Self.rejected(APNsReason(rawValue: "New"), 400), attempt: 1, now: Self.now, deadline: nil) == .done)
    }

    @Test("exponential backoff doubles from the base and stops at the maximum")
    func exponential() {
        let policy = Self.policy()
        let delays = (1...10).map { policy.backoff(afterAttempt: $0) }
        #expect(delays == [
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16),
            .seconds(30), .seconds(30), .seconds(30),
        ])
        #expect(policy.backoff(afterAttempt: 10_000) == .seconds(30))
    }

    @Test("full jitter spreads over 0...delay, equal jitter over delay/2...delay")
    func jitter() {
        let fixed: @Sendable (Double) -> RetryPolicy = { value in
            var policy = RetryPolicy()
            policy.random = { value }
            return policy
        }
        var full = fixed(0.5)
        full.jitter = .full
        #expect(full.backoff(afterAttempt: 3) == .milliseconds(500))
        full = fixed(0)
        #expect(full.backoff(afterAttempt: 3) == .zero)
        var equal = fixed(0)
        equal.jitter = .equal
        #expect(equal.backoff(afterAttempt: 3) == .milliseconds(500))
        equal = fixed(0.999_999)
        equal.jitter = .equal
        #expect(equal.backoff(afterAttempt: 3) <= .seconds(1))
        #expect(equal.backoff(afterAttempt: 3) > .milliseconds(999))
        // A random source out of range is clamped, never a negative or huge delay.
        #expect(fixed(-3).backoff(afterAttempt: 1) == .zero)
        #expect(fixed(7).backoff(afterAttempt: 1) == .milliseconds(250))
    }

    @Test("real random jitter stays within bounds")
    func randomJitter() {
        var policy = RetryPolicy()
        for jitter in [RetryPolicy.Jitter.full, .equal] {
            policy.jitter = jitter
            for attempt in 1...8 {
                let ceiling = min(Duration.milliseconds(250) * (1 << (attempt - 1)), .seconds(30))
                let delay = policy.backoff(afterAttempt: attempt)
                #expect(delay >= (jitter == .equal ? ceiling / 2 : .zero) && delay <= ceiling)
            }
        }
    }

    @Test("attempts run out: give up")
    func maxAttempts() {
        let policy = Self.policy { $0.maxAttempts = 3 }
        let failure = APNsSendResult.failed(APNsTransportFailure(.connectFailed))
        #expect(policy.decide(failure, attempt: 2, now: Self.now, deadline: nil) == .retry(after: .milliseconds(500)))
        #expect(policy.decide(failure, attempt: 3, now: Self.now, deadline: nil) == .giveUp)
    }

    @Test("transport failures: not processed is resent; unknown outcome only if allowed")
    func transport() {
        let unknown = APNsSendResult.failed(APNsTransportFailure(.connectionLost))
        let refused = APNsSendResult.failed(APNsTransportFailure(.refusedStream))
        #expect(Self.policy().decide(unknown, attempt: 1, now: Self.now, deadline: nil) == .retry(after: .milliseconds(250)))
        let careful = Self.policy { $0.resendWhenOutcomeUnknown = false }
        #expect(careful.decide(unknown, attempt: 1, now: Self.now, deadline: nil) == .giveUp)
        #expect(careful.decide(refused, attempt: 1, now: Self.now, deadline: nil) == .retry(after: .milliseconds(250)))
    }

    // MARK: deadline

    @Test("deadline from apns-expiration")
    func deadlines() {
        let policy = Self.policy()
        #expect(policy.deadline(for: .at(epochSeconds: 1_750_000_600), firstAttemptAt: Self.now) == Date(timeIntervalSince1970: 1_750_000_600))
        #expect(policy.deadline(for: .immediately, firstAttemptAt: Self.now) == Self.now.addingTimeInterval(30))
        #expect(policy.deadline(for: .unspecified, firstAttemptAt: Self.now) == Self.now.addingTimeInterval(3_600))
        let unlimited = Self.policy { $0.unspecifiedExpirationWindow = nil }
        #expect(unlimited.deadline(for: .unspecified, firstAttemptAt: Self.now) == nil)
    }

    @Test("no retry after the deadline, nor one whose delay would end after it")
    func expired() {
        let policy = Self.policy()
        let failure = APNsSendResult.response(.rejected(status: 500, reason: .internalServerError, timestamp: nil))
        let deadline = Self.now.addingTimeInterval(1)
        // Attempt 3 waits 1 s: exactly at the deadline is still allowed.
        #expect(policy.decide(failure, attempt: 3, now: Self.now, deadline: deadline) == .retry(after: .seconds(1)))
        // Attempt 4 would wait 2 s: past it.
        #expect(policy.decide(failure, attempt: 4, now: Self.now, deadline: deadline) == .expired)
        // Already past.
        #expect(policy.decide(failure, attempt: 1, now: deadline.addingTimeInterval(0.001), deadline: deadline) == .expired)
        // Accepted or definitive stay done even after the deadline.
        #expect(policy.decide(Self.rejected(.badTopic, 400), attempt: 1, now: deadline.addingTimeInterval(60), deadline: deadline) == .done)
    }

    @Test("a try-once notification is only retried within its window")
    func tryOnce() {
        let policy = Self.policy()
        let deadline = policy.deadline(for: .immediately, firstAttemptAt: Self.now)
        let failure = APNsSendResult.failed(APNsTransportFailure(.goAwayUnprocessed))
        #expect(policy.decide(failure, attempt: 1, now: Self.now, deadline: deadline) == .retry(after: .milliseconds(250)))
        #expect(policy.decide(failure, attempt: 1, now: Self.now.addingTimeInterval(31), deadline: deadline) == .expired)
    }

    @Test("deciding from the expiration directly")
    func decideWithExpiration() {
        let policy = Self.policy()
        let failure = APNsSendResult.failed(APNsTransportFailure(.connectFailed))
        #expect(policy.decide(failure, attempt: 1, now: Self.now, expiration: .at(epochSeconds: 1_750_000_000), firstAttemptAt: Self.now)
            == .expired)
        #expect(policy.decide(failure, attempt: 1, now: Self.now, expiration: .at(epochSeconds: 1_750_000_060), firstAttemptAt: Self.now)
            == .retry(after: .milliseconds(250)))
        #expect(policy.decide(failure, attempt: 1, now: Self.now.addingTimeInterval(3_600), expiration: .unspecified, firstAttemptAt: Self.now)
            == .expired)
    }

    // MARK: 429

    @Test("429 TooManyRequests waits at least tooManyRequestsDelay, or until the token's notBefore")
    func tooManyRequests() {
        let policy = Self.policy()
        let result = Self.rejected(.tooManyRequests, 429)
        #expect(policy.decide(result, attempt: 1, now: Self.now, deadline: nil) == .retry(after: .seconds(60)))
        #expect(policy.decide(result, attempt: 1, now: Self.now, deadline: nil, notBefore: Self.now.addingTimeInterval(120))
            == .retry(after: .seconds(120)))
        // A 429 on a notification expiring sooner than the wait: expired, not hammered.
        #expect(policy.decide(result, attempt: 1, now: Self.now, deadline: Self.now.addingTimeInterval(30)) == .expired)
        // TooManyProviderTokenUpdates is about the JWT, not the device: plain backoff.
        #expect(policy.decide(Self.rejected(.tooManyProviderTokenUpdates, 429), attempt: 1, now: Self.now, deadline: nil)
            == .retry(after: .milliseconds(250)))
    }

    @Test("the 429 throttle is per token, doubles on repeats, resets on acceptance")
    func throttle() throws {
        var throttle = TooManyRequestsThrottle(baseDelay: .seconds(60), maxDelay: .seconds(300))
        let other = try DeviceToken(String(repeating: "ef", count: 32))
        #expect(throttle.nextAllowedSend(for: Self.token) == nil)
        #expect(throttle.delay(for: Self.token, now: Self.now) == .zero)

        #expect(throttle.recordTooManyRequests(for: Self.token, at: Self.now) == Self.now.addingTimeInterval(60))
        #expect(throttle.delay(for: Self.token, now: Self.now.addingTimeInterval(15)) == .seconds(45))
        #expect(throttle.delay(for: other, now: Self.now) == .zero)

        let second = Self.now.addingTimeInterval(61)
        #expect(throttle.recordTooManyRequests(for: Self.token, at: second) == second.addingTimeInterval(120))
        let third = second.addingTimeInterval(121)
        #expect(throttle.recordTooManyRequests(for: Self.token, at: third) == third.addingTimeInterval(240))
        let fourth = third.addingTimeInterval(241)
        #expect(throttle.recordTooManyRequests(for: Self.token, at: fourth) == fourth.addingTimeInterval(300))

        throttle.recordAccepted(for: Self.token)
        #expect(throttle.nextAllowedSend(for: Self.token) == nil)
        #expect(throttle.recordTooManyRequests(for: Self.token, at: fourth) == fourth.addingTimeInterval(60))

        // Long quiet: the history is forgotten, both by counting and by prune.
        let later = fourth.addingTimeInterval(10_000)
        #expect(throttle.recordTooManyRequests(for: Self.token, at: later) == later.addingTimeInterval(60))
        throttle.recordTooManyRequests(for: other, at: later)
        #expect(throttle.count == 2)
        throttle.prune(now: later.addingTimeInterval(60 + 299))
        #expect(throttle.count == 2)
        throttle.prune(now: later.addingTimeInterval(60 + 300))
        #expect(throttle.count == 0)
    }

    @Test("the throttle reads attempt results: only 429 TooManyRequests throttles, acceptance clears")
    func throttleFromResults() {
        var throttle = TooManyRequestsThrottle(baseDelay: .seconds(60))
        throttle.record(Self.rejected(.tooManyProviderTokenUpdates, 429), for: Self.token, at: Self.now)
        throttle.record(Self.rejected(.serviceUnavailable, 503), for: Self.token, at: Self.now)
        throttle.record(.failed(APNsTransportFailure(.connectionLost)), for: Self.token, at: Self.now)
        #expect(throttle.nextAllowedSend(for: Self.token) == nil)
        throttle.record(Self.rejected(.tooManyRequests, 429), for: Self.token, at: Self.now)
        #expect(throttle.nextAllowedSend(for: Self.token) == Self.now.addingTimeInterval(60))
        throttle.record(.response(.accepted(apnsID: "x", uniqueID: nil)), for: Self.token, at: Self.now)
        #expect(throttle.nextAllowedSend(for: Self.token) == nil)
    }

    @Test("the throttle's next allowed send replaces the fixed 429 delay")
    func throttleAndPolicy() {
        var throttle = TooManyRequestsThrottle(baseDelay: .seconds(10))
        let policy = Self.policy { $0.maxAttempts = 10 }
        let next = throttle.recordTooManyRequests(for: Self.token, at: Self.now)
        #expect(policy.decide(Self.rejected(.tooManyRequests, 429), attempt: 1, now: Self.now, deadline: nil, notBefore: next)
            == .retry(after: .seconds(10)))
        // Backoff still applies when it is longer.
        #expect(policy.decide(Self.rejected(.tooManyRequests, 429), attempt: 8, now: Self.now, deadline: nil, notBefore: next)
            == .retry(after: .seconds(30)))
        // A throttle that already ended adds nothing beyond the fixed delay.
        #expect(policy.decide(Self.rejected(.tooManyRequests, 429), attempt: 1, now: next, deadline: nil, notBefore: next)
            == .retry(after: .seconds(60)))
    }
}
