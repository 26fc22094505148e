import Foundation
import PushfanTestSupport
import SegmentTestSupport
import Testing

@testable import PushfanMessages
@testable import PushfanSupport
@testable import PushfanSegments

/// An expression that must be refused, with what the user sees.
struct SegmentRejectCase: Sendable, CustomTestStringConvertible {
    let input: String
    let position: Int
    let code: String
    /// Text the message must contain.
    let mentions: String
    var limits = SegmentLimits.standard
    let label: String

    init(_ input: String, at position: Int, _ code: String, _ mentions: String, label: String? = nil, limits: SegmentLimits = .standard) {
        self.input = input
        self.position = position
        self.code = code
        self.mentions = mentions
        self.limits = limits
        self.label = label ?? input
    }

    var testDescription: String { label.debugDescription }
}

@Suite("Segment parser")
struct SegmentParserTests {
    static let valid: [(String, SegmentExpression)] = [
        ("tag:sports", Seg.tag("sports")),
        ("tag:\"quoted name\"", Seg.tag("quoted name")),
        ("tag: \"spaced\"", Seg.tag("spaced")),
        ("TAG:Sports", Seg.tag("Sports")),
        ("tag:and", Seg.tag("and")),
        ("user:42", .term(.user("42"))),
        ("USER:\"ada@example.com\"", .term(.user("ada@example.com"))),
        ("alias.crm_id:C-1", .term(.alias(name: "crm_id", value: "C-1"))),
        ("ALIAS.email:\"ada@example.com\"", .term(.alias(name: "email", value: "ada@example.com"))),
        ("tag:\"say \\\"hi\\\" \\\\ bye\"", Seg.tag("say \"hi\" \\ bye")),
        ("tag:\"\u{FC}n\u{EF}c\u{F6}d\u{E9} \u{1F3C8}\"", Seg.tag("\u{FC}n\u{EF}c\u{F6}d\u{E9} \u{1F3C8}")),
        ("locale = de_DE", Seg.text(.locale, .equal, "de_DE")),
        ("locale=de-DE", Seg.text(.locale, .equal, "de_DE")),
        ("LOCALE In (de_DE, de-AT, \"fr_FR\")", Seg.text(.locale, in: ["de_DE", "de_AT", "fr_FR"])),
        ("timezone != Europe/Berlin", Seg.text(.timezone, .notEqual, "Europe/Berlin")),
        ("timezone = Etc/GMT+5", Seg.text(.timezone, .equal, "Etc/GMT+5")),
        ("environment = SANDBOX", Seg.text(.environment, .equal, "sandbox")),
        ("environment in (production, \"sandbox\")", Seg.text(.environment, in: ["production", "sandbox"])),
        ("app_version >= 2.3", Seg.version(.appVersion, .greaterOrEqual, "2.3")),
        ("os_version < \"17.4.1\"", Seg.version(.osVersion, .less, "17.4.1")),
        ("app_version in (2.3, 2.10)", Seg.version(.appVersion, in: ["2.3", "2.10"])),
        ("app_version != 1.0.0.7", Seg.version(.appVersion, .notEqual, "1.0.0.7")),
        ("attr.plan = \"free\"", Seg.attr("plan", .equal, .text("free"))),
        ("attr.plan = free", Seg.attr("plan", .equal, .text("free"))),
        ("attr.Plan <= \"m\"", Seg.attr("Plan", .lessOrEqual, .text("m"))),
        ("attr.age >= 18", Seg.attr("age", .greaterOrEqual, .integer(18))),
        ("attr.score < -2.5", Seg.attr("score", .less, .real(-2.5))),
        ("attr.score > 1e3", Seg.attr("score", .greater, .real(1000))),
        ("attr.score > +7", Seg.attr("score", .greater, .integer(7))),
        ("attr.huge = 99999999999999999999", Seg.attr("huge", .equal, .real(1e20))),
        ("attr.beta = true", Seg.attr("beta", .equal, .bool(true))),
        ("attr.beta != FALSE", Seg.attr("beta", .notEqual, .bool(false))),
        ("attr.code = \"42\"", Seg.attr("code", .equal, .text("42"))),
        ("attr.flag = \"true\"", Seg.attr("flag", .equal, .text("true"))),
        ("attr.a.b-c_d = x", Seg.attr("a.b-c_d", .equal, .text("x"))),
        ("attr.build > 2.3.0", Seg.attr("build", .greater, .text("2.3.0"))),
        ("attr.quote = \"\u{201C}smart\u{201D}\"", Seg.attr("quote", .equal, .text("\u{201C}smart\u{201D}"))),
        ("attr.n in (1, \"1\", true, 2.5)", Seg.attr("n", in: [.integer(1), .text("1"), .bool(true), .real(2.5)])),
        ("last_seen within 30d", Seg.seen(30, .days)),
        ("last_seen WITHIN 12h", Seg.seen(12, .hours)),
        ("last_seen within 90s", Seg.seen(90, .seconds)),
        ("last_seen within 15m", Seg.seen(15, .minutes)),
        ("last_seen within 2w", Seg.seen(2, .weeks)),
        ("not tag:a", .not(Seg.tag("a"))),
        ("not not tag:a", .not(.not(Seg.tag("a")))),
        ("tag:a and tag:b or tag:c", .or([.and([Seg.tag("a"), Seg.tag("b")]), Seg.tag("c")])),
        ("tag:a or tag:b and tag:c", .or([Seg.tag("a"), .and([Seg.tag("b"), Seg.tag("c")])])),
        ("tag:a AND tag:b OR NOT tag:c", .or([.and([Seg.tag("a"), Seg.tag("b")]), .not(Seg.tag("c"))])),
        ("tag:a and tag:b and tag:c", .and([Seg.tag("a"), Seg.tag("b"), Seg.tag("c")])),
        ("tag:a and (tag:b and tag:c)", .and([Seg.tag("a"), .and([Seg.tag("b"), Seg.tag("c")])])),
        ("(tag:a or tag:b) and not (tag:c)", .and([.or([Seg.tag("a"), Seg.tag("b")]), .not(Seg.tag("c"))])),
        ("not (tag:a or tag:b)", .not(.or([Seg.tag("a"), Seg.tag("b")]))),
        ("((tag:a))", Seg.tag("a")),
        ("\t tag:a\n\tand\r\n tag:b ", .and([Seg.tag("a"), Seg.tag("b")])),
        (
            "tag:sports and locale in (de_DE, de_AT) and app_version >= 2.3 and not attr.plan = \"free\" and last_seen within 30d",
            .and([
                Seg.tag("sports"), Seg.text(.locale, in: ["de_DE", "de_AT"]),
                Seg.version(.appVersion, .greaterOrEqual, "2.3"), .not(Seg.attr("plan", .equal, .text("free"))),
                Seg.seen(30, .days),
            ])
        ),
    ]

    @Test(arguments: valid)
    func parses(_ input: String, _ expected: SegmentExpression) throws {
        #expect(try SegmentParser.parse(input) == expected)
    }

    /// The canonical text parses back to the same expression.
    @Test(arguments: valid.map(\.1) + SegmentFixtures.expressions.map { try! SegmentParser.parse($0) })
    func canonicalTextRoundTrips(_ expression: SegmentExpression) throws {
        #expect(try SegmentParser.parse(expression.description) == expression, "\(expression)")
    }

    @Test(arguments: [
        ("TAG:a AND  (locale=de-DE OR tag:\"x y\")", "tag:a and (locale = de_DE or tag:\"x y\")"),
        ("not (tag:a and tag:b) or not not tag:c", "not (tag:a and tag:b) or not not tag:c"),
        ("(tag:a or tag:b) or tag:c", "(tag:a or tag:b) or tag:c"),
        ("attr.n in (1, \"1\", TRUE, 2.50, 1e3)", "attr.n in (1, \"1\", true, 2.5, 1000.0)"),
        ("locale = \"and\"", "locale = \"and\""),
        ("last_seen within 30d", "last_seen within 30d"),
    ])
    func canonicalText(_ input: String, _ expected: String) throws {
        #expect(try SegmentParser.parse(input).description == expected)
    }

    static let limits = SegmentLimits.standard
    static let rejects: [SegmentRejectCase] = [
        // Injection attempts are refused before anything is built.
        SegmentRejectCase("' OR 1=1 --", at: 1, "invalid_character", "single quotes are not supported"),
        SegmentRejectCase("tag:x' OR 1=1 --", at: 6, "invalid_character", "single quotes are not supported"),
        SegmentRejectCase("; DROP TABLE devices", at: 1, "invalid_character", "unexpected character ';'"),
        SegmentRejectCase("tag:x; DROP TABLE devices", at: 6, "invalid_character", "unexpected character ';'"),
        SegmentRejectCase("environment = production; DROP TABLE devices", at: 25, "invalid_character", "unexpected character ';'"),
        SegmentRejectCase("attr.plan = \"free\" OR 1=1", at: 23, "unknown_field", "unknown field '1'"),
        SegmentRejectCase("tag:a -- comment", at: 7, "syntax", "expected 'and', 'or' or end of input, found '--'"),
        SegmentRejectCase("tag:a /* x */", at: 7, "syntax", "found '/'"),
        SegmentRejectCase("tag:a && tag:b", at: 7, "invalid_character", "write 'and'"),
        SegmentRejectCase("tag:a || tag:b", at: 7, "invalid_character", "write 'or'"),
        // Look-alike quotes, controls, odd characters.
        SegmentRejectCase("locale = \u{201C}de_DE\u{201D}", at: 10, "invalid_character", "typographic quote '\u{201C}' (U+201C) is not supported"),
        SegmentRejectCase("tag:\u{2018}sports\u{2019}", at: 5, "invalid_character", "typographic quote '\u{2018}' (U+2018)"),
        SegmentRejectCase("attr.x = \u{FF02}y\u{FF02}", at: 10, "invalid_character", "plain double quotes"),
        SegmentRejectCase("tag:a\u{0}", at: 6, "invalid_character", "control character U+0000 is not allowed"),
        SegmentRejectCase("\u{0}", at: 1, "invalid_character", "control character U+0000"),
        SegmentRejectCase("tag:\"a\u{0}b\"", at: 7, "invalid_character", "control character U+0000 is not allowed, even in a string"),
        SegmentRejectCase("tag:\"a\nb\"", at: 7, "invalid_character", "control character U+000A"),
        SegmentRejectCase("tag:\"a\\\u{1}\"", at: 8, "invalid_character", "control character U+0001"),
        SegmentRejectCase("tag:a\u{1B}[2J", at: 6, "invalid_character", "control character U+001B"),
        SegmentRejectCase("tag:a \u{85}", at: 7, "invalid_character", "control character U+0085"),
        SegmentRejectCase("tag:a\u{A0}and tag:b", at: 6, "invalid_character", "invisible character U+00A0"),
        SegmentRejectCase("tag:a\u{200B}", at: 6, "invalid_character", "invisible character U+200B"),
        SegmentRejectCase("tag:sp\u{F6}rts", at: 7, "invalid_character", "unexpected character '\u{F6}' (U+00F6); put values"),
        SegmentRejectCase("attr.name = \"\u{E9}\" and \u{201C}", at: 21, "invalid_character", "typographic quote"),
        SegmentRejectCase("tag:`x`", at: 5, "invalid_character", "backquotes are not supported"),
        // Structure.
        SegmentRejectCase("", at: 1, "syntax", "expected a condition (tag:NAME, user:ID, alias.NAME:VALUE, attr.NAME, locale"),
        SegmentRejectCase("   ", at: 4, "syntax", "found end of input"),
        SegmentRejectCase("not", at: 4, "syntax", "expected a condition"),
        SegmentRejectCase("user = 42", at: 1, "syntax", "expected ':' right after 'user' (write user:ID or user:\"an id\")"),
        SegmentRejectCase("user:\"\"", at: 6, "invalid_value", "a user id cannot be empty"),
        SegmentRejectCase("alias = 1", at: 1, "syntax", "expected '.' and an alias name right after 'alias' (write alias.NAME:VALUE)"),
        SegmentRejectCase("alias.crm_id = C-1", at: 1, "syntax", "expected ':' and a value after the alias name"),
        SegmentRejectCase("alias.CRM:x", at: 1, "invalid_value", "an alias name is 1-32 characters of a-z 0-9 _, got 'CRM'"),
        SegmentRejectCase("alias.crm_id:\"\"", at: 14, "invalid_value", "an alias value cannot be empty"),
        SegmentRejectCase("alias.crm_id: 7", at: 15, "syntax", "expected a value right after 'alias.crm_id:'"),
        SegmentRejectCase("user: 42", at: 7, "syntax", "expected a user id right after 'user:' (write user:ID or user:\"an id\"), found"),
        SegmentRejectCase("tag:a and", at: 10, "syntax", "expected a condition (tag:NAME, user:ID, alias.NAME:VALUE, attr.NAME, locale, timezone, environment, app_version, os_version or last_seen) or '(', found end of input"),
        SegmentRejectCase("tag:a or not", at: 13, "syntax", "found end of input"),
        SegmentRejectCase("and tag:a", at: 1, "syntax", "found keyword 'and'"),
        SegmentRejectCase("tag:a tag:b", at: 7, "syntax", "expected 'and', 'or' or end of input, found 'tag:b'"),
        SegmentRejectCase("(tag:a", at: 7, "syntax", "expected 'and', 'or' or ')' to close the '(' at 1, found end of input"),
        SegmentRejectCase("(tag:a tag:b)", at: 8, "syntax", "to close the '(' at 1, found 'tag:b'"),
        SegmentRejectCase("tag:a)", at: 6, "syntax", "found ')' (there is no '(' for it to close)"),
        SegmentRejectCase("()", at: 2, "syntax", "expected a condition"),
        SegmentRejectCase("\"free\"", at: 1, "syntax", "expected a condition"),
        // Fields.
        SegmentRejectCase("foo = 1", at: 1, "unknown_field", "unknown field 'foo'; expected tag:NAME, user:ID, alias.NAME:VALUE, attr.NAME, locale"),
        SegmentRejectCase("devices.token = x", at: 1, "unknown_field", "unknown field 'devices.token'"),
        SegmentRejectCase("tag sports", at: 1, "syntax", "expected ':' right after 'tag'"),
        SegmentRejectCase("tag:", at: 5, "syntax", "expected a tag name right after 'tag:'"),
        SegmentRejectCase("tag: sports", at: 6, "syntax", "found 'sports'"),
        SegmentRejectCase("tag:\"\"", at: 5, "invalid_value", "a tag name cannot be empty"),
        SegmentRejectCase("attr = 5", at: 1, "syntax", "expected '.' and a name right after 'attr'"),
        SegmentRejectCase("attr. = 5", at: 6, "syntax", "expected an attribute name right after 'attr.'"),
        SegmentRejectCase("attr.pl:an = 5", at: 8, "invalid_value", "attribute names may contain only letters, digits, '_', '.' and '-', found ':'"),
        // Operators.
        SegmentRejectCase("locale", at: 7, "syntax", "expected '=', '!=' or 'in' after 'locale', found end of input"),
        SegmentRejectCase("locale < de_DE", at: 8, "syntax", "'<' cannot be used with locale, which has no order"),
        SegmentRejectCase("environment >= sandbox", at: 13, "syntax", "cannot be used with environment"),
        SegmentRejectCase("locale == de_DE", at: 8, "syntax", "'==' is not an operator; write '='"),
        SegmentRejectCase("locale <> de_DE", at: 8, "syntax", "write '!=' for 'not equal'"),
        SegmentRejectCase("locale ! de_DE", at: 8, "syntax", "'!' must be followed by '='"),
        SegmentRejectCase("locale not in (de_DE)", at: 8, "syntax", "put 'not' before the field"),
        SegmentRejectCase("app_version ~ 2", at: 13, "invalid_character", "unexpected character '~'"),
        SegmentRejectCase("app_version is 2", at: 13, "syntax", "expected '=', '!=', '<', '<=', '>', '>=' or 'in' after 'app_version', found 'is'"),
        // Values.
        SegmentRejectCase("locale =", at: 9, "syntax", "expected a value after '=', found end of input"),
        SegmentRejectCase("attr.plan = ", at: 13, "syntax", "expected a value after '=', found end of input"),
        SegmentRejectCase("locale = and", at: 10, "syntax", "found keyword 'and'; write \"and\" to use it as a value"),
        SegmentRejectCase("locale = (de_DE)", at: 10, "syntax", "write 'in (...)' for a list"),
        SegmentRejectCase("locale = \"\"", at: 10, "invalid_value", "locale cannot be empty"),
        SegmentRejectCase("environment = staging", at: 15, "invalid_value", "environment must be 'sandbox' or 'production', found 'staging'"),
        SegmentRejectCase("environment in (sandbox, dev)", at: 26, "invalid_value", "found 'dev'"),
        SegmentRejectCase("app_version < beta", at: 15, "invalid_value", "expected a version number like 2.3 or 17.4.1"),
        SegmentRejectCase("app_version >= \"2.3-beta\"", at: 16, "invalid_value", "found \"2.3-beta\""),
        SegmentRejectCase("os_version < 1.2.3.4.5", at: 14, "invalid_value", "up to 4 numbers"),
        SegmentRejectCase("os_version = 1234567", at: 14, "invalid_value", "of at most 6 digits"),
        SegmentRejectCase("app_version in (2.3, v3)", at: 22, "invalid_value", "after ',', found 'v3'"),
        SegmentRejectCase("attr.beta < true", at: 13, "invalid_value", "'<' cannot compare true/false"),
        SegmentRejectCase("attr.n = 1e999", at: 10, "invalid_value", "number '1e999' is too large"),
        SegmentRejectCase("locale in ()", at: 12, "syntax", "expected a value after '(', found ')'"),
        SegmentRejectCase("locale in (de_DE de_AT)", at: 18, "syntax", "expected ',' or ')' in the list opened at 11, found 'de_AT'"),
        SegmentRejectCase("locale in (de_DE,)", at: 18, "syntax", "expected a value after ',', found ')'"),
        SegmentRejectCase("locale in de_DE", at: 11, "syntax", "expected '(' and a list of values after 'in'"),
        SegmentRejectCase("tag:\"unterminated", at: 5, "syntax", "unterminated string"),
        SegmentRejectCase("tag:\"ends with backslash\\", at: 5, "syntax", "unterminated string"),
        SegmentRejectCase("tag:\"bad \\n escape\"", at: 10, "syntax", "unknown escape '\\n'"),
        // last_seen.
        SegmentRejectCase("last_seen < 30d", at: 11, "syntax", "expected 'within' after 'last_seen', found '<'; write 'last_seen within 30d'"),
        SegmentRejectCase("last_seen = 30d", at: 11, "syntax", "not last_seen within 30d"),
        SegmentRejectCase("last_seen within 30", at: 18, "invalid_value", "expected a duration like 30d after 'within'"),
        SegmentRejectCase("last_seen within 30y", at: 18, "invalid_value", "followed by s, m, h, d or w"),
        SegmentRejectCase("last_seen within 30D", at: 18, "invalid_value", "found '30D'"),
        SegmentRejectCase("last_seen within \"30d\"", at: 18, "syntax", "found \"30d\""),
        SegmentRejectCase("last_seen within", at: 17, "syntax", "found end of input"),
        SegmentRejectCase("last_seen within 0d", at: 18, "invalid_value", "at least 1 and at most 36525 days"),
        SegmentRejectCase("last_seen within 40000d", at: 18, "invalid_value", "at most 36525 days"),
        SegmentRejectCase("last_seen within 99999999999999999999w", at: 18, "invalid_value", "at most 36525 days"),
        // Limits.
        SegmentRejectCase(
            String(repeating: "tag:a or ", count: 555) + "tag:a", at: 4097, "too_large",
            "the expression is 5000 bytes long; at most 4096 bytes are allowed", label: "5,000-byte input"),
        SegmentRejectCase(
            "tag:\"" + String(repeating: "\u{E9}", count: 2100) + "\"", at: 2051, "too_large",
            "4206 bytes long", label: "positions count characters, not bytes"),
        SegmentRejectCase(
            String(repeating: "(", count: 10_000) + "tag:a" + String(repeating: ")", count: 10_000), at: 4097, "too_large",
            "20005 bytes long", label: "10,000-deep parentheses"),
        SegmentRejectCase(
            String(repeating: "(", count: 10_000) + "tag:a" + String(repeating: ")", count: 10_000), at: 17, "too_large",
            "nested too deeply: at most 16 levels of parentheses and 'not' are allowed",
            label: "10,000-deep parentheses without a length limit", limits: SegmentLimits(maxBytes: .max)),
        SegmentRejectCase(
            String(repeating: "not ", count: 10_000) + "tag:a", at: 65, "too_large", "nested too deeply",
            label: "10,000 nested 'not's without a length limit", limits: SegmentLimits(maxBytes: .max)),
        SegmentRejectCase(
            String(repeating: "(", count: 2_000) + "tag:a" + String(repeating: ")", count: 2_000), at: 17, "too_large",
            "nested too deeply", label: "2,000-deep parentheses"),
        SegmentRejectCase(
            String(repeating: "(tag:a and not ", count: 9) + "tag:b" + String(repeating: ")", count: 9), at: 121,
            "too_large", "nested too deeply", label: "17 levels of '(' and 'not'"),
        SegmentRejectCase(
            String(repeating: "tag:a or ", count: 200) + "tag:a", at: 1801, "too_large",
            "too many conditions: at most 200 are allowed", label: "201 terms"),
        SegmentRejectCase(
            "locale in (" + String(repeating: "a,", count: 500) + "a)", at: 1012, "too_large",
            "too many values in one list: at most 500 are allowed", label: "501 list values"),
    ]

    @Test(arguments: rejects)
    func refuses(_ reject: SegmentRejectCase) throws {
        let error = try #require(throws: SegmentError.self) { try SegmentParser.parse(reject.input, limits: reject.limits) }
        #expect(error.position == reject.position, "\(error)")
        #expect(error.code == reject.code, "\(error)")
        #expect(error.message.contains(reject.mentions), "\(error)")
        #expect(error.description == "at \(error.position): \(error.message)")
    }

    @Test func messageMatchesTheDocumentedForm() throws {
        let error = try #require(throws: SegmentError.self) { try SegmentParser.parse("tag:a and locale =") }
        #expect(error.description == "at 19: expected a value after '=', found end of input")
    }

    @Test func errorCodesAreDocumented() throws {
        let docs = try String(contentsOf: Self.docsURL, encoding: .utf8)
        for code in SegmentError.allCodes {
            #expect(docs.contains("`\(code)`"), "docs/segments.md does not mention \(code)")
        }
    }

    /// The deepest and largest expressions inside the limits are accepted.
    @Test func acceptsWhatTheLimitsAllow() throws {
        let deep = String(repeating: "(", count: 16) + "tag:a" + String(repeating: ")", count: 16)
        #expect(try SegmentParser.parse(deep) == Seg.tag("a"))
        let nots = String(repeating: "not ", count: 16) + "tag:a"
        _ = try SegmentParser.parse(nots)
        let terms = String(repeating: "tag:a or ", count: 199) + "tag:a"
        guard case .or(let operands) = try SegmentParser.parse(terms) else { Issue.record("not an or"); return }
        #expect(operands.count == 200)
        let list = "locale in (" + String(repeating: "a,", count: 499) + "a)"
        #expect(try SegmentParser.parse(list) == Seg.text(.locale, in: Array(repeating: "a", count: 500)))
        let exactly = "tag:\"" + String(repeating: "x", count: 4_096 - 6) + "\""
        #expect(exactly.utf8.count == 4_096)
        _ = try SegmentParser.parse(exactly)
    }

    /// Arbitrary bytes never crash the parser: every input is an expression or an error.
    @Test func survivesRandomInput() throws {
        var random = SegmentFixtureRandom(seed: 42)
        let alphabet: [Unicode.Scalar] = Array("tag:sport locale=de_DE()\",\\!<>=notandor in 0123.45 attr.x last_seen within 30d'; \u{0}\u{201C}\t".unicodeScalars)
        for _ in 0..<3_000 {
            var text = ""
            for _ in 0..<random.below(60) { text.unicodeScalars.append(random.pick(alphabet)) }
            let expression: SegmentExpression
            do {
                expression = try SegmentParser.parse(text)
            } catch {
                #expect(error.position >= 1 && error.position <= text.unicodeScalars.count + 1, "\(text): \(error)")
                continue
            }
            #expect(try SegmentParser.parse(expression.description) == expression, "\(text)")
        }
    }

    static let docsURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/segments.md")
}
