import PushfanSupport

/// The fields of one device that a segment can look at, in memory.
///
/// Mirrors the store's device row (docs/segments.md, "Columns"); a nil field is
/// a NULL column.
package struct SegmentDevice: Sendable, Equatable {
    package var tags: Set<String>
    package var locale: String?
    package var timezone: String?
    /// `sandbox` or `production`.
    package var environment: String
    package var appVersion: String?
    package var osVersion: String?
    /// The top-level members of the device's attributes object.
    package var attributes: [String: JSONValue]
    /// When the device last registered or was seen, ms since the epoch.
    package var lastSeenAt: Int64
    /// The aliases of the device's user (name → value); empty without a user.
    package var userAliases: [String: String] = [:]

    package init(
        tags: Set<String> = [], locale: String? = nil, timezone: String? = nil, environment: String = "production",
        appVersion: String? = nil, osVersion: String? = nil, attributes: [String: JSONValue] = [:], lastSeenAt: Int64 = 0
    ) {
        self.tags = tags
        self.locale = locale
        self.timezone = timezone
        self.environment = environment
        self.appVersion = appVersion
        self.osVersion = osVersion
        self.attributes = attributes
        self.lastSeenAt = lastSeenAt
    }
}

/// Decides a segment for one device without a database.
///
/// This is the reference for the meaning of the language: the SQL that
/// the store's `SegmentSQL` produces must select exactly the devices for which
/// ``matches(_:device:now:)`` is true, and the tests hold both to that. The rules
/// it encodes, which the SQL mirrors:
/// - a missing field (or an attribute of another JSON kind than the literal) makes
///   every comparison false, except `!=`, which is `not =`;
/// - text is compared byte by byte as UTF-8, as SQLite's BINARY collation and
///   PostgreSQL's `"C"` collation do (so `é` precomposed and decomposed differ);
/// - numbers compare exactly, integers against fractions included;
/// - `not` is the exact complement.
package enum SegmentEvaluator {
    package static func matches(_ expression: SegmentExpression, device: SegmentDevice, now: Int64) -> Bool {
        switch expression {
        case .and(let operands): return operands.allSatisfy { matches($0, device: device, now: now) }
        case .or(let operands): return operands.contains { matches($0, device: device, now: now) }
        case .not(let operand): return !matches(operand, device: device, now: now)
        case .term(let term): return matches(term, device: device, now: now)
        }
    }

    private static func matches(_ term: SegmentTerm, device: SegmentDevice, now: Int64) -> Bool {
        switch term {
        case .tag(let name):
            return device.tags.contains { ByteOrder.equal($0, name) }
        case .user(let id):
            guard case .string(let user)? = device.attributes["user_id"] else { return false }
            return ByteOrder.equal(user, id)
        case .alias(let name, let value):
            guard case .string? = device.attributes["user_id"], let held = device.userAliases[name] else { return false }
            return ByteOrder.equal(held, value)
        case .text(let field, let condition):
            let stored: String?
            switch field {
            case .locale: stored = device.locale
            case .timezone: stored = device.timezone
            case .environment: stored = device.environment
            }
            return holds(condition) { literal in stored.map { ByteOrder.compare($0, literal) } }
        case .version(let field, let condition):
            let raw = field == .appVersion ? device.appVersion : device.osVersion
            let key = raw.flatMap(VersionKey.key)
            return holds(condition) { literal in key.map { ByteOrder.compare($0, literal.key) } }
        case .attribute(let key, let condition):
            let stored = device.attributes[key]
            return holds(condition) { literal in order(of: stored, against: literal) }
        case .seenWithin(let duration):
            return device.lastSeenAt >= duration.cutoff(now: now)
        }
    }

    /// Applies a condition given how the stored value orders against a literal
    /// (negative, zero, positive), or nil when they cannot be compared.
    private static func holds<V>(_ condition: SegmentCondition<V>, order: (V) -> Int?) -> Bool {
        switch condition {
        case .compare(.notEqual, let literal): return order(literal) != 0
        case .compare(let op, let literal): return order(literal).map(op.holds) ?? false
        case .oneOf(let literals): return literals.contains { order($0) == 0 }
        }
    }

    private static func order(of stored: JSONValue?, against literal: SegmentAttributeValue) -> Int? {
        // The parser never produces NaN; a hand-built one matches nothing.
        if case .real(let expected) = literal, expected.isNaN { return nil }
        switch (stored, literal) {
        case (.string(let text)?, .text(let expected)):
            return ByteOrder.compare(text, expected)
        case (.bool(let value)?, .bool(let expected)):
            return value == expected ? 0 : 1
        case (.int(let value)?, .integer(let expected)):
            return value < expected ? -1 : (value == expected ? 0 : 1)
        case (.int(let value)?, .real(let expected)):
            return NumberOrder.compare(value, expected)
        case (.number(let value)?, .integer(let expected)) where value.isFinite:
            return -NumberOrder.compare(expected, value)
        case (.number(let value)?, .real(let expected)) where value.isFinite:
            return value < expected ? -1 : (value == expected ? 0 : 1)
        default:
            // Missing, null, another kind, or a non-finite number (which the
            // store cannot hold: JSON has no form for it).
            return nil
        }
    }
}

/// Byte-wise UTF-8 order, the order of SQLite's BINARY and PostgreSQL's "C"
/// collations. Swift's own `==` and `<` on String use Unicode canonical
/// equivalence, which a database does not.
enum ByteOrder {
    static func compare(_ left: String, _ right: String) -> Int {
        var a = left.utf8.makeIterator()
        var b = right.utf8.makeIterator()
        while true {
            switch (a.next(), b.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?): if x != y { return x < y ? -1 : 1 }
            }
        }
    }

    static func equal(_ left: String, _ right: String) -> Bool {
        left.utf8.elementsEqual(right.utf8)
    }
}

/// Exact comparison of an integer with a fraction, as SQLite and PostgreSQL's
/// `numeric` make it (converting the integer to Double would round above 2^53).
enum NumberOrder {
    static func compare(_ integer: Int64, _ real: Double) -> Int {
        // -2^63 is exact as a Double; 2^63 is the first Double above Int64.max.
        if real < -9_223_372_036_854_775_808.0 { return 1 }
        if real >= 9_223_372_036_854_775_808.0 { return -1 }
        let whole = real.rounded(.towardZero)
        let truncated = Int64(whole)
        if integer != truncated { return integer < truncated ? -1 : 1 }
        let fraction = real - whole
        return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0)
    }
}
