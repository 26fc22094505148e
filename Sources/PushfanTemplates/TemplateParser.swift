/// Reads a `TextTemplate`. Grammar (spaces allowed between tokens inside the braces):
///
///     text        := (literal | '{{' placeholder '}}')*
///     placeholder := variable ('|' filter)*
///     variable    := 'device.' ('id' | 'locale' | 'timezone' | 'app_version' | 'os_version') | 'attr.' NAME
///     filter      := 'default' ':' STRING | 'truncate' ':' INTEGER | 'upcase' | 'downcase' | 'capitalize'
///
/// `NAME` is letters, digits, `_`, `.` and `-` (as in segments' `attr.NAME`); `STRING` is
/// in double quotes with `\"` and `\\` as escapes. `{{` always opens a placeholder; a lone
/// `{` or `}` is text.
extension TextTemplate {
    package static func parse(_ text: String) throws(TemplateError) -> TextTemplate {
        var reader = TemplateReader(Array(text))
        return TextTemplate(pieces: try reader.pieces())
    }
}

private struct TemplateReader {
    let characters: [Character]
    var index = 0

    init(_ characters: [Character]) { self.characters = characters }

    var position: Int { index + 1 }

    func fail(_ message: String, at index: Int? = nil) -> TemplateError {
        TemplateError(position: (index ?? self.index) + 1, message: message)
    }

    func peek(_ offset: Int = 0) -> Character? {
        index + offset < characters.count ? characters[index + offset] : nil
    }

    func opens(at position: Int) -> Bool {
        position + 1 < characters.count && characters[position] == "{" && characters[position + 1] == "{"
    }

    mutating func pieces() throws(TemplateError) -> [TextTemplate.Piece] {
        var pieces: [TextTemplate.Piece] = []
        var literal = ""
        while index < characters.count {
            if opens(at: index) {
                if !literal.isEmpty { pieces.append(.text(literal)) }
                literal = ""
                index += 2
                pieces.append(.placeholder(try placeholder()))
            } else {
                literal.append(characters[index])
                index += 1
            }
        }
        if !literal.isEmpty { pieces.append(.text(literal)) }
        return pieces
    }

    mutating func skipSpaces() {
        while let next = peek(), next == " " || next == "\t" { index += 1 }
    }

    /// After `{{`: a variable, its filters, and `}}`.
    mutating func placeholder() throws(TemplateError) -> TextTemplate.Placeholder {
        let start = index - 2
        skipSpaces()
        let variable = try self.variable()
        var filters: [TextTemplate.Filter] = []
        while true {
            skipSpaces()
            if peek() == "}" && peek(1) == "}" {
                index += 2
                return TextTemplate.Placeholder(variable: variable, filters: filters)
            }
            guard let next = peek() else { throw fail("the placeholder opened at \(start + 1) has no closing }}") }
            guard next == "|" else { throw fail("expected | and a filter, or }}; found \(Self.show(next))") }
            index += 1
            skipSpaces()
            filters.append(try filter())
        }
    }

    mutating func word() -> String {
        var word = ""
        while let next = peek(), next.isASCII, next.isLetter || next.isNumber || next == "_" || next == "." || next == "-" {
            word.append(next)
            index += 1
        }
        return word
    }

    static let variablesExpected = "expected " + TextTemplate.Variable.deviceFields.map { "device.\($0.0)" }.joined(separator: ", ") + " or attr.NAME"

    mutating func variable() throws(TemplateError) -> TextTemplate.Variable {
        let start = index
        let name = word()
        if name.isEmpty {
            guard let next = peek() else { throw fail("a placeholder needs a variable; \(Self.variablesExpected)") }
            throw fail("found \(Self.show(next)) where a variable should be; \(Self.variablesExpected)")
        }
        if name.hasPrefix("attr.") {
            let member = String(name.dropFirst("attr.".count))
            guard !member.isEmpty else { throw fail("attr. needs an attribute name, like attr.first_name", at: start) }
            return .attribute(member)
        }
        if name.hasPrefix("device."), let known = TextTemplate.Variable.deviceFields.first(where: { "device." + $0.0 == name }) {
            return known.1
        }
        throw fail("unknown variable '\(name)'; \(Self.variablesExpected)", at: start)
    }

    mutating func filter() throws(TemplateError) -> TextTemplate.Filter {
        let start = index
        let name = word()
        let expected = "expected " + TextTemplate.Filter.names.dropLast().joined(separator: ", ") + " or " + TextTemplate.Filter.names.last!
        guard TextTemplate.Filter.names.contains(name) else {
            if name.isEmpty {
                throw fail("a filter's name should follow |; \(expected)")
            }
            throw fail("unknown filter '\(name)'; \(expected)", at: start)
        }
        skipSpaces()
        let takesArgument = name == "default" || name == "truncate"
        guard peek() == ":" else {
            if takesArgument { throw fail("\(name) needs an argument: \(name == "default" ? "default: \"text\"" : "truncate: 20")") }
            return name == "upcase" ? .upcase : name == "downcase" ? .downcase : .capitalize
        }
        guard takesArgument else { throw fail("\(name) takes no argument") }
        index += 1
        skipSpaces()
        if name == "default" { return .fallback(try string()) }
        return .truncate(try length())
    }

    mutating func string() throws(TemplateError) -> String {
        guard peek() == "\"" else { throw fail("default's argument is a text in double quotes, like default: \"there\"") }
        let start = index
        index += 1
        var text = ""
        while let next = peek() {
            index += 1
            switch next {
            case "\"": return text
            case "\\":
                guard let escaped = peek(), escaped == "\"" || escaped == "\\" else {
                    throw fail("only \\\" and \\\\ are escapes in a placeholder's text", at: index - 1)
                }
                text.append(escaped)
                index += 1
            default: text.append(next)
            }
        }
        throw fail("the text opened at \(start + 1) has no closing \"")
    }

    mutating func length() throws(TemplateError) -> Int {
        let start = index
        var digits = ""
        while let next = peek(), next.isASCII, next.isNumber {
            digits.append(next)
            index += 1
        }
        guard let count = Int(digits), (1...TextTemplate.maxTruncate).contains(count) else {
            throw fail("truncate's argument is a number of characters from 1 to \(TextTemplate.maxTruncate)", at: start)
        }
        return count
    }

    static func show(_ character: Character) -> String {
        character == "\"" ? "'\"'" : "\"\(character)\""
    }
}
