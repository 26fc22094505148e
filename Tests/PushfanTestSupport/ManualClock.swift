import Foundation
import PushfanSupport

/// The one clock tests move by hand, for every module that takes a `ServiceClock`: the
/// monotonic and the wall time move together, and sleepers wake when `advance` passes
/// their deadline. Nothing in a test that uses it waits for real time to pass.
package final class ManualClock: ServiceClock {
    private struct Sleeper {
        let id: Int
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = ContinuousClock.now
        var wall: Date
        var sleepers: [Sleeper] = []
        var nextID = 0
    }

    private let state: Locked<State>

    /// `wall`: where the wall time starts (a fixed moment unless a test needs the real one,
    /// such as a provider token a real simulator checks).
    package init(wall: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Locked(State(wall: wall))
    }

    package var now: ContinuousClock.Instant { state.withLock { $0.now } }
    package var wall: Date { state.withLock { $0.wall } }

    /// Tasks waiting on this clock now.
    package var sleeping: Int { state.withLock { $0.sleepers.count } }

    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Bool in
                    if deadline <= state.now || Task.isCancelled { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
            try Task.checkCancellation()
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time on and wakes everyone whose deadline has come.
    package func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now += duration
            state.wall += Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Moves time on to the earliest deadline a task sleeps until, and wakes it (and any
    /// other due then); false when nobody sleeps. Time never jumps past a sleeper.
    @discardableResult
    package func advanceToNextDeadline() -> Bool {
        let next = state.withLock { state in state.sleepers.map(\.deadline).min().map { $0 - state.now } }
        guard let next else { return false }
        advance(by: max(next, .zero))
        return true
    }

    package func advance(seconds: Double) { advance(by: .milliseconds(Int64((seconds * 1000).rounded()))) }
    package func advance(minutes: Double) { advance(seconds: minutes * 60) }

    /// Waits (yielding, never sleeping) until `count` tasks sleep on this clock.
    package func waitForSleepers(_ count: Int) async {
        while sleeping < count { await Task.yield() }
    }
}
