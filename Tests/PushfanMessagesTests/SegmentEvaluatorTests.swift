import SegmentTestSupport
import Testing

@testable import PushfanMessages
@testable import PushfanSupport
@testable import PushfanSegments

/// The reference meaning of the language, on hand-made devices. The SQLite
/// suite then holds the compiled SQL to the same answers.
@Suite("Segment evaluator")
struct SegmentEvaluatorTests {
    static let now: Int64 = 1_700_000_000_000

    private func matches(_ expression: String, _ device: SegmentDevice) throws -> Bool {
        SegmentEvaluator.matches(try SegmentParser.parse(expression), device: device, now: Self.now)
    }

    @Test(arguments: [
        ("locale = de_DE", false), ("locale != de_DE", true), ("not locale = de_DE", true), ("locale in (de_DE)", false),
        ("not locale in (de_DE)", true), ("timezone = UTC", false), ("timezone != UTC", true),
        ("app_version >= 1", false), ("app_version < 1", false), ("not app_version < 1", true), ("app_version != 1", true),
        ("os_version = 1", false), ("attr.plan = free", false), ("attr.plan != free", true), ("attr.n > 0", false),
        ("attr.n <= 0", false), ("not attr.n > 0", true), ("tag:x", false), ("not tag:x", true),
    ])
    func missingFieldsMatchOnlyNegations(_ expression: String, _ expected: Bool) throws {
        #expect(try matches(expression, SegmentDevice()) == expected)
    }

    @Test func notIsTheExactComplement() throws {
        for text in SegmentFixtures.expressions {
            let expression = try SegmentParser.parse(text)
            for row in SegmentFixtures.rows.prefix(60) {
                let direct = SegmentEvaluator.matches(expression, device: row.device, now: Self.now)
                #expect(SegmentEvaluator.matches(.not(expression), device: row.device, now: Self.now) == !direct)
            }
        }
    }

    @Test(arguments: [
        // Each literal compares only with JSON values of its own kind.
        ("attr.v = \"5\"", JSONValue.string("5"), true), ("attr.v = \"5\"", .int(5), false),
        ("attr.v = 5", .int(5), true), ("attr.v = 5", .string("5"), false), ("attr.v = 5", .number(5), true),
        ("attr.v = 5.0", .int(5), true), ("attr.v > 4.5", .int(5), true), ("attr.v < 5.5", .number(5.25), true),
        ("attr.v = true", .bool(true), true), ("attr.v = true", .string("true"), false), ("attr.v = true", .int(1), false),
        ("attr.v = \"true\"", .bool(true), false), ("attr.v != true", .bool(false), true), ("attr.v != true", .null, true),
        ("attr.v = 0", .null, false), ("attr.v = 0", .bool(false), false), ("attr.v = x", .array(["x"]), false),
        ("attr.v = x", .object(["x": 1]), false), ("attr.v in (1, \"a\", true)", .string("a"), true),
        ("attr.v in (1, \"a\", true)", .bool(true), true), ("attr.v in (1, \"a\", true)", .string("1"), false),
        ("attr.v in (1, \"a\", true)", .number(1), true),
        // Text order is UTF-8 byte order: upper case before lower case, and no locale rules.
        ("attr.v < b", .string("B"), true), ("attr.v < b", .string("a"), true), ("attr.v < b", .string("\u{E4}"), false),
        ("attr.v >= \"2024-01-01\"", .string("2024-06-30"), true),
        // Integers and fractions compare exactly, beyond Double's 2^53.
        ("attr.v > 9007199254740992", .int(9_007_199_254_740_993), true),
        ("attr.v > 9007199254740992.0", .int(9_007_199_254_740_993), true),
        ("attr.v = 9007199254740992.0", .int(9_007_199_254_740_993), false),
        ("attr.v < 9223372036854775807", .number(9.3e18), false),
        ("attr.v > 1e300", .int(.max), false), ("attr.v < -1e300", .int(.min), false),
        // A non-finite number cannot be stored (JSON has none), so it is treated as missing.
        ("attr.v > 0", .number(.infinity), false), ("attr.v != 0", .number(.nan), true),
    ])
    func attributesCompareByKind(_ expression: String, _ value: JSONValue, _ expected: Bool) throws {
        #expect(try matches(expression, SegmentDevice(attributes: ["v": value])) == expected)
    }

    @Test func textComparesBytesNotCanonicalEquivalence() throws {
        let composed = "\u{E9}"
        let decomposed = "e\u{301}"
        #expect(composed == decomposed, "Swift treats them as equal")
        let device = SegmentDevice(tags: [decomposed], locale: decomposed, attributes: ["v": .string(decomposed)])
        #expect(try !matches("tag:\"\(composed)\"", device))
        #expect(try matches("tag:\"\(decomposed)\"", device))
        #expect(try !matches("locale = \"\(composed)\"", device))
        #expect(try matches("attr.v != \"\(composed)\"", device))
    }

    @Test(arguments: [
        ("2.10", "app_version > 2.9", true), ("2.3.0", "app_version = 2.3", true), ("2.3", "app_version = 2.3.0.0", true),
        ("2.3", "app_version in (1, 2.3.0)", true), ("2.3-beta", "app_version = 2.3", false),
        ("2.3-beta", "app_version != 2.3", true), ("2.3-beta", "app_version < 99", false),
        ("17.4.1", "os_version >= 17.4", true),
    ])
    func versionsCompareNumerically(_ stored: String, _ expression: String, _ expected: Bool) throws {
        #expect(try matches(expression.replacingOccurrences(of: "os_version", with: "app_version"), SegmentDevice(appVersion: stored)) == expected)
        #expect(try matches(expression.replacingOccurrences(of: "app_version", with: "os_version"), SegmentDevice(osVersion: stored)) == expected)
    }

    @Test func lastSeenWindowIncludesItsStart() throws {
        let window: Int64 = 30 * 86_400_000
        #expect(try matches("last_seen within 30d", SegmentDevice(lastSeenAt: Self.now - window)))
        #expect(try !matches("last_seen within 30d", SegmentDevice(lastSeenAt: Self.now - window - 1)))
        #expect(try matches("last_seen within 30d", SegmentDevice(lastSeenAt: Self.now + 5_000)))
        #expect(try matches("last_seen within 4w", SegmentDevice(lastSeenAt: Self.now - 28 * 86_400_000)))
        #expect(SegmentEvaluator.matches(try SegmentParser.parse("last_seen within 1s"), device: SegmentDevice(lastSeenAt: .min), now: .min + 5))
    }

    @Test func environmentAndTags() throws {
        let device = SegmentDevice(tags: ["sports", "Quoted Name"], environment: "sandbox")
        #expect(try matches("environment = sandbox and tag:sports", device))
        #expect(try !matches("environment = production or tag:Sports", device))
        #expect(try matches("tag:\"Quoted Name\"", device))
        #expect(try matches("not (tag:news or environment in (production))", device))
    }

    @Test func emptyChainsAreTheIdentities() {
        #expect(SegmentEvaluator.matches(.and([]), device: SegmentDevice(), now: 0))
        #expect(!SegmentEvaluator.matches(.or([]), device: SegmentDevice(), now: 0))
    }
}
