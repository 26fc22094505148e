import Foundation

/// What one non-blocking read or write on a byte channel did.
package enum ChannelProgress: Equatable, Sendable {
    /// This many bytes moved.
    case done(Int)
    /// Try again when the socket is readable.
    case wantRead
    /// Try again when the socket is writable.
    case wantWrite
    /// The peer closed the connection cleanly.
    case closed
    /// The connection is broken; the text says why.
    case failed(String)
}

/// What carries an HTTP/2 session's bytes: libcurl's connection for the APNs sender, a TLS
/// connection or a plain socket for the simulator. Non-blocking: a call never waits.
package protocol ByteChannel: AnyObject {
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ChannelProgress
    func write(_ bytes: UnsafeRawBufferPointer) -> ChannelProgress
}

/// A connected, non-blocking socket as a byte channel (h2c). The caller owns the descriptor.
package final class SocketChannel: ByteChannel {
    private let fd: Int32

    package init(fd: Int32) { self.fd = fd }

    package func read(into buffer: UnsafeMutableRawBufferPointer) -> ChannelProgress {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count > 0 { return .done(count) }
            if count == 0 { return .closed }
            if errno == EINTR { continue }
            return errno == EAGAIN ? .wantRead : .failed("read: \(String(cString: strerror(errno)))")
        }
    }

    package func write(_ bytes: UnsafeRawBufferPointer) -> ChannelProgress {
        while true {
            let count = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if count >= 0 { return .done(count) }
            if errno == EINTR { continue }
            return errno == EAGAIN ? .wantWrite : .failed("write: \(String(cString: strerror(errno)))")
        }
    }
}
