import Foundation
import Testing

import PushfanMessages
import PushfanSegments
import SegmentTestSupport

@testable import PushfanStore

/// Runs compiled segments in a real SQLite (through the `sqlite3` shell, so the
/// test bundle links nothing) over the fixture devices, and compares the rows
/// found with the reference evaluator's answer. Parameters are bound by the
/// shell from its parameter table; the compiled SQL is sent as it is.
@Suite("Segment SQL on SQLite", .enabled(if: SQLiteShell.isAvailable, "needs /usr/bin/sqlite3 (apt-get install sqlite3)"), .timeLimit(.minutes(2)))
struct SegmentSQLiteTests {
    static let schema: String = {
        do { return try SQLiteShell.schema(with: SegmentFixtures.rows) } catch { return "SELECT RAISE(FAIL, 'fixture: \(error)');" }
    }()

    /// Row keys that SQLite selects for `condition`.
    private func rowKeys(_ compiled: CompiledSegment) throws -> [Int64] {
        let script = Self.schema + (try SQLiteShell.bound(SQLiteShell.storeQuery(compiled.sql), compiled.parameters))
        let output = try SQLiteShell.run(script).trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = output.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let count = Int(parts[0]) else { throw SQLiteShell.Failure(description: "unexpected output: \(output)") }
        let keys = parts[1].split(separator: ",").compactMap { Int64($0) }.sorted()
        #expect(keys.count == count)
        return keys
    }

    @Test(arguments: SegmentFixtures.expressions)
    func sqliteAgreesWithTheEvaluator(_ text: String) throws {
        let expression = try SegmentParser.parse(text)
        let compiled = SegmentSQL.compile(expression, syntax: SQLiteSyntax(), now: SegmentFixtures.now)
        let expected = SegmentFixtures.expectedRowKeys(expression)
        #expect(try rowKeys(compiled) == expected, "\(text)\n\(compiled.sql)")

        // The complement, through SQL's NOT: together they cover every row exactly once.
        let negated = SegmentSQL.compile(.not(expression), syntax: SQLiteSyntax(), now: SegmentFixtures.now)
        let complement = try rowKeys(negated)
        #expect(complement == SegmentFixtures.expectedRowKeys(.not(expression)), "not (\(text))")
        #expect(Set(complement).isDisjoint(with: expected))
        #expect(complement.count + expected.count == SegmentFixtures.expectedRowKeys(.and([])).count)
    }

    /// The fixtures are varied enough to make the comparison mean something:
    /// most expressions select some rows but not all.
    @Test func fixturesDiscriminate() throws {
        let all = SegmentFixtures.expectedRowKeys(.and([])).count
        #expect(all > 200)
        var informative = 0
        for text in SegmentFixtures.expressions {
            let count = SegmentFixtures.expectedRowKeys(try SegmentParser.parse(text)).count
            if count > 0 && count < all { informative += 1 }
        }
        #expect(informative >= SegmentFixtures.expressions.count - 2)
    }

    /// The deepest nestings the parser accepts still fit SQLite's parser stack,
    /// inside the store's query, with the heaviest terms at the bottom.
    @Test(arguments: [
        "(tag:a and %@)", "(tag:a or %@)", "not %@", "(not %@)", "(tag:a and not %@)", "(tag:a or not (tag:b and %@))",
    ], [
        "attr.n in (1, x, true)", "tag:\"deep\"", "app_version > 2.3",
    ])
    func deepestExpressionsRun(_ level: String, _ bottom: String) throws {
        var text = bottom
        var depth = 0
        while true {
            let deeper = level.replacingOccurrences(of: "%@", with: text)
            guard (try? SegmentParser.parse(deeper)) != nil else { break }
            text = deeper
            depth += 1
        }
        // Each level uses one unit of the depth limit per '(' and per 'not'.
        let units = level.filter { $0 == "(" }.count + level.components(separatedBy: "not ").count - 1
        #expect(depth * units > SegmentLimits.standard.maxDepth - units, "only \(depth) levels parsed for \(level)")
        let expression = try SegmentParser.parse(text)
        let compiled = SegmentSQL.compile(expression, syntax: SQLiteSyntax(), now: SegmentFixtures.now)
        #expect(try rowKeys(compiled) == SegmentFixtures.expectedRowKeys(expression))
        let negated = SegmentSQL.compile(.not(expression), syntax: SQLiteSyntax(), now: SegmentFixtures.now)
        _ = try rowKeys(negated)
    }

    /// The largest lists and term counts run too.
    @Test func widestExpressionsRun() throws {
        let values = (0..<500).map { "\"v\($0)\"" }.joined(separator: ",")
        let list = try SegmentParser.parse("attr.plan in (\(values.replacingOccurrences(of: "\"v7\"", with: "free")))")
        #expect(try rowKeys(SegmentSQL.compile(list, syntax: SQLiteSyntax(), now: 0)) == SegmentFixtures.expectedRowKeys(list))
        let terms = try SegmentParser.parse((0..<199).map { "attr.age = \($0)" }.joined(separator: " or ") + " or tag:news")
        #expect(try rowKeys(SegmentSQL.compile(terms, syntax: SQLiteSyntax(), now: 0)) == SegmentFixtures.expectedRowKeys(terms))
    }

    /// Hostile values are data: the tables are intact afterwards and the value is
    /// matched literally.
    @Test func injectionAttemptsAreInert() throws {
        let expression = try SegmentParser.parse("tag:\"' OR 1=1 --\" or locale = \"x'); DROP TABLE devices; --\"")
        let compiled = SegmentSQL.compile(expression, syntax: SQLiteSyntax(), now: 0)
        let script = Self.schema + (try SQLiteShell.bound(SQLiteShell.storeQuery(compiled.sql), compiled.parameters))
            + "SELECT 'devices=' || count(*) FROM devices;\n"
        let lines = try SQLiteShell.run(script).split(separator: "\n").map(String.init)
        let expected = SegmentFixtures.expectedRowKeys(expression)
        #expect(!expected.isEmpty)
        #expect(lines.first?.hasPrefix("\(expected.count):") == true)
        #expect(lines.last == "devices=\(SegmentFixtures.rows.count)")
    }
}
