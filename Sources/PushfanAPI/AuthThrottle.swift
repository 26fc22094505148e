import Foundation

/// Failed authentications per credential (an app key, the admin token) and client address
/// together: after `limit` within `window`, that credential from that client is refused
/// (429 with Retry-After) until the window since its first failure has passed. Keyed by the
/// pair, so that behind a proxy one client's bad tries lock out neither other clients nor
/// other apps, and a wrong admin token never blocks device registration. A pure value; the
/// service keeps it under a lock and passes the time in.
package struct AuthThrottle: Sendable {
    package let limit: Int
    package let window: Duration
    private var failures: [String: (count: Int, since: ContinuousClock.Instant)] = [:]

    package init(limit: Int = 10, window: Duration = .seconds(60)) {
        self.limit = limit
        self.window = window
    }

    private static func key(_ credential: String, _ client: String) -> String { credential + "\u{0}" + client }

    /// Seconds the client must wait before trying this credential again, or nil when it may.
    package func retryAfter(credential: String, client: String, now: ContinuousClock.Instant) -> Int? {
        guard let entry = failures[Self.key(credential, client)], entry.count >= limit else { return nil }
        let left = entry.since + window - now
        guard left > .zero else { return nil }
        return max(1, Int((Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18).rounded(.up)))
    }

    package mutating func failed(credential: String, client: String, now: ContinuousClock.Instant) {
        let key = Self.key(credential, client)
        if let entry = failures[key], now - entry.since < window {
            failures[key] = (entry.count + 1, entry.since)
        } else {
            failures[key] = (1, now)
        }
        if failures.count > 100_000 { failures = failures.filter { now - $0.value.since < window } }
    }

    package mutating func succeeded(credential: String, client: String) { failures[Self.key(credential, client)] = nil }
}
