import PushfanMessages
import PushfanSupport

/// Whether a batch handed to the client is wholly on streams (each of its environments'
/// parts). The transmitter takes the next batch's tokens only once the previous batch has
/// started: tokens taken while the client cannot start requests (a connection opening, its
/// thread short of CPU) would be spent on requests that then leave together, above the rate
/// in the second they arrive. Waiting for the start lets the bucket save at most its burst.
final class BatchStart: Sendable {
    private struct State {
        var parts: Int
        var waiters: [@Sendable () -> Void] = []
    }

    private let state: Locked<State>

    init(parts: Int) {
        state = Locked(State(parts: parts))
    }

    /// One part is on streams (called on the client's thread, or when it failed to start).
    func partStarted() {
        let waiters = state.withLock { state -> [@Sendable () -> Void] in
            state.parts -= 1
            guard state.parts <= 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter() }
    }

    /// Returns once every part has started, or after `limit` (a client that never starts a
    /// request must not stop the lane; its requests fail on their own timeouts).
    func wait(atMost limit: Duration, clock: any ServiceClock) async {
        if state.withLock({ $0.parts <= 0 }) { return }
        let deadline = clock.now + limit
        let timer = Locked<Task<Void, Never>?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let pending = Locked<CheckedContinuation<Void, Never>?>(continuation)
            let resume: @Sendable () -> Void = {
                pending.withLock { waiting -> CheckedContinuation<Void, Never>? in
                    defer { waiting = nil }
                    return waiting
                }?.resume()
            }
            let registered = state.withLock { state -> Bool in
                guard state.parts > 0 else { return false }
                state.waiters.append(resume)
                return true
            }
            guard registered else { return resume() }
            timer.withLock {
                $0 = Task {
                    try? await clock.sleep(until: deadline)
                    resume()
                }
            }
        }
        timer.withLock { $0 }?.cancel()
    }
}
