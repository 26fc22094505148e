import Dispatch

/// Runs blocking C calls (flush, commit, close, `sqlite3_step`, `PQexec`) off Swift's
/// cooperative thread pool, which must never be blocked.
package enum BlockingWork {
    private static let queue = DispatchQueue(label: "pushfan.blocking", attributes: .concurrent)

    package static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    package static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            queue.async {
                do throws(E) { continuation.resume(returning: .success(try body())) } catch { continuation.resume(returning: .failure(error)) }
            }
        }
        return try result.get()
    }
}
