import Foundation
import PushfanAPNs
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `pushfan devices import`: streaming bulk import with per-line errors.
struct DevicesImportCommand: Command {
    static let spec = CommandSpec(
        name: "devices import",
        summary: "Import devices from NDJSON or CSV, reporting bad lines and importing the rest",
        discussion: """
            NDJSON: one object per line with device_id, token and optional environment, locale,
            timezone, app_version, os_version, tags (array), attributes (object), last_seen (ms).
            CSV: a header line naming device_id, token and any of the other columns; tags are
            separated by ';'; attr.NAME columns become attributes. Bad lines are listed with their
            line number and reason; exit code 1 when any line was rejected.
            """,
        positionals: ["FILE"],
        options: [
            .app,
            .option("format", "F", "ndjson or csv (default: from the file name, else ndjson)"),
            .option("batch", "N", "devices per batch (default 50000); a batch is written in one transaction, on PostgreSQL in one per connection"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let path = arguments.positionals[0]
        let app = try arguments.required("app")
        let format: DeviceImportParser.Format
        switch arguments.value("format") {
        case nil: format = path.lowercased().hasSuffix(".csv") ? .csv : .ndjson
        case let name?:
            guard let parsed = DeviceImportParser.Format(rawValue: name) else { throw UsageError("--format must be ndjson or csv, got '\(name)'") }
            format = parsed
        }
        // Large batches: with random tokens (as real ones are) each commit writes every index
        // page the batch touched, so fewer commits write far less (measured at 1M devices on
        // SQLite: 45 s with batches of 5,000, 29 s with 50,000; about 120 MB of memory).
        let batchSize = try arguments.int("batch", default: 50_000, range: 1...1_000_000)
        let descriptor = path == "-" ? 0 : open(path, O_RDONLY)
        guard descriptor >= 0 else { throw UsageError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { if descriptor > 0 { close(descriptor) } }
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            throw UsageError("\(path) is a directory; give a file of NDJSON or CSV lines")
        }

        let store = try await StoreOptions.open(arguments, context)
        guard try await store.apps.get(app) != nil else {
            printError("pushfan devices import: unknown app '\(app)'; add it with `pushfan apps add`")
            return 1
        }
        var parser = DeviceImportParser(format: format, now: store.clock.wallMillis)
        var reader = LineReader(descriptor: descriptor)
        let longest = reader.maxLineBytes
        var batch: [ValidatedDevice] = []
        batch.reserveCapacity(batchSize)
        var lineNumber = 0, imported = 0
        var rejections = ImportRejections()
        var headerRefused = false
        let progress = ProgressLine()
        let started = ContinuousClock.now
        var writing: Task<Int, any Error>?
        while !headerRefused, reader.next({ input in
            lineNumber += 1
            guard case .text(let bytes) = input else {
                rejections.add(line: lineNumber, reason: "longer than the limit of \(longest - 1) bytes")
                headerRefused = parser.needsHeader
                return
            }
            let beforeHeader = parser.needsHeader
            do {
                if let device = try parser.parse(bytes: bytes) { batch.append(device) }
            } catch {
                rejections.add(line: lineNumber, reason: "\(error)")
                headerRefused = beforeHeader
            }
        }) {
            if batch.count >= batchSize {
                // Parse the next batch while this one is written.
                if let previous = writing { imported += try await previous.value }
                let full = batch
                writing = Task { try await store.devices.importDevices(app: app, full) }
                batch.removeAll(keepingCapacity: true)
                let seconds = max((ContinuousClock.now - started).seconds, 0.001)
                progress.show("imported \(imported) devices, \(rejections.total) bad lines (\(Int(Double(imported) / seconds))/s)")
            }
        }
        if let previous = writing { imported += try await previous.value }
        if !batch.isEmpty { imported += try await store.devices.importDevices(app: app, batch) }
        // Segment counts and expansions plan with statistics of the table as it is now.
        if imported > 0 { try await store.devices.refreshStatistics() }
        progress.finish()
        for line in rejections.report(restImported: !headerRefused) { printError(line) }
        if headerRefused {
            printError("pushfan devices import: the CSV header on line \(lineNumber) was refused, so no line after it can be read; nothing was imported")
            return 1
        }
        print("imported \(imported) devices, rejected \(rejections.total) lines")
        return rejections.total == 0 ? 0 : 1
    }
}

/// Bad lines of an import, grouped by what is wrong: thousands of lines with one mistake are
/// one entry with its count and first line numbers, not thousands of lines of output.
struct ImportRejections {
    private struct Group {
        var count = 0
        var lines: [Int] = []
        var example: String
    }

    private var groups: [String: Group] = [:]
    private var order: [String] = []
    private(set) var total = 0
    /// Line numbers listed per group.
    static let linesShown = 5
    /// Groups listed; the rest are summed up.
    static let groupsShown = 20

    mutating func add(line: Int, reason: String) {
        total += 1
        let kind = Self.kind(of: reason)
        if groups[kind] == nil {
            groups[kind] = Group(example: reason)
            order.append(kind)
        }
        groups[kind]!.count += 1
        if groups[kind]!.lines.count < Self.linesShown { groups[kind]!.lines.append(line) }
    }

    /// A reason with its quoted values taken out, so `got 'a/b'` and `got 'c#d'` group together.
    static func kind(of reason: String) -> String {
        var kind = ""
        var open: Character?
        for character in reason {
            if let quote = open {
                if character == quote {
                    kind.append(character)
                    open = nil
                }
            } else {
                kind.append(character)
                if character == "'" || character == "\"" {
                    open = character
                    kind.append("…")
                }
            }
        }
        return kind
    }

    /// Most frequent first: `1000 lines (2, 5, 9, 11, 14, …): reason`, then a summary.
    func report(restImported: Bool = true) -> [String] {
        guard total > 0 else { return [] }
        let ranked = order.enumerated().sorted { (groups[$0.element]!.count, -$0.offset) > (groups[$1.element]!.count, -$1.offset) }.map(\.element)
        var lines: [String] = []
        for kind in ranked.prefix(Self.groupsShown) {
            let group = groups[kind]!
            let numbers = group.lines.map(String.init).joined(separator: ", ") + (group.count > group.lines.count ? ", …" : "")
            let noun = group.count == 1 ? "line" : "lines"
            let example = kind == group.example ? "" : " (line \(group.lines[0]): \(group.example))"
            lines.append("\(group.count) \(noun) (\(numbers)): \(group.count == 1 ? group.example : kind + example)")
        }
        if ranked.count > Self.groupsShown {
            let rest = ranked.dropFirst(Self.groupsShown).reduce(0) { $0 + groups[$1]!.count }
            lines.append("\(rest) more lines with \(ranked.count - Self.groupsShown) other reasons")
        }
        lines.append("\(total) bad \(total == 1 ? "line" : "lines") in \(groups.count) \(groups.count == 1 ? "kind" : "kinds")" + (restImported ? "; the rest was imported" : ""))
        return lines
    }
}
