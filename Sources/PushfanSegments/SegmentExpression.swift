import PushfanSupport

/// A parsed segment: which of an app's devices a campaign goes to.
///
/// Produced by ``SegmentParser``, turned into SQL by the store (`SegmentSQL`) and
/// evaluated in memory by ``SegmentEvaluator``; docs/segments.md describes the
/// language. `and` and `or` keep their operands in the order written, one node per
/// chain (`a and b and c` is one `.and` with three operands); parentheses that only
/// group leave no node of their own.
///
/// The parser bounds the nesting (``SegmentLimits/maxDepth``); code that builds
/// expressions by hand should stay as shallow, because compiling and evaluating
/// recurse along the tree.
package indirect enum SegmentExpression: Sendable, Equatable {
    /// Every operand holds. An empty list holds for every device.
    case and([SegmentExpression])
    /// At least one operand holds. An empty list holds for none.
    case or([SegmentExpression])
    /// The operand does not hold. Always the exact complement: a device that
    /// lacks a field does not match `locale = de_DE` and so does match
    /// `not locale = de_DE`.
    case not(SegmentExpression)
    case term(SegmentTerm)
}

/// One condition on a device.
package enum SegmentTerm: Sendable, Equatable {
    /// `tag:NAME`: the device carries this tag (exact, case-sensitive).
    case tag(String)
    /// `user:ID`: the device belongs to this user (its `user_id` attribute is this text).
    case user(String)
    /// `alias.NAME:VALUE`: the device's user is the one this alias of the app names
    /// (`crm_id` C-1): the user's devices, found through the alias.
    case alias(name: String, value: String)
    /// `locale`, `timezone` or `environment` compared as exact text.
    case text(SegmentTextField, SegmentCondition<String>)
    /// `app_version` or `os_version`, in version order (see ``VersionKey``).
    case version(SegmentVersionField, SegmentCondition<SegmentVersion>)
    /// `attr.KEY`: one top-level member of the device's attributes object. The
    /// kind of the literal decides the comparison (see ``SegmentAttributeValue``).
    case attribute(key: String, SegmentCondition<SegmentAttributeValue>)
    /// `last_seen within DURATION`: the device registered or was seen at most
    /// that long before the moment of evaluation.
    case seenWithin(SegmentDuration)
}

/// Text fields: compared exactly as stored, with `=`, `!=` and `in` only.
package enum SegmentTextField: String, Sendable, CaseIterable {
    /// As the store normalises it, e.g. `de_DE`. Literals written `de-DE` are
    /// normalised to `de_DE` when parsed.
    case locale
    /// An IANA name such as `Europe/Berlin`.
    case timezone
    /// `sandbox` or `production`; the parser refuses other values.
    case environment
}

/// Version fields, compared through their ``VersionKey``.
package enum SegmentVersionField: String, Sendable, CaseIterable {
    case appVersion = "app_version"
    case osVersion = "os_version"
}

/// The comparison operators, spelled as in the language.
package enum SegmentComparison: String, Sendable, CaseIterable {
    case equal = "="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="

    /// Whether the operator needs an ordering, not just equality.
    package var isOrdering: Bool {
        switch self {
        case .equal, .notEqual: return false
        case .less, .lessOrEqual, .greater, .greaterOrEqual: return true
        }
    }

    /// Whether `order` (the sign of left minus right) satisfies the operator.
    func holds(for order: Int) -> Bool {
        switch self {
        case .equal: return order == 0
        case .notEqual: return order != 0
        case .less: return order < 0
        case .lessOrEqual: return order <= 0
        case .greater: return order > 0
        case .greaterOrEqual: return order >= 0
        }
    }
}

/// What a field is compared with.
package enum SegmentCondition<Value: Sendable & Equatable>: Sendable, Equatable {
    /// `FIELD op VALUE`. `!=` is exactly `not (FIELD = VALUE)`, so it matches
    /// devices that lack the field.
    case compare(SegmentComparison, Value)
    /// `FIELD in (V1, V2, ...)`: equal to at least one of the values.
    case oneOf([Value])
}

/// A version literal as written, with its ordering key.
package struct SegmentVersion: Sendable, Equatable {
    /// The literal as written (`2.3`); kept for messages and printing.
    package let text: String
    /// ``VersionKey/key(_:)`` of `text`: what comparisons use.
    package let key: String

    /// Nil when `text` is not a numeric version.
    package init?(_ text: String) {
        guard let key = VersionKey.key(text) else { return nil }
        self.text = text
        self.key = key
    }
}

/// An attribute literal. Its kind picks the comparison, and a device value of
/// another JSON kind never matches (it behaves as missing):
/// - `.text`: a quoted literal, or a bare one that is not a number or
///   `true`/`false`; compared with JSON strings, byte by byte (UTF-8 order).
/// - `.integer`, `.real`: a bare number; compared numerically with JSON numbers.
/// - `.bool`: bare `true` or `false`; compared with JSON booleans (`=`, `!=`, `in`).
package enum SegmentAttributeValue: Sendable, Equatable {
    case text(String)
    case integer(Int64)
    case real(Double)
    case bool(Bool)
}

/// A look-back window: a whole number of seconds, minutes, hours, days or weeks.
package struct SegmentDuration: Sendable, Equatable {
    package enum Unit: String, Sendable, CaseIterable {
        case seconds = "s", minutes = "m", hours = "h", days = "d", weeks = "w"

        package var milliseconds: Int64 {
            switch self {
            case .seconds: return 1_000
            case .minutes: return 60_000
            case .hours: return 3_600_000
            case .days: return 86_400_000
            case .weeks: return 604_800_000
            }
        }
    }

    /// Longest window accepted, about 100 years; far below overflow.
    package static let maxMilliseconds: Int64 = 36_525 * 86_400_000

    package let amount: Int64
    package let unit: Unit

    /// Nil unless `amount` is positive and the window at most ``maxMilliseconds``.
    package init?(amount: Int64, unit: Unit) {
        guard amount > 0 else { return nil }
        let (total, overflow) = amount.multipliedReportingOverflow(by: unit.milliseconds)
        guard !overflow, total <= Self.maxMilliseconds else { return nil }
        self.amount = amount
        self.unit = unit
    }

    package var milliseconds: Int64 { amount * unit.milliseconds }

    /// The earliest `last_seen_at` (ms since the epoch) inside the window that
    /// ends at `now`; saturates instead of overflowing for absurd clocks.
    package func cutoff(now: Int64) -> Int64 {
        let (value, overflow) = now.subtractingReportingOverflow(milliseconds)
        return overflow ? Int64.min : value
    }
}

// MARK: - Canonical text

extension SegmentExpression: CustomStringConvertible {
    /// The expression in canonical form: lower-case keywords, single spaces, only
    /// the parentheses the structure needs. Parsing it gives back an equal value,
    /// so it is suitable for storing a named segment.
    package var description: String {
        switch self {
        case .and(let operands):
            if operands.isEmpty { return "()" }
            return operands.map { $0.operandText(inside: .and) }.joined(separator: " and ")
        case .or(let operands):
            if operands.isEmpty { return "()" }
            return operands.map { $0.operandText(inside: .or) }.joined(separator: " or ")
        case .not(let operand):
            switch operand {
            case .and, .or: return "not (\(operand))"
            case .not, .term: return "not \(operand)"
            }
        case .term(let term):
            return term.description
        }
    }

    private enum Chain { case and, or }

    private func operandText(inside chain: Chain) -> String {
        switch (self, chain) {
        case (.and, .and), (.or, _): return "(\(self))"
        default: return description
        }
    }
}

extension SegmentTerm: CustomStringConvertible {
    package var description: String {
        switch self {
        case .tag(let name):
            return "tag:" + SegmentLiteral.render(name, allowKeyword: true)
        case .user(let id):
            return "user:" + SegmentLiteral.render(id, allowKeyword: true)
        case .alias(let name, let value):
            return "alias.\(name):" + SegmentLiteral.render(value, allowKeyword: true)
        case .text(let field, let condition):
            return field.rawValue + condition.render { SegmentLiteral.render($0) }
        case .version(let field, let condition):
            return field.rawValue + condition.render(\.text)
        case .attribute(let key, let condition):
            return "attr." + key + condition.render(\.literal)
        case .seenWithin(let duration):
            return "last_seen within \(duration.amount)\(duration.unit.rawValue)"
        }
    }
}

extension SegmentCondition {
    fileprivate func render(_ literal: (Value) -> String) -> String {
        switch self {
        case .compare(let op, let value): return " \(op.rawValue) \(literal(value))"
        case .oneOf(let values): return " in (\(values.map(literal).joined(separator: ", ")))"
        }
    }
}

extension SegmentAttributeValue {
    /// The literal that parses back to this value.
    package var literal: String {
        switch self {
        case .text(let text): return SegmentLiteral.quote(text)
        case .integer(let value): return String(value)
        case .real(let value): return value.description
        case .bool(let value): return value ? "true" : "false"
        }
    }
}

/// Spelling literals the way the lexer reads them back.
package enum SegmentLiteral {
    /// Bare when every character may appear in a bare word (and, unless allowed,
    /// it is not a keyword); quoted otherwise.
    static func render(_ text: String, allowKeyword: Bool = false) -> String {
        let bare = !text.isEmpty
            && text.unicodeScalars.allSatisfy(SegmentLexer.isBareWordScalar)
            && (allowKeyword || !SegmentLexer.keywords.contains(text.lowercased()))
        return bare ? text : quote(text)
    }

    package static func quote(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            if scalar == "\"" || scalar == "\\" { quoted.unicodeScalars.append("\\") }
            quoted.unicodeScalars.append(scalar)
        }
        return quoted + "\""
    }
}
