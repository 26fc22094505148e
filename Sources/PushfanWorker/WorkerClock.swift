import Foundation
import PushfanTopics

/// The time the worker runs on: monotonic for its limits and waits (rate buckets, app
/// pauses, lane circuits, retries), wall time for what other processes share (leases in
/// the ledger, expirations, timestamps). The system's clocks in production; a clock tests
/// move by hand, so a rate or a pause is tested by moving time instead of sleeping.
package protocol WorkerClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// The wall-clock time.
    var wall: Date { get }
    /// Returns at `deadline`, or throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

/// `ContinuousClock`: monotonic, and counting while the machine sleeps. `offset` shifts the
/// wall clock (`worker.clock_offset_s`), for tests of local times that are hours away; the
/// simulator's `--clock-offset` must match it, or provider tokens look expired.
package struct SystemClock: WorkerClock {
    package let offset: TimeInterval
    package init(offset: TimeInterval = 0) { self.offset = offset }
    package var now: ContinuousClock.Instant { .now }
    package var wall: Date { Date(timeIntervalSinceNow: offset) }
    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }
}

extension WorkerClock {
    /// `wall` in milliseconds since the epoch, as the store and the records keep it.
    package var wallMillis: Int64 { epochMillis(wall) }
}
