import Foundation

/// Debian's tinyproxy, an HTTP CONNECT proxy, on a free loopback port, in the foreground,
/// logging every connection. `allowedPorts` limits where it opens tunnels (nil: anywhere);
/// a CONNECT to another port gets 403. Stopped when the object goes away.
package final class ProxyProcess: Sendable {
    package let url: String
    private let logFile: String
    private let process: ManagedProcess
    private let scratch: ScratchDirectory

    package init(allowedPorts: [Int]? = nil) async throws {
        let scratch = try ScratchDirectory("pushfan-proxy")
        self.scratch = scratch
        let directory = scratch.path
        let port = try FreePort.pick()
        logFile = directory + "/tinyproxy.log"
        var lines = [
            "Port \(port)", "Listen 127.0.0.1", "Timeout 30", "LogFile \"\(logFile)\"", "LogLevel Connect",
            "MaxClients 16", "Allow 127.0.0.1", "DisableViaHeader Yes",
        ]
        lines += (allowedPorts ?? []).map { "ConnectPort \($0)" }
        let configuration = directory + "/tinyproxy.conf"
        try (lines.joined(separator: "\n") + "\n").write(toFile: configuration, atomically: true, encoding: .utf8)
        process = try ManagedProcess("tinyproxy", ["-d", "-c", configuration])
        url = "http://127.0.0.1:\(port)"
        for _ in 0..<100 {
            if Self.accepts(port) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("tinyproxy did not listen on \(port): \(process.standardError)")
    }

    /// What tinyproxy logged so far.
    package var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    private static func accepts(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
