import Foundation

/// A `pushfan apns-sim` process on a free port, for tests that need "APNs".
///
///     let sim = try await SimulatorProcess(["--accept-any-key"])
///     // send to sim.url + "/3/device/<token>", trusting sim.caFile (nil with --h2c)
///     let stats = try await sim.stats()          // GET /_sim/stats, decoded
///     try await sim.control(["p503": 0.5])       // POST /_sim/control
///     try await sim.reset()                      // POST /_sim/reset
///     sim.stop()                                 // SIGTERM; also happens on deinit
///
/// `arguments` are passed as given (credentials: one of --keys FILE, --accept-any-key,
/// --no-auth; add --h2c for cleartext). Like APNs, a token-auth connection advertises one
/// stream until its first accepted request, and streams a client opens beyond that before
/// reading the SETTINGS are refused (REFUSED_STREAM); pass --no-start-at-one to turn that off.
/// The 20-minute provider-token rule applies per connection unless --token-updates key is
/// given. docs/apns-sim.md has every flag, file format and control member. `--port 0`, `--ca-out` (TLS only) and
/// `--log-level warning` are added. The control calls use curl, so they work whatever the
/// test's own HTTP client is. `logFile` is set when the arguments contain `--log FILE`.
package final class SimulatorProcess: Sendable {
    package let process: ManagedProcess
    /// `https://127.0.0.1:PORT` (or `http://` with --h2c), without a trailing slash.
    package let url: String
    package let port: Int
    /// The generated CA to trust; nil with --h2c or --tls-cert.
    package let caFile: String?
    package let isCleartext: Bool
    package let logFile: String?
    /// A private directory for this simulator's files (CA, anything a test wants to put there).
    package var directory: String { scratch.path }
    private let scratch: ScratchDirectory

    package init(_ arguments: [String] = ["--accept-any-key"]) async throws {
        let scratch = try ScratchDirectory("pushfan-sim")
        self.scratch = scratch
        let directory = scratch.path
        isCleartext = arguments.contains("--h2c")
        let generatesCA = !isCleartext && !arguments.contains("--tls-cert")
        let caFile = generatesCA ? directory + "/ca.pem" : nil
        var full = ["apns-sim", "--port", "0", "--log-level", "warning"] + arguments
        if let caFile { full += ["--ca-out", caFile] }
        process = try ManagedProcess(TestBinaries.pushfan, full, name: "apns-sim")
        guard let output = await process.waitForOutput(timeout: .seconds(20), { $0.contains("\n") }),
              let first = output.split(separator: "\n").first, first.hasPrefix("apns-sim listening on "),
              let portText = first.split(separator: ":").last, let port = Int(portText)
        else {
            throw TestFailure("apns-sim did not print its address; stdout: \(process.standardOutput) stderr: \(process.standardError)")
        }
        self.url = String(first.dropFirst("apns-sim listening on ".count))
        self.port = port
        self.caFile = caFile
        if let index = arguments.firstIndex(of: "--log"), index + 1 < arguments.count { logFile = arguments[index + 1] } else { logFile = nil }
    }

    /// curl options to reach this simulator over HTTP/2 (TLS with the CA, or h2c).
    package var curlOptions: [String] {
        isCleartext ? ["--http2-prior-knowledge"] : (caFile.map { ["--http2", "--cacert", $0] } ?? ["--http2", "--insecure"])
    }

    /// `GET /_sim/stats`, decoded.
    package func stats() async throws -> [String: Any] {
        try await request("GET", "/_sim/stats", body: nil)
    }

    /// `POST /_sim/control` with these settings; returns the settings now in force.
    @discardableResult
    package func control(_ settings: [String: Any]) async throws -> [String: Any] {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: settings), as: UTF8.self)
        return try await request("POST", "/_sim/control", body: body)
    }

    /// `POST /_sim/reset`: clears the counts.
    package func reset() async throws {
        _ = try await request("POST", "/_sim/reset", body: "")
    }

    /// The NDJSON log lines so far, decoded (empty without --log).
    package func logLines() -> [[String: Any]] {
        guard let logFile, let text = try? String(contentsOfFile: logFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }

    /// SIGTERM and wait (up to 10 s); SIGKILL on deinit if it is still running.
    package func stop() {
        guard process.isRunning else { return }
        process.signal(SIGTERM)
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(20_000) }
    }

    private func request(_ method: String, _ path: String, body: String?) async throws -> [String: Any] {
        var arguments = ["-s", "-S", "--max-time", "10", "-X", method] + curlOptions
        if let body { arguments += ["-H", "content-type: application/json", "--data-binary", body] }
        arguments.append(url + path)
        let result = try await CommandLineTool.run("curl", arguments)
        guard result.status == 0,
              let object = try? JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        else {
            throw TestFailure("\(method) \(path) failed (curl exit \(result.status)): \(result.output) \(result.error)")
        }
        if let error = object["error"] as? String { throw TestFailure("\(method) \(path): \(error)") }
        return object
    }
}

/// Runs a command line tool to completion off the cooperative pool and returns its output.
package enum CommandLineTool {
    package struct Result: Sendable {
        package let status: Int32
        package let output: String
        package let error: String
    }

    /// Standard output and error go to temporary files (no pipe can fill up and block).
    package static func run(_ executable: String, _ arguments: [String], input: Data? = nil) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                let base = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-tool-\(UUID().uuidString)").path
                let outPath = base + ".out", errPath = base + ".err"
                defer {
                    try? FileManager.default.removeItem(atPath: outPath)
                    try? FileManager.default.removeItem(atPath: errPath)
                }
                do {
                    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
                    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                    process.arguments = [executable] + arguments
                    process.standardOutput = FileHandle(forWritingAtPath: outPath)
                    process.standardError = FileHandle(forWritingAtPath: errPath)
                    let stdin = Pipe()
                    process.standardInput = stdin
                    try ChildExit.start(process)
                    ManagedProcess.record(pid: process.processIdentifier, label: executable, arguments: arguments)
                    if let input { stdin.fileHandleForWriting.write(input) }
                    try? stdin.fileHandleForWriting.close()
                    let status = ChildExit.wait(process)
                    continuation.resume(returning: Result(
                        status: status,
                        output: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                        error: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }
}
