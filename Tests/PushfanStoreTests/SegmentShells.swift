import Foundation
import PushfanMessages
import PushfanSegments
import PushfanSupport
import PushfanTestSupport
import SegmentTestSupport

@testable import PushfanStore

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
    static func literal(_ parameter: SQLValue?) -> String {
        switch parameter {
        case nil, .null?: return "NULL"
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
            CREATE TABLE user_aliases (app TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (app, name, value));
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
            let values: [SQLValue?] = [
                .integer(row.rowKey), .text(row.app), .text("device-\(row.rowKey)"), .text("token-\(row.rowKey)"),
                .text(device.environment), device.locale.map(SQLValue.text), device.timezone.map(SQLValue.text),
                device.appVersion.map(SQLValue.text), device.appVersion.flatMap(VersionKey.key).map(SQLValue.text),
                device.osVersion.map(SQLValue.text), device.osVersion.flatMap(VersionKey.key).map(SQLValue.text),
                attributes.map(SQLValue.text), .integer(device.lastSeenAt), .text(row.status),
            ]
            script += "INSERT INTO devices VALUES (\(values.map(literal).joined(separator: ", ")));\n"
            for tag in device.tags {
                script += "INSERT INTO device_tags VALUES (\(row.rowKey), \(literal(.text(tag))));\n"
            }
        }
        for alias in SegmentFixtures.aliases {
            script += "INSERT INTO user_aliases VALUES (\([alias.app, alias.name, alias.value, alias.user].map { literal(.text($0)) }.joined(separator: ", ")));\n"
        }
        return script + "COMMIT;\n"
    }

    /// Statements that bind `parameters` through the shell's parameter table
    /// and run `query`, whose `?` placeholders are renumbered `?1`, `?2`...
    /// (the shell binds by name). The query itself is sent unchanged otherwise.
    static func bound(_ query: String, _ parameters: [SQLValue]) throws -> String {
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
    try ChildExit.start(process)
    let status = ChildExit.wait(process)
    return (status, try String(contentsOf: output, encoding: .utf8), try String(contentsOf: errors, encoding: .utf8))
}
