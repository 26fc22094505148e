import Foundation

/// The time a service runs on, injected into the worker, the API and the store: monotonic
/// for limits, deadlines and waits (rate buckets, app pauses, circuits, retries, caches),
/// wall time for what other processes share (leases, expirations, timestamps in records and
/// rows). The system's clocks in production; tests move a manual clock by hand, so a rate
/// or a pause is tested by moving time instead of sleeping.
///
/// This file is the one place that reads the machine's clocks.
package protocol ServiceClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// The wall-clock time.
    var wall: Date { get }
    /// Returns at `deadline`, or throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

extension ServiceClock {
    /// `wall` in milliseconds since the epoch, as the store and the records keep it.
    package var wallMillis: Int64 { epochMillis(wall) }

    /// Returns after `duration`, or throws `CancellationError` when the task is cancelled.
    package func sleep(for duration: Duration) async throws {
        try await sleep(until: now + duration)
    }
}

/// `ContinuousClock`: monotonic, and counting while the machine sleeps. (Tests of local
/// times hours away run the CLI with a clock of their own: Tests/ShiftedClock.)
package struct SystemClock: ServiceClock {
    package init() {}
    package var now: ContinuousClock.Instant { .now }
    package var wall: Date { Date() }
    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }

    /// The machine's own wall time, for what must show it whatever a service's clock says:
    /// log lines, which are read beside other processes' logs.
    package static func machineTime() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
    }

    /// The machine's monotonic time in milliseconds, for an event loop's own deadlines
    /// (slow clients, idle connections), which are measured against real time.
    package static func monotonicMillis() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

/// `date` in milliseconds since the epoch.
package func epochMillis(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970 * 1000) }
