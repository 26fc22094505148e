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
        // The port is free when picked, but a server another test starts may take it before
        // tinyproxy binds it; tinyproxy then exits, and a check that something accepts on the
        // port would find that other server (seen once: a pushfan send through "the proxy"
        // reset three times, the proxy's log empty). So it counts as started only when its
        // own log says it accepts connections, and a port lost that way is picked again.
        var failures: [String] = []
        for attempt in 1...5 {
            let port = try FreePort.pick()
            let logFile = scratch.path + "/tinyproxy-\(attempt).log"
            var lines = [
                "Port \(port)", "Listen 127.0.0.1", "Timeout 30", "LogFile \"\(logFile)\"", "LogLevel Info",
                "MaxClients 16", "Allow 127.0.0.1", "DisableViaHeader Yes",
            ]
            lines += (allowedPorts ?? []).map { "ConnectPort \($0)" }
            let configuration = scratch.path + "/tinyproxy-\(attempt).conf"
            try (lines.joined(separator: "\n") + "\n").write(toFile: configuration, atomically: true, encoding: .utf8)
            let process = try ManagedProcess("tinyproxy", ["-d", "-c", configuration])
            for _ in 0..<200 {
                let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
                if log.contains("Accepting connections") {
                    (self.process, self.logFile, url) = (process, logFile, "http://127.0.0.1:\(port)")
                    return
                }
                if !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            failures.append("port \(port): \(process.standardError.suffix(300))")
        }
        throw TestFailure("tinyproxy did not start: \(failures.joined(separator: "; "))")
    }

    /// What tinyproxy logged so far.
    package var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }
}
