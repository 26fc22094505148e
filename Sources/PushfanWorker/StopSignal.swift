import PushfanMessages
import PushfanSupport
import Synchronization

/// The worker's "stop now" flag, and sleeps that end early when it is raised, so a wait
/// between retries never holds a shutdown past its bound.
package final class StopSignal: Sendable {
    private let raised = Atomic<Bool>(false)
    private let clock: any ServiceClock

    package init(clock: any ServiceClock) { self.clock = clock }

    package var isRaised: Bool { raised.load(ordering: .relaxed) }

    package func raise() { raised.store(true, ordering: .relaxed) }

    /// Sleeps up to `duration`, waking within 50 ms of `raise()` (or of cancellation).
    package func sleep(for duration: Duration) async {
        let end = clock.now + duration
        while !isRaised, !Task.isCancelled, clock.now < end {
            try? await clock.sleep(until: min(clock.now + .milliseconds(50), end))
        }
    }
}
