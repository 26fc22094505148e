import Foundation
import Testing

/// The one-clock rule, checked on the source: the store, the worker, the API and what they
/// share read time only through an injected `ServiceClock`, whose file (`SystemClock`) is the
/// one place that asks the machine; and no call takes a defaulted `now:`, which would read
/// the machine's clock behind the caller's back.
@Suite struct ClockUseTests {
    static let modules = ["PushfanSupport", "PushfanSegments", "PushfanTemplates", "PushfanAPNsModel", "PushfanSchedule", "PushfanMessages", "PushfanStore", "PushfanTopics", "PushfanWorker", "PushfanAPI"]
    static let clockFile = "PushfanSupport/ServiceClock.swift"

    /// Swift files of `modules`, by path under Sources/, comment lines left out.
    static func sources() throws -> [(path: String, lines: [Substring])] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources")
        var found: [(String, [Substring])] = []
        for module in modules {
            guard let walker = FileManager.default.enumerator(at: sources.appendingPathComponent(module), includingPropertiesForKeys: nil) else { continue }
            for case let url as URL in walker where url.pathExtension == "swift" {
                let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
                found.append((url.path.replacingOccurrences(of: sources.path + "/", with: ""), lines.filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }))
            }
        }
        return found
    }

    @Test("no time read outside the clock's file: no ContinuousClock.now, Date(), epochMillis() or clock_gettime in the service modules")
    func timeIsReadThroughTheClock() throws {
        let files = try Self.sources()
        #expect(files.count > 100, "found only \(files.count) files: the walk went wrong")
        #expect(files.contains { $0.path == Self.clockFile }, "the clock's file moved: \(Self.clockFile)")
        // Built from pieces, so that this file does not name what it looks for.
        let reads = ["ContinuousClock" + ".now", "Date" + "()", "epochMillis" + "()", "clock_" + "gettime", "Date(timeIntervalSince" + "Now", "time" + "(nil)"]
        var offenders: [String] = []
        for (path, lines) in files where path != Self.clockFile {
            for (index, line) in lines.enumerated() where reads.contains(where: { Self.names(line, $0) }) {
                offenders.append("\(path):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(offenders.isEmpty, "time read beside the clock:\n\(offenders.joined(separator: "\n"))")
    }

    /// Whether `line` names `read` as a whole name (`HTTPDate()` does not name `Date()`).
    static func names(_ line: Substring, _ read: String) -> Bool {
        var rest = line[...]
        while let found = rest.range(of: read) {
            let before = found.lowerBound == line.startIndex ? nil : line[line.index(before: found.lowerBound)]
            if !(before.map { $0.isLetter || $0.isNumber || $0 == "_" } ?? false) { return true }
            rest = line[found.upperBound...]
        }
        return false
    }

    @Test("no defaulted now: parameter in the service modules")
    func noDefaultedNow() throws {
        let pattern = try Regex(#"\bnow: [A-Za-z0-9_.<>?@ ()\->]+ = "#)
        var offenders: [String] = []
        for (path, lines) in try Self.sources() {
            for (index, line) in lines.enumerated() where line.contains(pattern) && !line.contains("var now") && !line.contains("let now") {
                offenders.append("\(path):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(offenders.isEmpty, "defaulted now:\n\(offenders.joined(separator: "\n"))")
    }
}
