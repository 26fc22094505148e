import Synchronization

/// The worker's "stop now" flag, and sleeps that end early when it is raised, so a wait
/// between retries never holds a shutdown past its bound.
package final class StopSignal: Sendable {
    private let raised = Atomic<Bool>(false)

    package init() {}

    package var isRaised: Bool { raised.load(ordering: .relaxed) }

    package func raise() { raised.store(true, ordering: .relaxed) }

    /// Sleeps up to `duration`, waking within 50 ms of `raise()` (or of cancellation).
    package func sleep(for duration: Duration) async {
        let end = ContinuousClock.now + duration
        while !isRaised, !Task.isCancelled, ContinuousClock.now < end {
            try? await Task.sleep(for: min(.milliseconds(50), end - ContinuousClock.now))
        }
    }
}
