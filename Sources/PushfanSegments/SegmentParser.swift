import PushfanSupport

/// Reads segment expressions (docs/segments.md) into ``SegmentExpression``s.
///
/// A recursive-descent parser over the grammar
///
///     expr  := or
///     or    := and ('or' and)*
///     and   := unary ('and' unary)*
///     unary := 'not' unary | '(' expr ')' | term
///
/// `and` and `or` chains are read with loops; only `not` and `(` recurse, and
/// the depth is checked before each recursion, so no input, however hostile, can
/// exhaust the stack. The whole input is refused with a ``SegmentError`` at the
/// first problem in reading order; nothing is guessed or skipped.
package enum SegmentParser {
    /// Parses `text`, or throws the first problem with its position.
    package static func parse(_ text: String, limits: SegmentLimits = .standard) throws(SegmentError) -> SegmentExpression {
        let bytes = text.utf8.count
        if bytes > limits.maxBytes {
            throw .tooLarge(
                at: positionOfByte(limits.maxBytes, in: text),
                "the expression is \(bytes) bytes long; at most \(limits.maxBytes) bytes are allowed")
        }
        var parser = Parser(text, limits: limits)
        return try parser.parseExpression()
    }

    /// The 1-based character position of the character holding byte
    /// `byteOffset` (0-based) of the UTF-8 form.
    private static func positionOfByte(_ byteOffset: Int, in text: String) -> Int {
        var bytes = 0
        var position = 0
        for scalar in text.unicodeScalars {
            position += 1
            bytes += UTF8.width(scalar)
            if bytes > byteOffset { break }
        }
        return position
    }
}

private struct Parser {
    private var lexer: SegmentLexer
    private var lookahead: SegmentToken?
    private let limits: SegmentLimits
    private var termCount = 0

    init(_ text: String, limits: SegmentLimits) {
        lexer = SegmentLexer(text)
        self.limits = limits
    }

    // MARK: Tokens

    /// The next token, read on first use so lexical errors surface in order.
    private mutating func peek() throws(SegmentError) -> SegmentToken {
        if let lookahead { return lookahead }
        let token = try lexer.next()
        lookahead = token
        return token
    }

    private mutating func take() throws(SegmentError) -> SegmentToken {
        let token = try peek()
        lookahead = nil
        return token
    }

    // MARK: Structure

    mutating func parseExpression() throws(SegmentError) -> SegmentExpression {
        let expression = try parseOr(depth: 0)
        let next = try peek()
        guard next.kind == .end else {
            let hint = next.kind == .rightParen ? " (there is no '(' for it to close)" : ""
            throw .syntax(at: next.position, "expected 'and', 'or' or end of input, found \(next.found)\(hint)")
        }
        return expression
    }

    private mutating func parseOr(depth: Int) throws(SegmentError) -> SegmentExpression {
        var operands = [try parseAnd(depth: depth)]
        while try peek().isKeyword("or") {
            _ = try take()
            operands.append(try parseAnd(depth: depth))
        }
        return operands.count == 1 ? operands[0] : .or(operands)
    }

    private mutating func parseAnd(depth: Int) throws(SegmentError) -> SegmentExpression {
        var operands = [try parseUnary(depth: depth)]
        while try peek().isKeyword("and") {
            _ = try take()
            operands.append(try parseUnary(depth: depth))
        }
        return operands.count == 1 ? operands[0] : .and(operands)
    }

    private mutating func parseUnary(depth: Int) throws(SegmentError) -> SegmentExpression {
        let token = try peek()
        if token.isKeyword("not") {
            try checkDepth(depth, at: token)
            _ = try take()
            return .not(try parseUnary(depth: depth + 1))
        }
        if token.kind == .leftParen {
            try checkDepth(depth, at: token)
            _ = try take()
            let inner = try parseOr(depth: depth + 1)
            let close = try take()
            guard close.kind == .rightParen else {
                throw .syntax(
                    at: close.position,
                    "expected 'and', 'or' or ')' to close the '(' at \(token.position), found \(close.found)")
            }
            return inner
        }
        return .term(try parseTerm())
    }

    private func checkDepth(_ depth: Int, at token: SegmentToken) throws(SegmentError) {
        guard depth < limits.maxDepth else {
            throw .tooLarge(
                at: token.position,
                "nested too deeply: at most \(limits.maxDepth) levels of parentheses and 'not' are allowed")
        }
    }

    // MARK: Terms

    private static let termHint = "tag:NAME, user:ID, alias.NAME:VALUE, attr.NAME, locale, timezone, environment, app_version, os_version or last_seen"

    private mutating func parseTerm() throws(SegmentError) -> SegmentTerm {
        let token = try take()
        guard case .word(let word) = token.kind else {
            throw .syntax(at: token.position, "expected a condition (\(Self.termHint)) or '(', found \(token.found)")
        }
        let lower = word.lowercased()
        if SegmentLexer.keywords.contains(lower) {
            throw .syntax(at: token.position, "expected a condition (\(Self.termHint)) or '(', found \(token.found)")
        }
        termCount += 1
        guard termCount <= limits.maxTerms else {
            throw .tooLarge(at: token.position, "too many conditions: at most \(limits.maxTerms) are allowed")
        }

        if lower.hasPrefix("tag:") {
            return .tag(try parseName(String(word.dropFirst(4)), of: "tag", token: token))
        }
        if lower.hasPrefix("user:") {
            return .user(try parseName(String(word.dropFirst(5)), of: "user", token: token))
        }
        if lower.hasPrefix("attr.") {
            return try parseAttribute(key: String(word.dropFirst(5)), token: token)
        }
        if lower.hasPrefix("alias.") {
            return try parseAlias(String(word.dropFirst(6)), token: token)
        }
        switch lower {
        case "tag":
            throw .syntax(at: token.position, "expected ':' right after 'tag' (write tag:NAME or tag:\"a name\")")
        case "user":
            throw .syntax(at: token.position, "expected ':' right after 'user' (write user:ID or user:\"an id\")")
        case "attr":
            throw .syntax(at: token.position, "expected '.' and a name right after 'attr' (write attr.NAME)")
        case "alias":
            throw .syntax(at: token.position, "expected '.' and an alias name right after 'alias' (write alias.NAME:VALUE)")
        case "last_seen":
            return try parseLastSeen(token: token)
        default:
            break
        }
        if let field = SegmentTextField(rawValue: lower) {
            return try parseText(field, token: token)
        }
        if let field = SegmentVersionField(rawValue: lower) {
            return try parseVersion(field, token: token)
        }
        throw .unknownField(at: token.position, "unknown field '\(word)'; expected \(Self.termHint)")
    }

    /// `tag:NAME` arrives as one word; `tag:"a name"` as the word `tag:` and a string.
    /// The same for `user:`.
    private mutating func parseName(_ bare: String, of prefix: String, token: SegmentToken) throws(SegmentError) -> String {
        if !bare.isEmpty { return bare }
        let (noun, forms) = prefix == "tag" ? ("a tag name", "tag:NAME or tag:\"a name\"") : ("a user id", "user:ID or user:\"an id\"")
        let name = try take()
        guard case .string(let text) = name.kind else {
            throw .syntax(at: name.position, "expected \(noun) right after '\(prefix):' (write \(forms)), found \(name.found)")
        }
        guard !text.isEmpty else { throw .invalidValue(at: name.position, "\(noun) cannot be empty") }
        return text
    }

    /// `alias.crm_id:C-1` arrives as one word, `alias.crm_id:"C 1"` as the word
    /// `alias.crm_id:` and a string. Alias names are 1-32 characters of a-z 0-9 _.
    private mutating func parseAlias(_ rest: String, token: SegmentToken) throws(SegmentError) -> SegmentTerm {
        guard let colon = rest.firstIndex(of: ":") else {
            throw .syntax(at: token.position, "expected ':' and a value after the alias name (write alias.NAME:VALUE or alias.NAME:\"a value\")")
        }
        let name = String(rest[..<colon])
        guard (1...32).contains(name.utf8.count), name.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }) else {
            throw .invalidValue(at: token.position, "an alias name is 1-32 characters of a-z 0-9 _, got '\(name)'")
        }
        var value = String(rest[rest.index(after: colon)...])
        if value.isEmpty {
            let next = try take()
            guard case .string(let text) = next.kind else {
                throw .syntax(at: next.position, "expected a value right after 'alias.\(name):' (write alias.\(name):VALUE or alias.\(name):\"a value\"), found \(next.found)")
            }
            guard !text.isEmpty else { throw .invalidValue(at: next.position, "an alias value cannot be empty") }
            value = text
        }
        return .alias(name: name, value: value)
    }

    private mutating func parseText(_ field: SegmentTextField, token: SegmentToken) throws(SegmentError) -> SegmentTerm {
        let condition: SegmentCondition<String> = try parseCondition(field: field.rawValue, ordered: false) { value, _ throws(SegmentError) in
            guard !value.text.isEmpty else { throw .invalidValue(at: value.position, "\(field.rawValue) cannot be empty") }
            switch field {
            case .locale:
                // The store keeps `de_DE`; people also write `de-DE`.
                return value.text.replacingOccurrences(of: "-", with: "_")
            case .timezone:
                return value.text
            case .environment:
                let lower = value.text.lowercased()
                guard lower == "sandbox" || lower == "production" else {
                    throw .invalidValue(
                        at: value.position, "environment must be 'sandbox' or 'production', found \(value.shown)")
                }
                return lower
            }
        }
        return .text(field, condition)
    }

    private mutating func parseVersion(_ field: SegmentVersionField, token: SegmentToken) throws(SegmentError) -> SegmentTerm {
        let condition: SegmentCondition<SegmentVersion> = try parseCondition(field: field.rawValue, ordered: true) { value, _ throws(SegmentError) in
            guard let version = SegmentVersion(value.text) else {
                throw .invalidValue(
                    at: value.position,
                    "expected a version number like 2.3 or 17.4.1 (up to \(VersionKey.maxComponents) numbers of at most \(VersionKey.componentDigits) digits) after \(value.after), found \(value.shown)")
            }
            return version
        }
        return .version(field, condition)
    }

    private mutating func parseAttribute(key: String, token: SegmentToken) throws(SegmentError) -> SegmentTerm {
        guard !key.isEmpty else {
            throw .syntax(at: token.position + 5, "expected an attribute name right after 'attr.' (write attr.NAME)")
        }
        for (offset, scalar) in key.unicodeScalars.enumerated() {
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9", "_", ".", "-": continue
            default:
                throw .invalidValue(
                    at: token.position + 5 + offset,
                    "attribute names may contain only letters, digits, '_', '.' and '-', found \(SegmentLexer.name(of: scalar))")
            }
        }
        let condition: SegmentCondition<SegmentAttributeValue> = try parseCondition(
            field: "attr.\(key)", ordered: true
        ) { value, comparison throws(SegmentError) in
            let literal = try Self.attributeValue(value)
            if case .bool = literal, let comparison, comparison.isOrdering {
                throw .invalidValue(
                    at: value.position, "'\(comparison.rawValue)' cannot compare true/false; use '=' or '!='")
            }
            return literal
        }
        return .attribute(key: key, condition)
    }

    private mutating func parseLastSeen(token: SegmentToken) throws(SegmentError) -> SegmentTerm {
        let keyword = try take()
        guard keyword.isKeyword("within") else {
            var message = "expected 'within' after 'last_seen', found \(keyword.found)"
            if case .comparison = keyword.kind {
                message += "; write 'last_seen within 30d' for devices seen in the last 30 days, or 'not last_seen within 30d' for the others"
            }
            throw .syntax(at: keyword.position, message)
        }
        let value = try take()
        let expectation = "expected a duration like 30d after 'within' (a whole number followed by s, m, h, d or w)"
        guard case .word(let word) = value.kind else {
            throw .syntax(at: value.position, "\(expectation), found \(value.found)")
        }
        let digits = word.dropLast()
        guard let unitLetter = word.last, let unit = SegmentDuration.Unit(rawValue: String(unitLetter)),
            !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber })
        else {
            throw .invalidValue(at: value.position, "\(expectation), found \(value.found)")
        }
        let limitDays = SegmentDuration.maxMilliseconds / SegmentDuration.Unit.days.milliseconds
        guard let amount = digits.count <= 12 ? Int64(digits) : nil, amount > 0,
            let duration = SegmentDuration(amount: amount, unit: unit)
        else {
            throw .invalidValue(
                at: value.position, "a duration must be at least 1 and at most \(limitDays) days, found \(value.found)")
        }
        return .seenWithin(duration)
    }

    // MARK: Conditions and values

    /// A value as read, with what is needed to report a problem with it.
    struct Value {
        let text: String
        let quoted: Bool
        let position: Int
        /// The token before it, for "after ..." in messages.
        let after: String

        var shown: String { quoted ? SegmentLiteral.quote(text) : "'\(text)'" }
    }

    /// `op VALUE` or `in (VALUE, ...)` after a field name; `convert` checks and
    /// converts each value, given the operator (nil inside an `in` list).
    private mutating func parseCondition<V: Sendable & Equatable>(
        field: String, ordered: Bool, _ convert: (Value, SegmentComparison?) throws(SegmentError) -> V
    ) throws(SegmentError) -> SegmentCondition<V> {
        let token = try take()
        let operators = ordered ? "'=', '!=', '<', '<=', '>', '>=' or 'in'" : "'=', '!=' or 'in'"
        if case .comparison(let op) = token.kind {
            if op.isOrdering && !ordered {
                throw .syntax(
                    at: token.position, "'\(op.rawValue)' cannot be used with \(field), which has no order; use \(operators)")
            }
            return .compare(op, try convert(try parseValue(after: token), op))
        }
        if token.isKeyword("in") {
            let open = try take()
            guard open.kind == .leftParen else {
                throw .syntax(at: open.position, "expected '(' and a list of values after 'in', found \(open.found)")
            }
            var values = [try convert(try parseValue(after: open), nil)]
            while true {
                let separator = try take()
                if separator.kind == .rightParen { break }
                guard separator.kind == .comma else {
                    throw .syntax(
                        at: separator.position,
                        "expected ',' or ')' in the list opened at \(open.position), found \(separator.found)")
                }
                let value = try parseValue(after: separator)
                guard values.count < limits.maxListValues else {
                    throw .tooLarge(
                        at: value.position, "too many values in one list: at most \(limits.maxListValues) are allowed")
                }
                values.append(try convert(value, nil))
            }
            return .oneOf(values)
        }
        var message = "expected \(operators) after '\(field)', found \(token.found)"
        if token.isKeyword("not") { message += "; to negate, put 'not' before the field: not \(field) ..." }
        throw .syntax(at: token.position, message)
    }

    private mutating func parseValue(after previous: SegmentToken) throws(SegmentError) -> Value {
        let token = try take()
        let after = previous.found
        switch token.kind {
        case .string(let text):
            return Value(text: text, quoted: true, position: token.position, after: after)
        case .word(let word) where !SegmentLexer.keywords.contains(word.lowercased()):
            return Value(text: word, quoted: false, position: token.position, after: after)
        case .word(let word):
            throw .syntax(
                at: token.position,
                "expected a value after \(after), found \(token.found); write \(SegmentLiteral.quote(word)) to use it as a value")
        case .leftParen where previous.kind != .leftParen:
            throw .syntax(at: token.position, "expected a value after \(after), found '('; write 'in (...)' for a list")
        default:
            throw .syntax(at: token.position, "expected a value after \(after), found \(token.found)")
        }
    }

    /// Quoted → text; bare `true`/`false` → bool; bare number → integer or real;
    /// any other bare word → text.
    private static func attributeValue(_ value: Value) throws(SegmentError) -> SegmentAttributeValue {
        if value.quoted { return .text(value.text) }
        switch value.text.lowercased() {
        case "true": return .bool(true)
        case "false": return .bool(false)
        default: break
        }
        guard isNumber(value.text) else { return .text(value.text) }
        if let integer = Int64(value.text) { return .integer(integer) }
        guard let real = Double(value.text), real.isFinite else {
            throw .invalidValue(at: value.position, "number \(value.shown) is too large")
        }
        return .real(real)
    }

    /// `[+-]digits[.digits][(e|E)[+-]digits]`, the form JSON numbers take.
    private static func isNumber(_ text: String) -> Bool {
        var bytes = Substring(text).utf8[...]
        func digits() -> Bool {
            let count = bytes.prefix(while: { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }).count
            bytes = bytes.dropFirst(count)
            return count > 0
        }
        if let first = bytes.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        guard digits() else { return false }
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            guard digits() else { return false }
        }
        if let marker = bytes.first, marker == UInt8(ascii: "e") || marker == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
            guard digits() else { return false }
        }
        return bytes.isEmpty
    }
}
