import Foundation

/// Failed authentications per client address: after `limit` within `window`, that address
/// is refused (429 with Retry-After) until the window since its first failure has passed.
/// A pure value; the service keeps it under a lock and passes the time in.
package struct AuthThrottle: Sendable {
    package let limit: Int
    package let window: Duration
    private var failures: [String: (count: Int, since: ContinuousClock.Instant)] = [:]

    package init(limit: Int = 10, window: Duration = .seconds(60)) {
        self.limit = limit
        self.window = window
    }

    /// Seconds the address must wait, or nil when it may try.
    package func retryAfter(_ address: String, now: ContinuousClock.Instant) -> Int? {
        guard let entry = failures[address], entry.count >= limit else { return nil }
        let left = entry.since + window - now
        guard left > .zero else { return nil }
        return max(1, Int((Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18).rounded(.up)))
    }

    package mutating func failed(_ address: String, now: ContinuousClock.Instant) {
        if let entry = failures[address], now - entry.since < window {
            failures[address] = (entry.count + 1, entry.since)
        } else {
            failures[address] = (1, now)
        }
        if failures.count > 100_000 { failures = failures.filter { now - $0.value.since < window } }
    }

    package mutating func succeeded(_ address: String) { failures[address] = nil }
}
