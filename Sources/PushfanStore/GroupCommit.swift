import PushfanMessages
import PushfanSupport

/// Group commit for single-row writes that arrive one call at a time (a device's
/// registration, a transactional message's campaign row, an operator-log entry). Calls that arrive while a group is
/// being written wait and go together in the next transaction, on the first connection: one
/// commit (one write lock, one pass of SQLite's file locks, the WAL pages they share written
/// once) per group instead of per call, and no two connections contending for SQLite's
/// single writer.
///
/// `write` makes the same statements for a group as for one call, in arrival order, so two
/// calls about one row end as the later one says. When a group's transaction fails (an
/// unknown app, a constraint), each call runs again in a transaction of its own, so one bad
/// call never fails its neighbours; a store that is unavailable fails the group whole.
final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    /// The statements for `items` (one or a group) inside a transaction, one output per item;
    /// `now` is the group's time.
    typealias Write = @Sendable (_ connection: any SQLConnection, _ backend: any SQLBackend, _ items: [Item], _ now: Int64) throws(StoreError) -> [Output]

    private struct Waiting {
        let item: Item
        let continuation: CheckedContinuation<Result<Output, StoreError>, Never>
        /// The caller, which names the group's commit in the store's metrics.
        let function: StaticString
        let file: StaticString
    }

    private struct State {
        var waiting: [Waiting] = []
        var writing = false
    }

    private let executor: StoreExecutor
    private let largestGroup: Int
    private let write: Write
    private let state = Locked(State())

    /// Most calls per transaction by default: keeps the write lock short for other processes.
    static var defaultLargestGroup: Int { 128 }

    init(executor: StoreExecutor, largestGroup: Int = defaultLargestGroup, write: @escaping Write) {
        (self.executor, self.largestGroup, self.write) = (executor, largestGroup, write)
    }

    func submit(_ item: Item, function: StaticString = #function, file: StaticString = #fileID) async throws(StoreError) -> Output {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Output, StoreError>, Never>) in
            let startWriter = state.withLock { state in
                state.waiting.append(Waiting(item: item, continuation: continuation, function: function, file: file))
                guard !state.writing else { return false }
                state.writing = true
                return true
            }
            if startWriter { Task { await self.writeGroups() } }
        }
        return try result.get()
    }

    /// Writes groups until nobody is waiting.
    private func writeGroups() async {
        while true {
            let group: [Waiting] = state.withLock { state in
                let taken = Array(state.waiting.prefix(largestGroup))
                state.waiting.removeFirst(taken.count)
                if taken.isEmpty { state.writing = false }
                return taken
            }
            if group.isEmpty { return }
            let results = await commit(group.map(\.item), function: group[0].function, file: group[0].file)
            for (waiting, result) in zip(group, results) { waiting.continuation.resume(returning: result) }
        }
    }

    private func commit(_ items: [Item], function: StaticString, file: StaticString) async -> [Result<Output, StoreError>] {
        let (backend, write, now) = (executor.backend, write, executor.clock.wallMillis)
        do throws(StoreError) {
            return try await executor.run(lane: 0, function: function, file: file) { connection throws(StoreError) in
                if items.count > 1 {
                    do throws(StoreError) {
                        return try connection.transaction { () throws(StoreError) in try write(connection, backend, items, now) }.map { .success($0) }
                    } catch {
                        // Unreachable or locked past the timeout: each call alone would wait
                        // the same again. Anything else may be one call's fault.
                        if error.isUnavailable { return items.map { _ in .failure(error) } }
                    }
                }
                return items.map { item in
                    do throws(StoreError) {
                        return .success(try connection.transaction { () throws(StoreError) in try write(connection, backend, [item], now)[0] })
                    } catch { return .failure(error) }
                }
            }
        } catch {
            return items.map { _ in .failure(error) }
        }
    }
}
