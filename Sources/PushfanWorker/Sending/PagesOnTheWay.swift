import PushfanMessages
import PushfanSupport

/// The pages of one task that are claimed but not yet wholly on the wire to APNs. The task reads
/// and claims its next page while fewer than a few are on the way (`ShardSender.pagesAhead`),
/// so the lane's rate bucket always has requests ready behind the ones being sent, however long earlier
/// pages wait for their slowest answers; and the task tells the scheduler its sending is
/// done once none is left on the way.
final class PagesOnTheWay: Sendable {
    /// One page's part. It is on the wire once the transmitter has started its last batch
    /// (`allLaunched`) and the APNs client has started every request of every batch on a
    /// stream (`batchStarted`), or once its round has ended (`handed`), whichever comes
    /// first. Requests waiting in the client's queue for a stream still count as on the way,
    /// so a sender with no room (0 ms answers, the streams busy) is not handed pages it can
    /// only queue.
    final class Page: Sendable {
        private struct Progress {
            var unstartedBatches = 0
            var allLaunched = false
            var done = false
        }

        private let pages: PagesOnTheWay
        private let progress = Locked(Progress())

        fileprivate init(_ pages: PagesOnTheWay) { self.pages = pages }

        /// A batch of the page was handed to the APNs client.
        func batchLaunched() { update { $0.unstartedBatches += 1 } }

        /// Every request of one launched batch is on a stream (called on the client's thread).
        func batchStarted() { update { $0.unstartedBatches -= 1 } }

        /// No further batch of the page will start.
        func allLaunched() { update { $0.allLaunched = true } }

        /// The page's round ended: whatever is left of it is not on the way any more.
        func handed() { update { $0.done = true } }

        private func update(_ change: (inout Progress) -> Void) {
            let nowOnTheWire = progress.withLock { progress -> Bool in
                let before = progress.done || (progress.allLaunched && progress.unstartedBatches == 0)
                change(&progress)
                let after = progress.done || (progress.allLaunched && progress.unstartedBatches == 0)
                if after { progress.done = true }
                return after && !before
            }
            if nowOnTheWire { pages.change { $0.count -= 1 } }
        }
    }

    fileprivate struct State {
        var count = 0
        /// The owning task, waiting for fewer pages on the way.
        var waiter: CheckedContinuation<Void, Never>?
    }

    fileprivate let state = Locked(State())

    /// A page now on its way.
    func add() -> Page {
        change { $0.count += 1 }
        return Page(self)
    }

    /// Waits until fewer than `limit` pages are on the way; the task that owns this is its
    /// only waiter. Throws `CancellationError` when the task is cancelled.
    func wait(below limit: Int) async throws {
        while state.withLock({ $0.count }) >= limit {
            try Task.checkCancellation()
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let now = state.withLock { state -> Bool in
                        guard state.count >= limit, !Task.isCancelled else { return true }
                        state.waiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                change { _ in }
            }
        }
        try Task.checkCancellation()
    }

    /// Changes the count and wakes the waiter, which looks again.
    fileprivate func change(_ update: (inout State) -> Void) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            update(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
