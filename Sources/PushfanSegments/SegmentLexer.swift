/// One token of a segment expression.
struct SegmentToken: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// A run of bare-word characters: a field, keyword, bare value or number.
        case word(String)
        /// A double-quoted string, escapes resolved.
        case string(String)
        case leftParen
        case rightParen
        case comma
        case comparison(SegmentComparison)
        case end
    }

    let kind: Kind
    /// 1-based character position of the token's first character.
    let position: Int

    /// Whether this is the keyword `keyword` (given in lower case), in any case.
    func isKeyword(_ keyword: String) -> Bool {
        if case .word(let word) = kind { return word.count == keyword.count && word.lowercased() == keyword }
        return false
    }

    /// How the token is named in "found ..." messages.
    var found: String {
        switch kind {
        case .word(let word):
            let lower = word.lowercased()
            let shown = "'\(Self.shorten(word))'"
            return SegmentLexer.keywords.contains(lower) ? "keyword \(shown)" : shown
        case .string(let text): return SegmentLiteral.quote(Self.shorten(text))
        case .leftParen: return "'('"
        case .rightParen: return "')'"
        case .comma: return "','"
        case .comparison(let op): return "'\(op.rawValue)'"
        case .end: return "end of input"
        }
    }

    private static func shorten(_ text: String) -> String {
        text.unicodeScalars.count <= 40 ? text : String(String.UnicodeScalarView(text.unicodeScalars.prefix(37))) + "..."
    }
}

/// Splits an expression into tokens, one at a time, so that the first problem in
/// reading order is the one reported.
///
/// Bare words are runs of `A-Z a-z 0-9 _ . : + / -`; strings are in double quotes
/// with `\"` and `\\` as the only escapes. Space, tab, CR and LF separate tokens.
/// Everything else is refused with an error that names the character: controls
/// (NUL included) anywhere, even inside strings; single quotes, backquotes and
/// typographic quotes (which word processors substitute for `"`); and punctuation
/// the language does not use, such as `;`.
struct SegmentLexer {
    /// Words with a meaning of their own; never taken as bare values.
    static let keywords: Set<String> = ["and", "or", "not", "in", "within"]

    private let scalars: [Unicode.Scalar]
    private var index = 0

    init(_ text: String) {
        scalars = Array(text.unicodeScalars)
    }

    static func isBareWordScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "A"..."Z", "a"..."z", "0"..."9", "_", ".", ":", "+", "/", "-": return true
        default: return false
        }
    }

    /// Quotation marks a word processor or phone keyboard puts in place of `"`
    /// or `'`.
    private static let typographicQuotes: Set<Unicode.Scalar> = [
        "\u{201C}", "\u{201D}", "\u{201E}", "\u{201F}", "\u{2018}", "\u{2019}", "\u{201A}", "\u{201B}",
        "\u{00AB}", "\u{00BB}", "\u{2039}", "\u{203A}", "\u{2032}", "\u{2033}", "\u{2035}", "\u{2036}",
        "\u{301D}", "\u{301E}", "\u{FF02}", "\u{FF07}",
    ]

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// `'x'` for a visible character, with its code point when it is not ASCII.
    static func name(of scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        if isControl(scalar) { return "control character \(code)" }
        if scalar.isASCII { return "'\(Character(scalar))'" }
        if scalar.properties.generalCategory == .spaceSeparator || scalar.properties.isWhitespace
            || scalar.properties.generalCategory == .format
        {
            return "invisible character \(code)"
        }
        return "'\(Character(scalar))' (\(code))"
    }

    mutating func next() throws(SegmentError) -> SegmentToken {
        while index < scalars.count, [" ", "\t", "\n", "\r"].contains(scalars[index]) { index += 1 }
        guard index < scalars.count else { return SegmentToken(kind: .end, position: scalars.count + 1) }
        let start = index
        let position = start + 1
        let scalar = scalars[index]
        index += 1
        func token(_ kind: SegmentToken.Kind) -> SegmentToken { SegmentToken(kind: kind, position: position) }

        switch scalar {
        case "(": return token(.leftParen)
        case ")": return token(.rightParen)
        case ",": return token(.comma)
        case "=":
            if peek == "=" { throw .syntax(at: position, "'==' is not an operator; write '=' for equality") }
            return token(.comparison(.equal))
        case "!":
            guard peek == "=" else {
                throw .syntax(at: position, "'!' must be followed by '=' ('!='); write 'not' to negate a condition")
            }
            index += 1
            return token(.comparison(.notEqual))
        case "<":
            if peek == ">" { throw .syntax(at: position, "'<>' is not an operator; write '!=' for 'not equal'") }
            if peek == "=" {
                index += 1
                return token(.comparison(.lessOrEqual))
            }
            return token(.comparison(.less))
        case ">":
            if peek == "=" {
                index += 1
                return token(.comparison(.greaterOrEqual))
            }
            return token(.comparison(.greater))
        case "\"":
            return token(.string(try readString(openedAt: position)))
        case "'":
            throw .invalidCharacter(at: position, "single quotes are not supported; write text in double quotes (\"...\")")
        case "`":
            throw .invalidCharacter(at: position, "backquotes are not supported; write text in double quotes (\"...\")")
        case "&":
            throw .invalidCharacter(at: position, "unexpected character '&'; write 'and' to combine conditions")
        case "|":
            throw .invalidCharacter(at: position, "unexpected character '|'; write 'or' to combine conditions")
        default:
            break
        }
        if Self.isBareWordScalar(scalar) {
            while index < scalars.count, Self.isBareWordScalar(scalars[index]) { index += 1 }
            var word = ""
            word.unicodeScalars.append(contentsOf: scalars[start..<index])
            return token(.word(word))
        }
        if Self.typographicQuotes.contains(scalar) {
            throw .invalidCharacter(
                at: position,
                "typographic quote \(Self.name(of: scalar)) is not supported; write text in plain double quotes (\"...\")")
        }
        if Self.isControl(scalar) {
            throw .invalidCharacter(at: position, "\(Self.name(of: scalar)) is not allowed")
        }
        let name = Self.name(of: scalar)
        if scalar.isASCII {
            throw .invalidCharacter(at: position, "unexpected character \(name)")
        }
        let unexpected = name.hasPrefix("'") ? "unexpected character \(name)" : "unexpected \(name)"
        throw .invalidCharacter(at: position, "\(unexpected); put values with such characters in double quotes")
    }

    private var peek: Unicode.Scalar? { index < scalars.count ? scalars[index] : nil }

    /// Reads the rest of a string whose opening quote is at `opening`.
    private mutating func readString(openedAt opening: Int) throws(SegmentError) -> String {
        var text = ""
        while index < scalars.count {
            let scalar = scalars[index]
            let position = index + 1
            index += 1
            switch scalar {
            case "\"":
                return text
            case "\\":
                guard let escaped = peek else { break }
                if Self.isControl(escaped) {
                    throw .invalidCharacter(at: position + 1, "\(Self.name(of: escaped)) is not allowed, even in a string")
                }
                guard escaped == "\"" || escaped == "\\" else {
                    throw .syntax(
                        at: position,
                        "unknown escape '\\\(Character(escaped))'; only \\\" and \\\\ may follow a backslash in a string")
                }
                index += 1
                text.unicodeScalars.append(escaped)
            default:
                if Self.isControl(scalar) {
                    throw .invalidCharacter(at: position, "\(Self.name(of: scalar)) is not allowed, even in a string")
                }
                text.unicodeScalars.append(scalar)
            }
        }
        throw .syntax(at: opening, "unterminated string: the '\"' here has no closing '\"'")
    }
}
