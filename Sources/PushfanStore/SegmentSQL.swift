import PushfanMessages
import PushfanSegments

/// A segment as a boolean SQL condition over the device table aliased `d`, with
/// the values for its placeholders in placeholder order.
struct CompiledSegment: Sendable, Equatable {
    let sql: String
    let parameters: [SQLValue]

    init(sql: String, parameters: [SQLValue]) {
        self.sql = sql
        self.parameters = parameters
    }
}

/// Turns a ``SegmentExpression`` (the segment language's parser and tree) into a parameterised SQL
/// condition over the store's schema. Where SQLite and PostgreSQL write it differently
/// (placeholders, false, byte-wise ordering, JSON attributes) it asks the `SQLSyntax` of
/// the connection's backend.
///
/// The store embeds the result as
/// `WHERE d.app = ? AND d.status = 'active' AND (<sql>)` (docs/segments.md lists
/// the columns it relies on). Three properties matter:
/// - **No user text in the SQL.** Tag names, values, attribute names and the
///   `last_seen` cutoff are all parameters.
/// - **Two-valued logic.** Every term yields true or false, never NULL (a
///   missing column or attribute gives false), so `NOT` is the exact complement
///   and agrees with ``SegmentEvaluator``. A NULL would otherwise make both
///   `x` and `NOT x` drop the row.
/// - **Same meaning on both backends.** Text compares byte-wise (SQLite BINARY,
///   PostgreSQL `COLLATE "C"` where order matters); an attribute compares only
///   with JSON values of the literal's kind, checked with `json_type` /
///   `jsonb_typeof` inside a `CASE`, which, unlike `AND`, PostgreSQL never
///   reorders, so `::numeric` never sees a string.
///
/// Nesting follows the expression: with the parser's depth limit the text stays
/// within SQLite's parser stack (see ``SegmentLimits/maxDepth``).
enum SegmentSQL {
    /// - Parameters:
    ///   - now: the moment `last_seen within ...` counts back from, in ms since
    ///     the epoch; it becomes a parameter, so recompile for another moment.
    ///   - firstParameterIndex: the number of the first placeholder, after the
    ///     store's own parameters (PostgreSQL numbers them; SQLite binds `?` in order).
    static func compile(
        _ expression: SegmentExpression, syntax: any SQLSyntax, now: Int64, firstParameterIndex: Int = 1
    ) -> CompiledSegment {
        var writer = SQLWriter(syntax: syntax, firstIndex: firstParameterIndex, now: now)
        let sql = writer.expression(expression)
        return CompiledSegment(sql: sql, parameters: writer.parameters)
    }
}

private struct SQLWriter {
    let syntax: any SQLSyntax
    let firstIndex: Int
    let now: Int64
    private(set) var parameters: [SQLValue] = []

    init(syntax: any SQLSyntax, firstIndex: Int, now: Int64) {
        self.syntax = syntax
        self.firstIndex = firstIndex
        self.now = now
    }

    /// Appends a parameter and returns its placeholder, typed (PostgreSQL casts it, so
    /// its type never depends on inference).
    private mutating func bind(_ parameter: SQLValue, as type: SQLParameterType) -> String {
        parameters.append(parameter)
        return syntax.placeholder(firstIndex + parameters.count - 1, type: type)
    }

    // Every fragment returned below is self-delimiting (parenthesised, a function
    // call, EXISTS (...) or NOT followed by one), so fragments combine without
    // precedence surprises. Placeholders are bound in the order they appear.

    mutating func expression(_ expression: SegmentExpression) -> String {
        switch expression {
        case .and(let operands): return chain(operands, with: "AND", empty: "(1 = 1)")
        case .or(let operands): return chain(operands, with: "OR", empty: "(1 = 0)")
        case .not(let operand): return "NOT " + self.expression(operand)
        case .term(let term): return self.term(term)
        }
    }

    private mutating func chain(_ operands: [SegmentExpression], with keyword: String, empty: String) -> String {
        if operands.isEmpty { return empty }
        if operands.count == 1 { return expression(operands[0]) }
        var parts: [String] = []
        for operand in operands { parts.append(expression(operand)) }
        return "(" + parts.joined(separator: " \(keyword) ") + ")"
    }

    private mutating func term(_ term: SegmentTerm) -> String {
        switch term {
        case .tag(let name):
            let tag = bind(.text(name), as: .text)
            return "EXISTS (SELECT 1 FROM device_tags t WHERE t.row_key = d.row_key AND t.tag = \(tag))"
        case .user(let id):
            // As the index `devices_by_user` has it, so a segment of one user is a lookup.
            let (user, placeholder) = (syntax.deviceUser("d"), bind(.text(id), as: .text))
            return "(\(user) IS NOT NULL AND \(user) = \(placeholder))"
        case .alias(let name, let value):
            // The alias row (a key lookup) names the device's user. `|| ''` gives the stored id
            // no column affinity, so SQLite compares it with the user expression as is and a
            // legacy number never equals a text id (as `user:` and the evaluator have it).
            let user = syntax.deviceUser("d")
            let (named, valued) = (bind(.text(name), as: .text), bind(.text(value), as: .text))
            return "(\(user) IS NOT NULL AND EXISTS (SELECT 1 FROM user_aliases a WHERE a.app = d.app AND a.name = \(named) AND a.value = \(valued) AND \(user) = a.user_id || ''))"
        case .text(let field, let condition):
            return column("d.\(field.rawValue)", condition) { .text($0) }
        case .version(let field, let condition):
            return column("d.\(field.rawValue)_key", condition) { .text($0.key) }
        case .attribute(let key, let condition):
            return attribute(key, condition)
        case .seenWithin(let duration):
            let cutoff = bind(.integer(duration.cutoff(now: now)), as: .bigint)
            return "(d.last_seen_at IS NOT NULL AND d.last_seen_at >= \(cutoff))"
        }
    }

    /// A text column. `IS NOT NULL AND` turns the NULL of a missing value into
    /// false while leaving the comparison itself free to use an index.
    private mutating func column<V>(
        _ name: String, _ condition: SegmentCondition<V>, _ parameter: (V) -> SQLValue
    ) -> String {
        switch condition {
        case .compare(.notEqual, let value):
            return "NOT " + column(name, .compare(.equal, value), parameter)
        case .compare(let op, let value):
            let collate = op.isOrdering ? syntax.byteOrder : ""
            let placeholder = bind(parameter(value), as: .text)
            return "(\(name) IS NOT NULL AND \(name)\(collate) \(op.rawValue) \(placeholder))"
        case .oneOf(let values):
            var placeholders: [String] = []
            for value in values { placeholders.append(bind(parameter(value), as: .text)) }
            return "(\(name) IS NOT NULL AND \(name) IN (\(placeholders.joined(separator: ", "))))"
        }
    }

    // MARK: Attributes

    private typealias Kind = SQLAttributeKind

    private mutating func attribute(_ key: String, _ condition: SegmentCondition<SegmentAttributeValue>) -> String {
        switch condition {
        case .compare(.notEqual, let value):
            return "NOT " + attribute(key, .compare(.equal, value))
        case .compare(let op, let value):
            return attributeTest(key, Kind(value), op, [value])
        case .oneOf(let values):
            // One IN per kind of literal: at most three tests, however long the list.
            var tests: [String] = []
            for kind in Kind.allCases {
                let ofKind = values.filter { Kind($0) == kind }
                if !ofKind.isEmpty { tests.append(attributeTest(key, kind, nil, ofKind)) }
            }
            return tests.count == 1 ? tests[0] : "(" + tests.joined(separator: " OR ") + ")"
        }
    }

    /// `CASE WHEN <the member has the literal's JSON kind> THEN <comparison> ELSE
    /// false END`; `op` nil means `IN (values)`.
    private mutating func attributeTest(
        _ key: String, _ kind: Kind, _ op: SegmentComparison?, _ values: [SegmentAttributeValue]
    ) -> String {
        var bindings: [SQLValue] = []
        let access = syntax.attribute(key, kind: kind, ordering: op?.isOrdering == true) { value in
            bindings.append(value)
            return syntax.placeholder(firstIndex + parameters.count + bindings.count - 1, type: .text)
        }
        parameters += bindings
        let (check, member) = (access.check, access.member)
        let comparison: String
        if let op {
            comparison = "\(member) \(op.rawValue) \(attributeValue(values[0]))"
        } else {
            var placeholders: [String] = []
            for value in values { placeholders.append(attributeValue(value)) }
            comparison = "\(member) IN (\(placeholders.joined(separator: ", ")))"
        }
        return "(CASE WHEN \(check) THEN \(comparison) ELSE \(syntax.falseValue) END)"
    }

    private mutating func attributeValue(_ value: SegmentAttributeValue) -> String {
        switch value {
        case .text(let text): return bind(.text(text), as: .text)
        case .integer(let number): return bind(.integer(number), as: .numeric)
        case .real(let number): return bind(.real(number), as: .numeric)
        case .bool(let flag): return bind(.text(flag ? "true" : "false"), as: .text)
        }
    }
}
