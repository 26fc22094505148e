import PushfanMessages
import PushfanSupport

/// What the store answered lately per app, so that a busy API does not read the same row on
/// every request. An answer counts for its `lifetime` (which may depend on the answer); a
/// change made in this process forgets the app at once, one made elsewhere reaches this
/// process when the answer's lifetime ends.
final class RecentReads<Value: Sendable>: Sendable {
    private let lifetime: @Sendable (Value) -> Duration
    private let entries = Locked<[String: (value: Value, readAt: ContinuousClock.Instant)]>([:])
    private let clock: any ServiceClock

    init(clock: any ServiceClock, lifetime: @escaping @Sendable (Value) -> Duration) {
        self.clock = clock
        self.lifetime = lifetime
    }

    /// The time to pass as `readAt`: taken before the read, so a change committed during it
    /// is not hidden for a whole lifetime.
    var now: ContinuousClock.Instant { clock.now }

    func fresh(_ app: String) -> Value? {
        entries.withLock { entries in
            guard let entry = entries[app], entry.readAt.duration(to: clock.now) < lifetime(entry.value) else { return nil }
            return entry.value
        }
    }

    func keep(_ app: String, _ value: Value, readAt: ContinuousClock.Instant? = nil) {
        let readAt = readAt ?? clock.now
        entries.withLock { $0[app] = (value, readAt) }
    }

    func forget(_ app: String) {
        _ = entries.withLock { $0.removeValue(forKey: app) }
    }
}
