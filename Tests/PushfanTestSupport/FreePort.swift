import Foundation

/// TCP ports on 127.0.0.1 where a connection fails: nothing listens on them.
package enum FreePort {
    /// A port nothing listens on right now: bound to port 0, read back, closed.
    package static func pick() throws -> Int {
        guard let (descriptor, port) = bind(port: 0) else { throw TestFailure("bind() failed: errno \(errno)") }
        close(descriptor)
        return port
    }

    /// A port held for the caller: bound without listening, so a connection to it is refused
    /// and no other process can listen there until `close(descriptor)`. `pick` only says the
    /// port was free; a server another test starts meanwhile may take it.
    package static func held() throws -> (port: Int, descriptor: Int32) {
        guard let (descriptor, port) = bind(port: 0) else { throw TestFailure("bind() failed: errno \(errno)") }
        return (port, descriptor)
    }

    /// Binds 127.0.0.1:`port` without listening, so that a connection to it is refused and no
    /// other process can listen there until `close(descriptor)`; nil when the port is taken.
    package static func hold(_ port: Int) -> Int32? {
        bind(port: port)?.descriptor
    }

    private static func bind(port: Int) -> (descriptor: Int32, port: Int)? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                Foundation.bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            return nil
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}
