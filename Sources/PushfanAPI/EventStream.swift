internal import CMicrohttpd
import Foundation

/// A response body written over time, for Server-Sent Events: a handler returns it in an
/// `HTTPResponse` at once and keeps calling `send` while the client listens.
///
/// libmicrohttpd pulls the body from its own thread. When nothing is waiting the connection
/// is suspended (no busy polling) and `send` resumes it. A client that has gone is noticed
/// when a write to it fails, which is why a stream's owner sends heartbeats; a client that
/// reads slower than it is written to is dropped once `maxPending` bytes wait for it.
package final class EventStream: @unchecked Sendable, Equatable {
    // All mutable state is guarded by `lock`, hence @unchecked.
    private let lock = NSLock()
    private var pending: [UInt8] = []
    private var read = 0
    private var closed = false
    /// The connection, from when the server starts sending until it is done with the body.
    private var connection: OpaquePointer?
    private var suspended = false
    private var gone = false
    private let maxPending: Int

    package init(maxPending: Int = 1 << 20) { self.maxPending = maxPending }

    package static func == (lhs: EventStream, rhs: EventStream) -> Bool { lhs === rhs }

    /// Queues bytes for the client; false once the client is gone or the stream closed.
    @discardableResult
    package func send(_ bytes: some Sequence<UInt8>) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !closed, !gone else { return false }
        pending.append(contentsOf: bytes)
        if pending.count - read > maxPending {
            // Too slow a reader: end its stream rather than buffer without bound.
            closed = true
        }
        wake()
        return !closed
    }

    /// Ends the body after what is queued.
    package func close() {
        lock.lock()
        defer { lock.unlock() }
        closed = true
        wake()
    }

    /// Still listened to (not closed, client not gone).
    package var isOpen: Bool { lock.withLock { !closed && !gone } }

    /// With `lock` held.
    private func wake() {
        if suspended, let connection {
            suspended = false
            MHD_resume_connection(connection)
        }
    }

    // MARK: The server's side, on libmicrohttpd's thread.

    func attach(_ connection: OpaquePointer) { lock.withLock { self.connection = connection } }

    /// Copies queued bytes into `buffer`: their count, 0 after suspending the connection
    /// until `send`, or -1 at the end of the body.
    func fill(_ buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        let available = pending.count - read
        if available > 0 {
            let count = min(available, capacity)
            pending.withUnsafeBytes { bytes in
                UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + read, byteCount: count)
            }
            read += count
            if read == pending.count {
                pending.removeAll(keepingCapacity: true)
                read = 0
            }
            return count
        }
        if closed { return -1 }
        if let connection {
            suspended = true
            MHD_suspend_connection(connection)
        }
        return 0
    }

    /// The server is done with the body: the client has gone or the body ended.
    func detach() {
        lock.withLock {
            gone = true
            connection = nil
            suspended = false
        }
    }
}
