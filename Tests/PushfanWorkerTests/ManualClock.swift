import Foundation
import PushfanCore
@testable import PushfanWorker

/// A clock the test moves by hand: sleepers wake when `advance` passes their deadline.
final class ManualClock: WorkerClock {
    private struct Sleeper {
        let id: Int
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = ContinuousClock.now
        var wall = Date(timeIntervalSince1970: 1_800_000_000)
        var sleepers: [Sleeper] = []
        var nextID = 0
    }

    private let state = Locked(State())

    var now: ContinuousClock.Instant { state.withLock { $0.now } }
    /// Moves with `now`, from a fixed start.
    var wall: Date { state.withLock { $0.wall } }

    /// Tasks waiting on this clock now.
    var sleeping: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
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
    func advance(by duration: Duration) {
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

    /// Waits (yielding, never sleeping) until `count` tasks sleep on this clock.
    func waitForSleepers(_ count: Int) async {
        while sleeping < count { await Task.yield() }
    }
}
