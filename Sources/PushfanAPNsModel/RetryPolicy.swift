import Foundation
import PushfanSupport

/// When to send a notification again, as a pure function of what happened.
///
/// - Accepted, or refused for good (invalid token, bad request, credentials,
///   Forbidden, PayloadTooLarge): `.done`; the caller acts on the outcome's
///   disposition. A definitive rejection is never resent.
/// - Transient (5xx, 429, IdleTimeout, ExpiredProviderToken,
///   UnrelatedKeyIdInToken) and transport failures: `.retry(after:)` with
///   exponential backoff and jitter; 429 TooManyRequests waits at least until
///   the token's `notBefore` (see `TooManyRequestsThrottle`) or
///   `tooManyRequestsDelay`.
/// - A failure whose outcome is unknown is resent only if
///   `resendWhenOutcomeUnknown` (the default; the collapse id hides the
///   duplicate on the device).
/// - No retry may start after the deadline (`deadline(for:firstAttemptAt:)`,
///   from `apns-expiration`): `.expired`. After `maxAttempts`: `.giveUp`.
package struct RetryPolicy: Sendable {
    /// How the backoff delay is randomised, so that many notifications failing
    /// together do not come back together.
    package enum Jitter: String, Sendable, Hashable {
        /// Exactly the exponential delay.
        case none
        /// Uniform in 0...delay.
        case full
        /// delay/2 plus uniform in 0...delay/2.
        case equal
    }

    /// What to do after an attempt.
    package enum Decision: Sendable, Hashable {
        /// Nothing more to send: accepted, or a rejection that resending
        /// cannot fix.
        case done
        /// Send again after this delay.
        case retry(after: Duration)
        /// The notification's deadline passed (or would before the delay ends).
        case expired
        /// Attempts used up, or an unknown outcome that is not to be resent.
        case giveUp
    }

    /// Most attempts per notification, the first included. Default 5.
    package var maxAttempts: Int = 5
    /// Delay before the first retry; doubled for each further one. Default 250 ms.
    package var baseDelay: Duration = .milliseconds(250)
    /// Longest backoff delay. Default 30 s.
    package var maxDelay: Duration = .seconds(30)
    /// Default `.full`.
    package var jitter: Jitter = .full
    /// Least delay after 429 TooManyRequests when the caller keeps no per-token
    /// bookkeeping. Default 60 s.
    package var tooManyRequestsDelay: Duration = .seconds(60)
    /// How long a try-once notification (`apns-expiration: 0`) may still be
    /// resent after its first attempt. Default 30 s.
    package var tryOnceWindow: Duration = .seconds(30)
    /// Deadline for notifications without `apns-expiration`, after the first
    /// attempt; nil means only `maxAttempts` limits them. Default 1 hour.
    package var unspecifiedExpirationWindow: Duration? = .seconds(3_600)
    /// Resend after a failure that may have been processed. Default true.
    package var resendWhenOutcomeUnknown: Bool = true
    /// Uniform random numbers in 0..<1 for the jitter; injectable for tests.
    package var random: @Sendable () -> Double = { Double.random(in: 0..<1) }

    package init() {}

    /// The last moment a retry may start: `apns-expiration` itself; for
    /// try-once notifications the first attempt plus `tryOnceWindow`; without
    /// expiration the first attempt plus `unspecifiedExpirationWindow`.
    package func deadline(for expiration: APNsNotification.Expiration, firstAttemptAt: Date) -> Date? {
        switch expiration {
        case .at(let seconds): return Date(timeIntervalSince1970: TimeInterval(seconds))
        case .immediately: return firstAttemptAt.addingTimeInterval(Self.seconds(tryOnceWindow))
        case .unspecified: return unspecifiedExpirationWindow.map { firstAttemptAt.addingTimeInterval(Self.seconds($0)) }
        }
    }

    /// Decides after attempt number `attempt` (1 for the first) ended with
    /// `result` at `now`.
    ///
    /// - Parameters:
    ///   - deadline: from `deadline(for:firstAttemptAt:)`; nil for none.
    ///   - notBefore: the earliest next send to this token
    ///     (`TooManyRequestsThrottle.nextAllowedSend(for:)`), if known.
    package func decide(
        _ result: APNsSendResult, attempt: Int, now: Date, deadline: Date?, notBefore: Date? = nil
    ) -> Decision {
        var minimumDelay = Duration.zero
        switch result {
        case .response(.accepted):
            return .done
        case .response(.rejected(let status, let reason, _)):
            guard reason.disposition(status: status).isRetriable else { return .done }
            if reason == .tooManyRequests { minimumDelay = tooManyRequestsDelay }
        case .failed(let failure):
            if failure.certainty == .outcomeUnknown && !resendWhenOutcomeUnknown { return .giveUp }
        }
        if let notBefore, notBefore > now {
            minimumDelay = .seconds(notBefore.timeIntervalSince(now))
        }
        let delay = max(backoff(afterAttempt: attempt), minimumDelay)
        if let deadline, now.addingTimeInterval(Self.seconds(delay)) > deadline { return .expired }
        if attempt >= maxAttempts { return .giveUp }
        return .retry(after: delay)
    }

    /// `decide` with the deadline taken from the notification's expiration.
    package func decide(
        _ result: APNsSendResult, attempt: Int, now: Date, expiration: APNsNotification.Expiration,
        firstAttemptAt: Date, notBefore: Date? = nil
    ) -> Decision {
        decide(
            result, attempt: attempt, now: now, deadline: deadline(for: expiration, firstAttemptAt: firstAttemptAt),
            notBefore: notBefore)
    }

    /// The jittered exponential delay before attempt `attempt + 1`:
    /// `min(maxDelay, baseDelay * 2^(attempt-1))`, then jitter.
    package func backoff(afterAttempt attempt: Int) -> Duration {
        let exponent = Double(min(max(attempt - 1, 0), 62))
        let ceiling = min(Self.seconds(maxDelay), Self.seconds(baseDelay) * pow(2, exponent))
        let unit = min(max(random(), 0), 1)
        let seconds: Double
        switch jitter {
        case .none: seconds = ceiling
        case .full: seconds = ceiling * unit
        case .equal: seconds = ceiling / 2 + ceiling / 2 * unit
        }
        return .seconds(seconds)
    }

    static func seconds(_ duration: Duration) -> Double { duration.seconds }
}

/// Per-token bookkeeping for 429 TooManyRequests, which APNs sends when one
/// device token gets too many notifications: that token (and only it) waits,
/// longer each time it is refused again.
///
/// A value type; a sender shares one behind a `Locked`. Entries are dropped by
/// `recordAccepted` and `prune`, so memory stays bounded by the tokens
/// currently throttled.
package struct TooManyRequestsThrottle: Sendable {
    private struct Entry: Sendable {
        var refusals: Int
        var until: Date
    }

    /// Wait after the first 429 for a token; doubled for each further one
    /// while still throttled. Default 60 s.
    package var baseDelay: Duration
    /// Longest wait. Default 15 minutes.
    package var maxDelay: Duration
    private var entries: [DeviceToken: Entry] = [:]

    package init(baseDelay: Duration = .seconds(60), maxDelay: Duration = .seconds(900)) {
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// Records a 429 TooManyRequests for `token`; returns the earliest next send.
    /// A refusal counts as repeated when it comes before the previous wait
    /// plus `maxDelay` has passed.
    @discardableResult
    package mutating func recordTooManyRequests(for token: DeviceToken, at now: Date) -> Date {
        var refusals = 1
        if let previous = entries[token], now < previous.until.addingTimeInterval(RetryPolicy.seconds(maxDelay)) {
            refusals = previous.refusals + 1
        }
        let exponent = Double(min(refusals - 1, 62))
        let wait = min(RetryPolicy.seconds(maxDelay), RetryPolicy.seconds(baseDelay) * pow(2, exponent))
        let until = now.addingTimeInterval(wait)
        entries[token] = Entry(refusals: refusals, until: until)
        return until
    }

    /// The token was accepted: forget its history.
    package mutating func recordAccepted(for token: DeviceToken) {
        entries[token] = nil
    }

    /// Updates the bookkeeping from one attempt's result: a 429 TooManyRequests
    /// extends the token's wait, an acceptance clears it, anything else leaves
    /// it as it was.
    package mutating func record(_ result: APNsSendResult, for token: DeviceToken, at now: Date) {
        switch result {
        case .response(.accepted): recordAccepted(for: token)
        case .response(.rejected(429, .tooManyRequests, _)): recordTooManyRequests(for: token, at: now)
        default: break
        }
    }

    /// The earliest next send to `token`, or nil if it is not throttled (a
    /// past date may be returned until `prune`).
    package func nextAllowedSend(for token: DeviceToken) -> Date? {
        entries[token]?.until
    }

    /// How long a send to `token` must still wait at `now`; zero if none.
    package func delay(for token: DeviceToken, now: Date) -> Duration {
        guard let until = entries[token]?.until, until > now else { return .zero }
        return .seconds(until.timeIntervalSince(now))
    }

    /// Drops tokens whose wait ended more than `maxDelay` ago.
    package mutating func prune(now: Date) {
        let horizon = RetryPolicy.seconds(maxDelay)
        entries = entries.filter { now < $0.value.until.addingTimeInterval(horizon) }
    }

    /// Tokens with an entry.
    package var count: Int { entries.count }
}
