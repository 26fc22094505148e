import Foundation

/// A dedicated thread for an event loop (never a Swift task: a loop blocks in epoll_wait).
package enum LoopThread {
    /// Runs `body` on a new thread named `name`; `done` is signalled when it returns.
    package static func start(name: String, done: DispatchSemaphore, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            body()
            done.signal()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }
}
