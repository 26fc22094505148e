import Foundation
import Synchronization

/// A real binary started by a test: stdout and stderr go to files the test can read while
/// it runs, stdin is a pipe. The process is killed when the object goes away, so a failing
/// test never leaves servers behind. Not for programs that start daemons (pg_ctl): Foundation's
/// `Process` then never sees the exit; such tests use `system`.
package final class ManagedProcess: Sendable {
    package let name: String
    package let stdoutPath: String
    package let stderrPath: String
    private let process: Process
    private let input: Pipe

    /// Starts `executable` (a path, or a name looked up on PATH).
    package init(_ executable: String, _ arguments: [String], name: String? = nil, environment: [String: String] = [:]) throws {
        let label = name ?? URL(fileURLWithPath: executable).lastPathComponent
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-tests-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let unique = "\(label)-\(UUID().uuidString.prefix(8))"
        stdoutPath = directory.appendingPathComponent("\(unique).out").path
        stderrPath = directory.appendingPathComponent("\(unique).err").path
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let process = Process()
        if executable.contains("/") {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [executable] + arguments
        }
        var merged = ProcessInfo.processInfo.environment
        merged.merge(environment) { _, new in new }
        process.environment = merged
        process.standardOutput = FileHandle(forWritingAtPath: stdoutPath)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        let input = Pipe()
        process.standardInput = input
        try ChildExit.start(process)
        self.process = process
        self.input = input
        self.name = label
        Self.record(pid: process.processIdentifier, label: label, arguments: arguments)
    }

    /// With `PUSHFAN_TEST_CHILDREN` set to a file, each start (here and in `CommandLineTool`)
    /// appends "pid label arguments" to it, so a sanitizer report (named by pid) can be
    /// traced to the process that wrote it.
    package static func record(pid: Int32, label: String, arguments: [String]) {
        guard let path = ProcessInfo.processInfo.environment["PUSHFAN_TEST_CHILDREN"], !path.isEmpty else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let line = Array("\(pid) \(label) \(arguments.joined(separator: " "))\n".utf8)
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // Its output goes with it (`ScratchDirectory` says why and how to keep it).
        if !ScratchDirectory.keepsFiles {
            for path in [stdoutPath, stderrPath] { try? FileManager.default.removeItem(atPath: path) }
        }
    }

    package var pid: Int32 { process.processIdentifier }
    package var isRunning: Bool { process.isRunning }

    package var standardOutput: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    package var standardError: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
    package var outputLines: [String] { standardOutput.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }

    /// Writes a line to the process's standard input.
    package func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    package func closeInput() { try? input.fileHandleForWriting.close() }

    package func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for exit and returns the status, or nil after `timeout`.
    package func waitForExit(timeout: Duration = .seconds(30)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    /// Polls standard output until `predicate` holds for it; returns it, or nil after `timeout`.
    package func waitForOutput(timeout: Duration = .seconds(30), _ predicate: (String) -> Bool) async -> String? {
        await waitFor(timeout: timeout) { let text = standardOutput; return predicate(text) ? text : nil }
    }

    package func waitForError(timeout: Duration = .seconds(30), _ predicate: (String) -> Bool) async -> String? {
        await waitFor(timeout: timeout) { let text = standardError; return predicate(text) ? text : nil }
    }

    private func waitFor(timeout: Duration, _ check: () -> String?) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = check() { return found }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return check()
    }
}

/// Starting children safely from parallel tests. Foundation learns of a child's exit when a
/// socket the child inherited closes; a sibling spawned at the same moment could inherit that
/// socket too, and then the exit went unnoticed until the sibling ended (a server that lives
/// as long as its test), the child a zombie and its `waitUntilExit` blocked meanwhile: a few
/// such waits on cooperative threads stopped a whole test run. One spawn at a time closes the
/// parent's copy of the child's end before the next spawn can inherit it.
package enum ChildExit {
    private static let spawning = Mutex(())

    /// `process.run()`, one at a time across the test process.
    package static func start(_ process: Process) throws {
        try spawning.withLock { _ in try process.run() }
    }

    /// Waits for the child's end and returns its status.
    package static func wait(_ process: Process) -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// Where the binaries under test live.
package enum TestBinaries {
    /// The `pushfan` executable: `PUSHFAN_BIN`, else the debug build of this package.
    package static var pushfan: String {
        if let path = ProcessInfo.processInfo.environment["PUSHFAN_BIN"], !path.isEmpty { return path }
        return packageRoot.appendingPathComponent(".build/debug/pushfan").path
    }

    /// `pushfan-shifted-clock` (Tests/ShiftedClock), built beside `pushfan`: the same
    /// commands after a first argument, the seconds its wall clock is shifted by.
    package static var shiftedClock: String {
        URL(fileURLWithPath: pushfan).deletingLastPathComponent().appendingPathComponent("pushfan-shifted-clock").path
    }

    package static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// True when a command is on PATH (kcat, h2load, ...).
    package static func available(_ command: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains { directory in
            FileManager.default.isExecutableFile(atPath: "\(directory)/\(command)")
        }
    }
}

/// A `pushfan kafka-dev` process and its bootstrap servers.
package final class DevClusterProcess: Sendable {
    package let process: ManagedProcess
    package let bootstrapServers: String

    package init(brokers: Int = 3, partitions: Int = 4) async throws {
        process = try ManagedProcess(TestBinaries.pushfan, ["kafka-dev", "--brokers", "\(brokers)", "--partitions", "\(partitions)", "--log-level", "warning"], name: "kafka-dev")
        guard let output = await process.waitForOutput(timeout: .seconds(20), { $0.contains("\n") }),
              let first = output.split(separator: "\n").first
        else {
            throw TestFailure("kafka-dev did not print its bootstrap servers; stderr: \(process.standardError)")
        }
        bootstrapServers = String(first)
    }

    /// Sends a control command and waits for its reply line ("ok" or "error: ...").
    package func control(_ command: String) async throws -> String {
        let before = process.outputLines.count
        process.send(command)
        guard let output = await process.waitForOutput(timeout: .seconds(10), { $0.split(separator: "\n").count > before }) else {
            throw TestFailure("kafka-dev did not answer '\(command)'")
        }
        return String(output.split(separator: "\n")[before])
    }

    /// Client properties tuned so that group changes take seconds, not the default 45.
    package static let fastGroupProperties = ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500"]
}

package struct TestFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
