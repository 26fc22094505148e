import Foundation

/// Severity of a log line, ordered so that a threshold filters lower levels out.
package enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case debug, info, notice, warning, error

    package static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    package var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        }
    }

    package init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }
}

/// Structured logger: one logfmt line per event on standard error.
///
/// Event names are dotted (`kafka.delivery_failed`); metadata keys are dotted too and are
/// defined next to the code that logs them. Lines are written with one `write(2)` each so
/// that lines from several threads never interleave.
package struct Logger: Sendable {
    package let label: String
    package let threshold: LogLevel
    private let sink: @Sendable (String) -> Void

    package init(label: String, threshold: LogLevel = .info, sink: (@Sendable (String) -> Void)? = nil) {
        self.label = label
        self.threshold = threshold
        self.sink = sink ?? Logger.standardError
    }

    /// A logger for a sub-component sharing threshold and sink.
    package func child(_ label: String) -> Logger {
        var copy = self
        copy = Logger(label: "\(self.label).\(label)", threshold: threshold, sink: sink)
        return copy
    }

    package func log(_ level: LogLevel, _ event: String, _ metadata: KeyValuePairs<String, String> = [:]) {
        guard level >= threshold else { return }
        var line = "ts=\(Logger.timestamp()) level=\(level.name) logger=\(label) event=\(event)"
        for (key, value) in metadata {
            line += " \(key)=\(Logger.quoteIfNeeded(value))"
        }
        sink(line + "\n")
    }

    package func debug(_ event: String, _ metadata: KeyValuePairs<String, String> = [:]) { log(.debug, event, metadata) }
    package func info(_ event: String, _ metadata: KeyValuePairs<String, String> = [:]) { log(.info, event, metadata) }
    package func notice(_ event: String, _ metadata: KeyValuePairs<String, String> = [:]) { log(.notice, event, metadata) }
    package func warning(_ event: String, _ metadata: KeyValuePairs<String, String> = [:]) { log(.warning, event, metadata) }
    package func error(_ event: String, _ metadata: KeyValuePairs<String, String> = [:]) { log(.error, event, metadata) }

    private static func standardError(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            _ = Foundation.write(2, buffer.baseAddress, buffer.count)
        }
    }

    private static func quoteIfNeeded(_ value: String) -> String {
        if !value.isEmpty, !value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }) {
            return value
        }
        let escaped = value.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
        return "\"\(escaped)\""
    }

    private static func timestamp() -> String {
        let now = SystemClock.machineTime()
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
            parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec, Int(now.tv_nsec / 1_000_000))
    }
}
