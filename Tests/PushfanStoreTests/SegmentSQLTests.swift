import Foundation
import Testing

import PushfanMessages
import PushfanSegments
import SegmentTestSupport

@testable import PushfanStore

/// The two syntaxes, as test arguments.
enum Dialect: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres

    var syntax: any SQLSyntax {
        switch self {
        case .sqlite: SQLiteSyntax()
        case .postgres: PostgresSyntax()
        }
    }

    var testDescription: String { rawValue }
}

@Suite("Segment SQL compiler")
struct SegmentSQLTests {
    static let now = SegmentFixtures.now
    static let dialects = Dialect.allCases

    private func compile(_ text: String, _ dialect: Dialect, first: Int = 1) throws -> CompiledSegment {
        SegmentSQL.compile(try SegmentParser.parse(text), syntax: dialect.syntax, now: Self.now, firstParameterIndex: first)
    }

    // MARK: The shapes, pinned

    @Test func sqliteShapes() throws {
        let tag = try compile("tag:sports", .sqlite)
        #expect(tag.sql == "EXISTS (SELECT 1 FROM device_tags t WHERE t.row_key = d.row_key AND t.tag = ?)")
        #expect(tag.parameters == [.text("sports")])

        let locale = try compile("locale != de-DE", .sqlite)
        #expect(locale.sql == "NOT (d.locale IS NOT NULL AND d.locale = ?)")
        #expect(locale.parameters == [.text("de_DE")])

        let list = try compile("timezone in (UTC, Europe/Berlin)", .sqlite)
        #expect(list.sql == "(d.timezone IS NOT NULL AND d.timezone IN (?, ?))")
        #expect(list.parameters == [.text("UTC"), .text("Europe/Berlin")])

        let version = try compile("app_version >= 2.3", .sqlite)
        #expect(version.sql == "(d.app_version_key IS NOT NULL AND d.app_version_key >= ?)")
        #expect(version.parameters == [.text("000002.000003.000000.000000")])

        let number = try compile("attr.age > 18", .sqlite)
        #expect(number.sql == "(CASE WHEN json_type(d.attributes, ?) IN ('integer', 'real') THEN json_extract(d.attributes, ?) > ? ELSE 0 END)")
        #expect(number.parameters == [.text("$.\"age\""), .text("$.\"age\""), .integer(18)])

        let text = try compile("attr.plan = \"free\"", .sqlite)
        #expect(text.sql == "(CASE WHEN json_type(d.attributes, ?) = 'text' THEN json_extract(d.attributes, ?) = ? ELSE 0 END)")

        let flag = try compile("attr.beta = true", .sqlite)
        #expect(flag.sql == "(CASE WHEN json_type(d.attributes, ?) IN ('true', 'false') THEN json_type(d.attributes, ?) = ? ELSE 0 END)")
        #expect(flag.parameters == [.text("$.\"beta\""), .text("$.\"beta\""), .text("true")])

        let seen = try compile("last_seen within 30d", .sqlite)
        #expect(seen.sql == "(d.last_seen_at IS NOT NULL AND d.last_seen_at >= ?)")
        #expect(seen.parameters == [.integer(Self.now - 30 * 86_400_000)])

        let combined = try compile("tag:a and not (locale = x or tag:b)", .sqlite)
        #expect(combined.sql == "(EXISTS (SELECT 1 FROM device_tags t WHERE t.row_key = d.row_key AND t.tag = ?) AND NOT ((d.locale IS NOT NULL AND d.locale = ?) OR EXISTS (SELECT 1 FROM device_tags t WHERE t.row_key = d.row_key AND t.tag = ?)))")
        #expect(combined.parameters == [.text("a"), .text("x"), .text("b")])
    }

    @Test func postgresShapes() throws {
        let tag = try compile("tag:sports", .postgres, first: 3)
        #expect(tag.sql == "EXISTS (SELECT 1 FROM device_tags t WHERE t.row_key = d.row_key AND t.tag = $3::text)")

        let version = try compile("os_version < 17.4 or os_version in (18)", .postgres)
        #expect(version.sql == "((d.os_version_key IS NOT NULL AND d.os_version_key COLLATE \"C\" < $1::text) OR (d.os_version_key IS NOT NULL AND d.os_version_key IN ($2::text)))")

        let number = try compile("attr.age > 18", .postgres, first: 2)
        #expect(number.sql == "(CASE WHEN jsonb_typeof(d.attributes -> $2::text) = 'number' THEN (d.attributes ->> $2::text)::numeric > $3::numeric ELSE FALSE END)")
        #expect(number.parameters == [.text("age"), .integer(18)])

        let text = try compile("attr.plan >= m", .postgres)
        #expect(text.sql == "(CASE WHEN jsonb_typeof(d.attributes -> $1::text) = 'string' THEN (d.attributes ->> $1::text) COLLATE \"C\" >= $2::text ELSE FALSE END)")

        let mixed = try compile("attr.v in (1, x, false, 2.5)", .postgres)
        #expect(mixed.sql == "((CASE WHEN jsonb_typeof(d.attributes -> $1::text) = 'string' THEN (d.attributes ->> $1::text) IN ($2::text) ELSE FALSE END) OR (CASE WHEN jsonb_typeof(d.attributes -> $3::text) = 'number' THEN (d.attributes ->> $3::text)::numeric IN ($4::numeric, $5::numeric) ELSE FALSE END) OR (CASE WHEN jsonb_typeof(d.attributes -> $6::text) = 'boolean' THEN (d.attributes ->> $6::text) IN ($7::text) ELSE FALSE END))")
        #expect(mixed.parameters == [.text("v"), .text("x"), .text("v"), .integer(1), .real(2.5), .text("v"), .text("false")])

        let seen = try compile("not last_seen within 1h", .postgres)
        #expect(seen.sql == "NOT (d.last_seen_at IS NOT NULL AND d.last_seen_at >= $1::bigint)")
    }

    // MARK: Properties of every expression

    static let cases: [(String, Dialect)] = SegmentFixtures.expressions.flatMap { text in dialects.map { (text, $0) } }

    /// Placeholders and parameters correspond one to one, in order.
    @Test(arguments: cases)
    func placeholdersMatchParameters(_ text: String, _ dialect: Dialect) throws {
        for first in [1, 4] {
            let compiled = try compile(text, dialect, first: first)
            let numbers = Self.placeholders(in: compiled.sql, dialect)
            switch dialect {
            case .sqlite:
                #expect(numbers.count == compiled.parameters.count)
            case .postgres:
                // Numbered in order of first use, each from `first` on, reused only for an attribute name.
                var seen: [Int] = []
                for number in numbers where !seen.contains(number) { seen.append(number) }
                #expect(seen == Array(first..<(first + compiled.parameters.count)))
            }
        }
    }

    /// The SQL depends only on the shape of the expression: replacing every user
    /// value by another gives the very same text. So no value can reach the SQL.
    @Test(arguments: cases)
    func sqlDoesNotDependOnValues(_ text: String, _ dialect: Dialect) throws {
        let expression = try SegmentParser.parse(text)
        let original = SegmentSQL.compile(expression, syntax: dialect.syntax, now: Self.now)
        let replaced = SegmentSQL.compile(Self.replacingValues(expression), syntax: dialect.syntax, now: Self.now + 12_345)
        #expect(original.sql == replaced.sql)
        #expect(original.parameters.count == replaced.parameters.count)
        #expect(original.parameters != replaced.parameters)
    }

    /// Only a fixed vocabulary appears in the SQL: column names, keywords, the
    /// JSON type names, the user attribute's path, placeholders.
    @Test(arguments: cases)
    func sqlUsesOnlyFixedVocabulary(_ text: String, _ dialect: Dialect) throws {
        let sql = try compile(text, dialect).sql
        let literals = Self.matches(of: "'[^']*'", in: sql)
        #expect(Set(literals).isSubset(of: ["'text'", "'integer'", "'real'", "'true'", "'false'", "'string'", "'number'", "'boolean'", "'$.user_id'", "'user_id'", "''"]), "\(literals)")
        let quotedNames = Self.matches(of: "\"[^\"]*\"", in: sql)
        #expect(Set(quotedNames).isSubset(of: ["\"C\""]), "\(quotedNames)")
        let words = Set(Self.matches(of: "[A-Za-z_][A-Za-z_.]*", in: sql.replacingOccurrences(of: "'[^']*'", with: "", options: .regularExpression)))
        let vocabulary: Set<String> = [
            "EXISTS", "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "IS", "NULL", "CASE", "WHEN", "THEN", "ELSE",
            "END", "FALSE", "COLLATE", "device_tags", "t", "t.row_key", "t.tag", "d.row_key", "d.locale", "d.timezone",
            "d.environment", "d.app_version_key", "d.os_version_key", "d.attributes", "d.last_seen_at", "json_type",
            "json_extract", "jsonb_typeof", "text", "numeric", "bigint", "C",
            "user_aliases", "a", "a.app", "a.name", "a.value", "a.user_id", "d.app",
        ]
        #expect(words.isSubset(of: vocabulary), "\(words.subtracting(vocabulary))")
    }

    /// Hostile text as values ends up in the parameters, verbatim, and nowhere in the SQL.
    @Test(arguments: [
        "' OR 1=1 --", "; DROP TABLE devices", "x') OR ('1'='1", "Robert'); DROP TABLE devices;--", "$1", "?", "\\",
        "\" OR \"\"=\"", "*/ SELECT 1 /*", "\u{201C}quoted\u{201D}", "\u{2019}", "a\u{300}", "%_",
    ])
    func hostileValuesStayParameters(_ value: String) throws {
        let literal = SegmentLiteral.quote(value)
        for template in ["tag:%@", "timezone = %@", "environment != sandbox or timezone in (x, %@)", "attr.plan != %@", "attr.plan < %@"] {
            let text = template.replacingOccurrences(of: "%@", with: literal)
            for dialect in Self.dialects {
                let compiled = try compile(text, dialect)
                let benign = try compile(template.replacingOccurrences(of: "%@", with: "\"benign\""), dialect)
                #expect(compiled.parameters.contains(.text(value)), "\(text)")
                #expect(compiled.sql == benign.sql, "\(text)")
                if !benign.sql.contains(value) {
                    #expect(!compiled.sql.contains(value), "\(text) → \(compiled.sql)")
                }
            }
        }
    }

    @Test func localeLiteralsAreNormalised() throws {
        #expect(try compile("locale in (de-DE, \"de-AT\", fr_FR)", .sqlite).parameters == [.text("de_DE"), .text("de_AT"), .text("fr_FR")])
    }

    @Test func attributeNamesAreParametersToo() throws {
        let sqlite = try compile("attr.drop-table.x_1 = 1", .sqlite)
        #expect(!sqlite.sql.contains("drop"))
        #expect(sqlite.parameters.first == .text("$.\"drop-table.x_1\""))
        let postgres = try compile("attr.drop-table.x_1 = 1", .postgres)
        #expect(!postgres.sql.contains("drop"))
        #expect(postgres.parameters.first == .text("drop-table.x_1"))
    }

    @Test func lastSeenCutoffFollowsNow() throws {
        let expression = try SegmentParser.parse("last_seen within 2h")
        #expect(SegmentSQL.compile(expression, syntax: SQLiteSyntax(), now: 10_000_000).parameters == [.integer(2_800_000)])
        #expect(SegmentSQL.compile(expression, syntax: PostgresSyntax(), now: .min).parameters == [.integer(.min)])
    }

    @Test func emptyChainsCompileToConstants() {
        #expect(SegmentSQL.compile(.and([]), syntax: SQLiteSyntax(), now: 0).sql == "(1 = 1)")
        #expect(SegmentSQL.compile(.or([]), syntax: PostgresSyntax(), now: 0).sql == "(1 = 0)")
        #expect(SegmentSQL.compile(.and([Seg.tag("x")]), syntax: SQLiteSyntax(), now: 0) == SegmentSQL.compile(Seg.tag("x"), syntax: SQLiteSyntax(), now: 0))
    }

    // MARK: Helpers

    static func placeholders(in sql: String, _ dialect: Dialect) -> [Int] {
        switch dialect {
        case .sqlite: return sql.filter { $0 == "?" }.map { _ in 0 }
        case .postgres: return matches(of: "\\$[0-9]+", in: sql).map { Int($0.dropFirst())! }
        }
    }

    static func matches(of pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        let range = NSRange(text.startIndex..., in: text)
        return regex.matches(in: text, range: range).map { String(text[Range($0.range, in: text)!]) }
    }

    /// The same expression with every value replaced by a different one of the same kind.
    static func replacingValues(_ expression: SegmentExpression) -> SegmentExpression {
        switch expression {
        case .and(let operands): return .and(operands.map(replacingValues))
        case .or(let operands): return .or(operands.map(replacingValues))
        case .not(let operand): return .not(replacingValues(operand))
        case .term(let term):
            switch term {
            case .tag(let name): return .term(.tag(name + "~other"))
            case .user(let id): return .term(.user(id + "~other"))
            case .alias(let name, let value): return .term(.alias(name: name + "x", value: value + "~other"))
            case .text(let field, let condition):
                return .term(.text(field, replacing(condition) { field == .environment ? ($0 == "sandbox" ? "production" : "sandbox") : $0 + "~other" }))
            case .version(let field, let condition):
                return .term(.version(field, replacing(condition) { SegmentVersion($0.text + ".1") ?? SegmentVersion("1.2.3.4")! }))
            case .attribute(let key, let condition):
                return .term(.attribute(key: key + "-other", replacing(condition) { value in
                    switch value {
                    case .text(let text): return .text(text + "~other")
                    case .integer(let number): return .integer(number &+ 1)
                    case .real(let number): return .real(number + 0.5)
                    case .bool(let flag): return .bool(!flag)
                    }
                }))
            case .seenWithin(let duration):
                return .term(.seenWithin(SegmentDuration(amount: duration.amount + 1, unit: duration.unit)!))
            }
        }
    }

    private static func replacing<V>(_ condition: SegmentCondition<V>, _ change: (V) -> V) -> SegmentCondition<V> {
        switch condition {
        case .compare(let op, let value): return .compare(op, change(value))
        case .oneOf(let values): return .oneOf(values.map(change))
        }
    }
}
