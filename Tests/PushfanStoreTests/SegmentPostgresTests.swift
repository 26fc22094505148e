import Foundation
import Testing

import PushfanMessages
import PushfanSegments
import PushfanSupport
import SegmentTestSupport

@testable import PushfanStore

/// The PostgreSQL twin of the SQLite suite: the same fixture devices in a JSONB
/// table, the same expressions, compared with the same reference evaluator.
///
/// Opt-in, because it needs a running server: set `PUSHFAN_TEST_PSQL` to a
/// libpq connection string (e.g. `host=/tmp/pg port=55432 user=postgres
/// dbname=postgres`). Everything lives in temporary tables of the test's own
/// session, so nothing is left in the database. The compiled SQL is run through
/// `PREPARE` and the parameters through `EXECUTE`, so the statement really is
/// parameterised.
@Suite(
    "Segment SQL on PostgreSQL",
    .enabled(if: PSQLShell.connection != nil, "set PUSHFAN_TEST_PSQL to a connection string to run"),
    .timeLimit(.minutes(2)))
struct SegmentPostgresTests {
    static let schema: String = {
        do { return try PSQLShell.schema(with: SegmentFixtures.rows) } catch { return "SELECT 1/0; -- fixture: \(error)" }
    }()

    private func rowKeys(_ compiled: CompiledSegment) throws -> [Int64] {
        let query = """
            SELECT count(*) || ':' || coalesce(string_agg(d.row_key::text, ',' ORDER BY d.row_key), '')
            FROM devices d WHERE d.app = $1::text AND d.status = 'active' AND (\(compiled.sql))
            """
        let arguments = [PSQLShell.literal(.text("app1"))] + compiled.parameters.map(PSQLShell.literal)
        let script = Self.schema + "PREPARE segment AS \(query);\nEXECUTE segment(\(arguments.joined(separator: ", ")));\n"
        let output = try PSQLShell.run(script).trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = output.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let count = Int(parts[0]) else { throw PSQLShell.Failure(description: "unexpected output: \(output)") }
        let keys = parts[1].split(separator: ",").compactMap { Int64($0) }
        #expect(keys.count == count)
        return keys
    }

    @Test(arguments: SegmentFixtures.expressions)
    func postgresAgreesWithTheEvaluator(_ text: String) throws {
        let expression = try SegmentParser.parse(text)
        let compiled = SegmentSQL.compile(expression, syntax: PostgresSyntax(), now: SegmentFixtures.now, firstParameterIndex: 2)
        #expect(try rowKeys(compiled) == SegmentFixtures.expectedRowKeys(expression), "\(text)\n\(compiled.sql)")
        let negated = SegmentSQL.compile(.not(expression), syntax: PostgresSyntax(), now: SegmentFixtures.now, firstParameterIndex: 2)
        #expect(try rowKeys(negated) == SegmentFixtures.expectedRowKeys(.not(expression)), "not (\(text))")
    }

    @Test(arguments: ["(tag:a and %@)", "(tag:a and not %@)", "not %@"])
    func deepestExpressionsRun(_ level: String) throws {
        var text = "attr.n in (1, x, true)"
        while let deeper = Optional(level.replacingOccurrences(of: "%@", with: text)), (try? SegmentParser.parse(deeper)) != nil {
            text = deeper
        }
        let expression = try SegmentParser.parse(text)
        let compiled = SegmentSQL.compile(expression, syntax: PostgresSyntax(), now: 0, firstParameterIndex: 2)
        #expect(try rowKeys(compiled) == SegmentFixtures.expectedRowKeys(expression))
    }
}

/// `psql`, for the opt-in PostgreSQL suite.
enum PSQLShell {
    static let path = "/usr/bin/psql"
    static var connection: String? {
        guard let value = ProcessInfo.processInfo.environment["PUSHFAN_TEST_PSQL"], !value.isEmpty,
            FileManager.default.isExecutableFile(atPath: path)
        else { return nil }
        return value
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(_ script: String) throws -> String {
        guard let connection else { throw Failure(description: "PUSHFAN_TEST_PSQL is not set") }
        let (status, stdout, stderr) = try runSQLTool(path, script: script, scriptOnStandardInput: false) { file in
            ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", connection, "-f", file]
        }
        guard status == 0, stderr.isEmpty else { throw Failure(description: "psql exited with \(status): \(stderr)") }
        return stdout
    }

    /// Harness-only literal: text as hex-encoded UTF-8, so no quoting is involved.
    static func literal(_ parameter: SQLValue?) -> String {
        switch parameter {
        case nil, .null?: return "NULL"
        case .text(let text)?:
            let hex = text.utf8.map { String(format: "%02x", $0) }.joined()
            return "convert_from('\\x\(hex)'::bytea, 'UTF8')"
        case .integer(let value)?: return String(value)
        case .real(let value)?: return value.description
        }
    }

    static func schema(with rows: [SegmentFixtureRow]) throws -> String {
        var script = """
            SET client_min_messages = warning;
            CREATE TEMP TABLE devices (
                row_key BIGINT PRIMARY KEY, app TEXT NOT NULL, device_id TEXT NOT NULL, token TEXT NOT NULL,
                environment TEXT NOT NULL, locale TEXT, timezone TEXT, app_version TEXT, app_version_key TEXT,
                os_version TEXT, os_version_key TEXT, attributes JSONB, last_seen_at BIGINT NOT NULL,
                status TEXT NOT NULL);
            CREATE TEMP TABLE user_aliases (app TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (app, name, value));
            CREATE TEMP TABLE device_tags (row_key BIGINT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (row_key, tag));

            """
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for row in rows {
            let device = row.device
            let attributes = row.nullAttributes
                ? "NULL"
                : literal(.text(String(decoding: try encoder.encode(JSONValue.object(device.attributes)), as: UTF8.self))) + "::jsonb"
            let values: [String] = [
                literal(.integer(row.rowKey)), literal(.text(row.app)), literal(.text("device-\(row.rowKey)")),
                literal(.text("token-\(row.rowKey)")), literal(.text(device.environment)),
                literal(device.locale.map(SQLValue.text)), literal(device.timezone.map(SQLValue.text)),
                literal(device.appVersion.map(SQLValue.text)),
                literal(device.appVersion.flatMap(VersionKey.key).map(SQLValue.text)),
                literal(device.osVersion.map(SQLValue.text)),
                literal(device.osVersion.flatMap(VersionKey.key).map(SQLValue.text)),
                attributes, literal(.integer(device.lastSeenAt)), literal(.text(row.status)),
            ]
            script += "INSERT INTO devices VALUES (\(values.joined(separator: ", ")));\n"
            for tag in device.tags {
                script += "INSERT INTO device_tags VALUES (\(row.rowKey), \(literal(.text(tag))));\n"
            }
        }
        for alias in SegmentFixtures.aliases {
            script += "INSERT INTO user_aliases VALUES (\([alias.app, alias.name, alias.value, alias.user].map { literal(.text($0)) }.joined(separator: ", ")));\n"
        }
        return script
    }
}
