#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking listening TCP socket on an IPv4 or IPv6 address (`::1`, `::` for every
/// interface; an IPv6 listener takes IPv6 only), for the servers that run their own epoll
/// loop (the API, the APNs simulator).
package enum TCPListener {
    /// The listening socket and the port it got (`port` 0: a free one), or why not.
    package static func open(host: String, port: Int, backlog: Int32 = 1024) -> Result<(fd: Int32, port: Int), ListenError> {
        let name = host == "localhost" ? "127.0.0.1" : host
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        let parsed = withUnsafeMutablePointer(to: &storage) { pointer -> Bool in
            if name.contains(":") {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    address.pointee.sin6_family = sa_family_t(AF_INET6)
                    address.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                    return inet_pton(AF_INET6, name, &address.pointee.sin6_addr) == 1
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                address.pointee.sin_family = sa_family_t(AF_INET)
                address.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                return inet_pton(AF_INET, name, &address.pointee.sin_addr) == 1
            }
        }
        guard parsed else { return .failure(ListenError("must be an IPv4 or IPv6 address (or localhost); got \(host)")) }
        if name.contains(":") {
            (family, length) = (AF_INET6, socklen_t(MemoryLayout<sockaddr_in6>.size))
        } else {
            (family, length) = (AF_INET, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(ListenError("socket() failed (errno \(errno))")) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            return .failure(ListenError("cannot listen on \(host):\(port) (errno \(code)\(code == EADDRINUSE ? ", address in use" : ""))"))
        }
        guard listen(fd, backlog) == 0 else {
            close(fd)
            return .failure(ListenError("listen() failed (errno \(errno))"))
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        return .success((fd, Int(UInt16(bigEndian: portOf(actual)))))
    }

    /// A connected socket's peer address as text ("" when unknown).
    package static func peerAddress(_ fd: Int32) -> String {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) } }
        guard got == 0 else { return "" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = Int32(address.ss_family)
        var written: UnsafePointer<CChar>?
        if family == AF_INET {
            var ip = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr } }
            written = inet_ntop(AF_INET, &ip, &text, socklen_t(text.count))
        } else if family == AF_INET6 {
            var ip = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr } }
            written = inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count))
        }
        return written == nil ? "" : String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func portOf(_ address: sockaddr_storage) -> UInt16 {
        var address = address
        let family = Int32(address.ss_family)
        return withUnsafePointer(to: &address) { pointer in
            family == AF_INET6
                ? pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port }
                : pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }
        }
    }
}

package struct ListenError: Error, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
