/// The time the worker's limits and waits run on (rate buckets, app pauses, lane circuits):
/// the system's monotonic clock in production, a clock tests move by hand, so a rate or a
/// pause is tested by moving time instead of sleeping.
package protocol WorkerClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// Returns at `deadline`, or throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

/// `ContinuousClock`: monotonic, and counting while the machine sleeps.
package struct SystemClock: WorkerClock {
    package init() {}
    package var now: ContinuousClock.Instant { .now }
    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }
}
