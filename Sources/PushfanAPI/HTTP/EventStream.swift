import Foundation

/// A response body written over time, for Server-Sent Events: a handler returns it in an
/// `HTTPResponse` at once and keeps calling `send` while the client listens.
///
/// The server's loop takes the bytes when the client's socket has room and is told by
/// `send` when there are more (no busy polling). A client that has gone is noticed when a
/// write to it fails, which is why a stream's owner sends heartbeats; a client that reads
/// slower than it is written to is dropped once `maxPending` bytes wait for it.
package final class EventStream: @unchecked Sendable, Equatable {
    // All mutable state is guarded by `lock`, hence @unchecked.
    private let lock = NSLock()
    private var pending: [UInt8] = []
    private var closed = false
    private var gone = false
    /// Tells the server's loop there is something to take; set while the server sends.
    private var notify: (@Sendable () -> Void)?
    private let maxPending: Int

    package init(maxPending: Int = 1 << 20) { self.maxPending = maxPending }

    package static func == (lhs: EventStream, rhs: EventStream) -> Bool { lhs === rhs }

    /// Queues bytes for the client; false once the client is gone or the stream closed.
    @discardableResult
    package func send(_ bytes: some Sequence<UInt8>) -> Bool {
        let (open, notify) = lock.withLock { () -> (Bool, (@Sendable () -> Void)?) in
            guard !closed, !gone else { return (false, nil) }
            pending.append(contentsOf: bytes)
            // Too slow a reader: end its stream rather than buffer without bound.
            if pending.count > maxPending { closed = true }
            return (!closed, self.notify)
        }
        notify?()
        return open
    }

    /// Ends the body after what is queued.
    package func close() {
        let notify = lock.withLock { () -> (@Sendable () -> Void)? in
            closed = true
            return self.notify
        }
        notify?()
    }

    /// Still listened to (not closed, client not gone).
    package var isOpen: Bool { lock.withLock { !closed && !gone } }

    // MARK: The server's side, on its loop's thread.

    func attach(_ notify: @escaping @Sendable () -> Void) { lock.withLock { self.notify = notify } }

    /// Up to `limit` queued bytes, and whether the body ends after them.
    func take(limit: Int) -> (bytes: [UInt8], ended: Bool) {
        lock.withLock {
            let count = min(limit, pending.count)
            let bytes = Array(pending[..<count])
            pending.removeFirst(count)
            return (bytes, closed && pending.isEmpty)
        }
    }

    /// The server is done with the body: the client has gone or the body ended.
    func detach() {
        lock.withLock {
            gone = true
            notify = nil
        }
    }
}
