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
    /// Pairs kept at most (`failed` says which go past it).
    package let capacity: Int
    private var failures: [String: (count: Int, since: ContinuousClock.Instant)] = [:]

    package init(limit: Int = 10, window: Duration = .seconds(60), capacity: Int = 100_000) {
        self.limit = limit
        self.window = window
        self.capacity = max(2, capacity)
    }

    /// The pairs tracked now.
    package var tracked: Int { failures.count }

    /// A credential longer than any app key or key id counts under its first bytes: made-up
    /// ones of any length then cost the same memory.
    private static func key(_ credential: String, _ client: String) -> String {
        String(decoding: credential.utf8.prefix(160), as: UTF8.self) + "\u{0}" + client
    }

    /// Seconds the client must wait before trying this credential again, or nil when it may.
    package func retryAfter(credential: String, client: String, now: ContinuousClock.Instant) -> Int? {
        guard let entry = failures[Self.key(credential, client)], entry.count >= limit else { return nil }
        let left = entry.since + window - now
        guard left > .zero else { return nil }
        return max(1, Int((Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18).rounded(.up)))
    }

    /// Counts a failure. Past `capacity` pairs, those whose window has passed go; if a flood
    /// of made-up credentials still fills more than half, pairs go down to half, the fewest
    /// failures first (the newest of equal ones first), so memory stays bounded, the sweep's
    /// cost is spread over the failures that filled it, and a guesser's count outlives the
    /// one-off failures it floods with.
    package mutating func failed(credential: String, client: String, now: ContinuousClock.Instant) {
        let key = Self.key(credential, client)
        if let entry = failures[key], now - entry.since < window {
            failures[key] = (entry.count + 1, entry.since)
        } else {
            failures[key] = (1, now)
        }
        guard failures.count > capacity else { return }
        failures = failures.filter { now - $0.value.since < window }
        guard failures.count > capacity / 2 else { return }
        let kept = failures.sorted { a, b in
            a.value.count != b.value.count ? a.value.count > b.value.count : a.value.since < b.value.since
        }.prefix(capacity / 2)
        failures = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
    }

    package mutating func succeeded(credential: String, client: String) { failures[Self.key(credential, client)] = nil }
}
