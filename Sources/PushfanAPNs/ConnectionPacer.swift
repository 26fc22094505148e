import Foundation

/// Paces new connections. Apple treats rapid connect/disconnect as an attack,
/// and libcurl 7.88 closes a whole connection and connects again whenever a
/// stream is refused (REFUSED_STREAM, as APNs does while its stream limit is
/// low), which would turn a limit drop into a reconnect storm. A token bucket:
/// `burst` connects at once, then one per `interval`.
final class ConnectionPacer {
    private var tokens: Double
    private let capacity: Double
    private let interval: Duration
    private var last = ContinuousClock.now

    init(burst: Int, interval: Duration) {
        capacity = Double(burst)
        tokens = capacity
        self.interval = interval
    }

    func tryAcquire() -> Bool {
        refill()
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// When the next connect will be allowed.
    var nextAllowed: ContinuousClock.Instant {
        refill()
        return tokens >= 1 ? last : last + interval * (1 - tokens)
    }

    private func refill() {
        let now = ContinuousClock.now
        tokens = min(capacity, tokens + (now - last) / interval)
        last = now
    }
}
