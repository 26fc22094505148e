import Foundation
import PushfanTestSupport
import Testing

@testable import PushfanCore

/// Short constructors for expected ASTs.
enum Seg {
    static func tag(_ name: String) -> SegmentExpression { .term(.tag(name)) }

    static func text(_ field: SegmentTextField, _ op: SegmentComparison, _ value: String) -> SegmentExpression {
        .term(.text(field, .compare(op, value)))
    }

    static func text(_ field: SegmentTextField, in values: [String]) -> SegmentExpression {
        .term(.text(field, .oneOf(values)))
    }

    static func version(_ field: SegmentVersionField, _ op: SegmentComparison, _ value: String) -> SegmentExpression {
        .term(.version(field, .compare(op, SegmentVersion(value)!)))
    }

    static func version(_ field: SegmentVersionField, in values: [String]) -> SegmentExpression {
        .term(.version(field, .oneOf(values.map { SegmentVersion($0)! })))
    }

    static func attr(_ key: String, _ op: SegmentComparison, _ value: SegmentAttributeValue) -> SegmentExpression {
        .term(.attribute(key: key, .compare(op, value)))
    }

    static func attr(_ key: String, in values: [SegmentAttributeValue]) -> SegmentExpression {
        .term(.attribute(key: key, .oneOf(values)))
    }

    static func seen(_ amount: Int64, _ unit: SegmentDuration.Unit) -> SegmentExpression {
        .term(.seenWithin(SegmentDuration(amount: amount, unit: unit)!))
    }
}

typealias SegmentFixtureRandom = SeededGenerator


/// A row of the device table: the segment-visible fields plus what the store
/// filters on before the segment (app, status).
struct SegmentFixtureRow: Sendable {
    let rowKey: Int64
    let app: String
    let status: String
    let device: SegmentDevice
    /// Whether `attributes` is stored as NULL rather than as a JSON object.
    let nullAttributes: Bool
}

enum SegmentFixtures {
    /// The evaluation moment of every fixture test.
    static let now: Int64 = 1_700_000_000_000
    static let day: Int64 = 86_400_000

    /// About 300 devices with every kind of value the language distinguishes:
    /// missing fields, versions that need numeric ordering or have no key,
    /// attributes of each JSON kind, tags that differ only in case or Unicode
    /// normalisation, hostile-looking text, and last-seen times on the edges of
    /// the windows the expressions use.
    static let rows: [SegmentFixtureRow] = {
        var random = SegmentFixtureRandom(seed: 0x5E6_3E47)
        let tags = ["sports", "news", "quoted name", "' OR 1=1 --", "\u{E9}", "e\u{301}", "Sports"]
        let locales: [String?] = ["de_DE", "de_AT", "en_US", "fr_FR", "de_CH", nil]
        let timezones: [String?] = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", nil]
        let appVersions: [String?] = ["2.3", "2.3.0", "2.9", "2.10", "2.10.1", "3.0", "17.4.1", "2.3-beta", "1.0.0.1", nil]
        let osVersions: [String?] = ["16.7", "17.0", "17.4", "17.4.1", "18", "17.4.1.2", "x", nil]
        let plans: [JSONValue?] = ["free", "pro", "Free", 5, true, nil, .null]
        let ages: [JSONValue?] = [17, 18, 30, 18.5, "18", nil]
        let scores: [JSONValue?] = [0.5, -2.5, 1000, .number(1000), -3, nil]
        let dotted: [JSONValue?] = ["x", "y", nil]
        let betas: [JSONValue?] = [true, false, "true", nil]
        let bigs: [JSONValue?] = [.int(9_007_199_254_740_993), .number(9_007_199_254_740_992), .int(-1), nil]
        let edges: [Int64] = [0, 1, -1, -30 * day, -30 * day + 1, -30 * day - 1, -14 * day, -36 * 3_600_000, -3_600_000]

        var rows: [SegmentFixtureRow] = []
        for index in 1...300 {
            var attributes: [String: JSONValue] = [:]
            for (key, pool) in [("plan", plans), ("age", ages), ("score", scores), ("a.b", dotted), ("beta", betas), ("big", bigs)] {
                if let value = random.pick(pool) { attributes[key] = value }
            }
            let lastSeen = random.chance(15)
                ? now + random.pick(edges)
                : now - Int64(random.below(60 * 24)) * 3_600_000 - Int64(random.below(3_600_000))
            let device = SegmentDevice(
                tags: Set(tags.filter { _ in random.chance(30) }),
                locale: random.pick(locales),
                timezone: random.pick(timezones),
                environment: random.chance(30) ? "sandbox" : "production",
                appVersion: random.pick(appVersions),
                osVersion: random.pick(osVersions),
                attributes: attributes,
                lastSeenAt: lastSeen)
            rows.append(SegmentFixtureRow(
                rowKey: Int64(index),
                app: random.chance(90) ? "app1" : "app2",
                status: random.chance(85) ? "active" : "invalid",
                device: device,
                nullAttributes: attributes.isEmpty && random.chance(50)))
        }
        return rows
    }()

    /// Row keys the store query would return, by the reference evaluator.
    static func expectedRowKeys(_ expression: SegmentExpression) -> [Int64] {
        rows.filter { $0.app == "app1" && $0.status == "active" && SegmentEvaluator.matches(expression, device: $0.device, now: now) }
            .map(\.rowKey)
    }

    /// Valid expressions covering every field, operator and combination, used by
    /// the compiler tests and compared against SQLite.
    static let expressions: [String] = [
        "tag:sports",
        "not tag:sports",
        "tag:\"quoted name\" or tag:news",
        "tag:\"' OR 1=1 --\"",
        "tag:\"\u{E9}\"",
        "tag:Sports and not tag:sports",
        "locale = de_DE",
        "locale != de_DE",
        "not locale = de_DE",
        "locale in (de_DE, de-AT)",
        "not locale in (de_DE, de_AT, en_US)",
        "timezone = Europe/Berlin or timezone = \"Asia/Tokyo\"",
        "timezone != America/New_York",
        "environment = sandbox",
        "environment != production and tag:news",
        "app_version >= 2.3",
        "app_version = 2.3",
        "app_version > 2.9",
        "app_version < 2.10",
        "app_version <= 2.10.0",
        "app_version != 2.3",
        "not app_version >= 2.3",
        "app_version in (2.3, 17.4.1, 3)",
        "os_version >= 17.4",
        "os_version < 17 or os_version > 17.4.1",
        "attr.plan = \"free\"",
        "attr.plan = free",
        "attr.plan != free",
        "attr.plan in (free, pro)",
        "attr.plan = 5",
        "attr.plan > \"F\"",
        "attr.plan < \"a\"",
        "attr.age >= 18",
        "attr.age > 18.2",
        "attr.age = \"18\"",
        "attr.age in (17, 18.5, \"18\")",
        "not attr.age < 18",
        "attr.score <= -2.5 or attr.score >= 1e3",
        "attr.score = 1000",
        "attr.beta = true",
        "attr.beta != true",
        "attr.beta in (true, \"true\", 1)",
        "attr.a.b = x",
        "attr.big > 9007199254740992",
        "attr.big = 9007199254740992.0",
        "attr.missing != 1",
        "last_seen within 30d",
        "not last_seen within 2w",
        "last_seen within 36h and not last_seen within 60m",
        "tag:sports and locale in (de_DE, de_AT) and app_version >= 2.3 and not attr.plan = \"free\" and last_seen within 30d",
        "(tag:news or tag:sports) and not (locale = de_DE or environment = sandbox)",
        "not (not tag:news and not (attr.plan = pro or app_version < 2.10))",
        "attr.nothing = 1 or not attr.nothing = 1",
    ]
}

/// The `sqlite3` command-line shell, used to run compiled segments against a real
/// SQLite without linking it into the test bundle.
enum SQLiteShell {
    static let path = "/usr/bin/sqlite3"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: path) }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `script` against a fresh in-memory database and returns standard output.
    static func run(_ script: String) throws -> String {
        let (status, stdout, stderr) = try runSQLTool(path, script: script, scriptOnStandardInput: true) { _ in ["-batch", "-bail", ":memory:"] }
        guard status == 0, stderr.isEmpty else { throw Failure(description: "sqlite3 exited with \(status): \(stderr)") }
        return stdout
    }

    /// A literal for the test harness only (the code under test never builds
    /// one): text goes in as hex bytes, so no quoting is involved at all.
    static func literal(_ parameter: SQLParameter?) -> String {
        switch parameter {
        case nil: return "NULL"
        case .text(let text)?:
            let hex = text.utf8.map { String(format: "%02X", $0) }.joined()
            return "CAST(X'\(hex)' AS TEXT)"
        case .integer(let value)?: return String(value)
        case .real(let value)?: return value.description
        }
    }

    /// The device schema the store uses (docs/segments.md), filled with `rows`.
    static func schema(with rows: [SegmentFixtureRow]) throws -> String {
        var script = """
            CREATE TABLE devices (
                row_key INTEGER PRIMARY KEY, app TEXT NOT NULL, device_id TEXT NOT NULL, token TEXT NOT NULL,
                environment TEXT NOT NULL, locale TEXT, timezone TEXT, app_version TEXT, app_version_key TEXT,
                os_version TEXT, os_version_key TEXT, attributes TEXT, last_seen_at INTEGER NOT NULL,
                status TEXT NOT NULL);
            CREATE TABLE device_tags (row_key INTEGER NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (row_key, tag));
            CREATE INDEX devices_locale ON devices (app, locale);
            BEGIN;

            """
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for row in rows {
            let device = row.device
            let attributes = row.nullAttributes
                ? nil : String(decoding: try encoder.encode(JSONValue.object(device.attributes)), as: UTF8.self)
            let values: [SQLParameter?] = [
                .integer(row.rowKey), .text(row.app), .text("device-\(row.rowKey)"), .text("token-\(row.rowKey)"),
                .text(device.environment), device.locale.map(SQLParameter.text), device.timezone.map(SQLParameter.text),
                device.appVersion.map(SQLParameter.text), device.appVersion.flatMap(VersionKey.key).map(SQLParameter.text),
                device.osVersion.map(SQLParameter.text), device.osVersion.flatMap(VersionKey.key).map(SQLParameter.text),
                attributes.map(SQLParameter.text), .integer(device.lastSeenAt), .text(row.status),
            ]
            script += "INSERT INTO devices VALUES (\(values.map(literal).joined(separator: ", ")));\n"
            for tag in device.tags {
                script += "INSERT INTO device_tags VALUES (\(row.rowKey), \(literal(.text(tag))));\n"
            }
        }
        return script + "COMMIT;\n"
    }

    /// Statements that bind `parameters` through the shell's parameter table
    /// and run `query`, whose `?` placeholders are renumbered `?1`, `?2`...
    /// (the shell binds by name). The query itself is sent unchanged otherwise.
    static func bound(_ query: String, _ parameters: [SQLParameter]) throws -> String {
        var numbered = ""
        var next = 0
        for character in query {
            if character == "?" {
                next += 1
                numbered += "?\(next)"
            } else {
                numbered.append(character)
            }
        }
        guard next == parameters.count else {
            throw Failure(description: "\(next) placeholders but \(parameters.count) parameters")
        }
        var script = ".parameter init\n"
        if !parameters.isEmpty {
            let rows = parameters.enumerated().map { "('?\($0.offset + 1)', \(literal($0.element)))" }
            script += "INSERT INTO temp.sqlite_parameters (key, value) VALUES \(rows.joined(separator: ", "));\n"
        }
        return script + numbered + ";\n.parameter clear\n"
    }

    /// The store's audience query around a compiled segment, with the extra
    /// context (keyset condition, subquery) that the store may add.
    static func storeQuery(_ condition: String) -> String {
        """
        SELECT count(*) || ':' || coalesce(group_concat(row_key, ','), '') FROM (
            SELECT d.row_key FROM devices d
            WHERE d.app = 'app1' AND d.status = 'active' AND (\(condition)) AND d.row_key > -1
            ORDER BY d.row_key)
        """
    }
}

/// Runs an SQL command-line tool (sqlite3, psql) on `script`, given on standard input or as
/// the file whose path `arguments` receives; returns exit status, output and errors.
func runSQLTool(
    _ path: String, script: String, scriptOnStandardInput: Bool, arguments: (String) -> [String]
) throws -> (status: Int32, stdout: String, stderr: String) {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("pushfan-segment-\(getpid())-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let input = directory.appendingPathComponent("script.sql")
    let output = directory.appendingPathComponent("out.txt")
    let errors = directory.appendingPathComponent("err.txt")
    try Data(script.utf8).write(to: input)
    _ = FileManager.default.createFile(atPath: output.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments(input.path)
    process.standardInput = scriptOnStandardInput ? try FileHandle(forReadingFrom: input) : FileHandle.nullDevice
    process.standardOutput = try FileHandle(forWritingTo: output)
    process.standardError = try FileHandle(forWritingTo: errors)
    try process.run()
    process.waitUntilExit()
    return (process.terminationStatus, try String(contentsOf: output, encoding: .utf8), try String(contentsOf: errors, encoding: .utf8))
}
