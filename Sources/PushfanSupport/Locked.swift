#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value only reachable under a pthread mutex; Pushfan's one lock.
///
/// Why not `Synchronization.Mutex`: on Linux its contended path (`_lockSlow`, compiled into
/// the toolchain without instrumentation) hands the lock over inside the kernel
/// (`FUTEX_LOCK_PI`), so ThreadSanitizer never sees the acquisition and reports every
/// contended critical section as a race. `pthread_mutex_lock` is one of the calls
/// ThreadSanitizer intercepts, so with this lock its reports are real ones.
package final class Locked<Value>: @unchecked Sendable {
    // Allocated, not stored inline: a pthread mutex must not move, and Swift promises no
    // stable address for `&` of a stored property.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock; the same shape as
    /// `Mutex.withLock`, so nothing the value holds can escape unlocked.
    package func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
