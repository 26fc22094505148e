import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

@Suite("JSONValue")
struct JSONValueTests {
    private func decode(_ text: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    private func encode(_ value: JSONValue) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    @Test(arguments: [
        ("1", JSONValue.int(1)), ("-7", .int(-7)), ("0", .int(0)), ("1.0", .int(1)), ("1e2", .int(100)),
        ("9223372036854775807", .int(.max)), ("1.5", .number(1.5)), ("-0.25", .number(-0.25)),
        ("9223372036854775808", .number(9_223_372_036_854_775_808)), ("1e300", .number(1e300)),
        ("true", .bool(true)), ("false", .bool(false)), ("null", .null), ("\"x\"", .string("x")),
        ("\"\\u0000\"", .string("\u{0}")), ("[]", .array([])), ("{}", .object([:])),
        ("[1,\"a\",null,{\"b\":[true]}]", .array([.int(1), .string("a"), .null, .object(["b": .array([.bool(true)])])])),
    ])
    func decodesEveryKind(_ text: String, _ expected: JSONValue) throws {
        #expect(try decode(text) == expected)
    }

    @Test(arguments: [
        (JSONValue.int(1), "1"), (.int(-3), "-3"), (.int(.max), "9223372036854775807"), (.number(0.5), "0.5"),
        (.bool(true), "true"), (.null, "null"), (.string("a/b"), "\"a\\/b\""),
        (.object(["badge": 1, "sound": "default"]), "{\"badge\":1,\"sound\":\"default\"}"),
        (.array([1, 2.5, "x"]), "[1,2.5,\"x\"]"),
        (.number(.nan), "null"), (.number(.infinity), "null"),
    ])
    func encodesIntegersAsIntegers(_ value: JSONValue, _ expected: String) throws {
        #expect(try encode(value) == expected)
    }

    @Test func roundTripKeepsKinds() throws {
        let value: JSONValue = ["badge": 1, "score": 0.5, "flags": [true, nil, "x"], "nested": ["big": .int(.max), "neg": -1]]
        #expect(try decode(encode(value)) == value)
    }

    @Test func tooLargeNumberIsAnErrorNotInfinity() {
        #expect(throws: DecodingError.self) { try decode("1e400") }
        #expect(throws: DecodingError.self) { try decode("[1, -1e400]") }
    }

    @Test func accessors() throws {
        let value: JSONValue = ["a": "s", "n": 2, "d": 0.5, "b": false, "l": [1], "o": ["k": nil]]
        #expect(value["a"]?.stringValue == "s")
        #expect(value["n"]?.intValue == 2)
        #expect(value["n"]?.doubleValue == 2)
        #expect(value["d"]?.doubleValue == 0.5)
        #expect(value["d"]?.intValue == nil)
        #expect(value["b"]?.boolValue == false)
        #expect(value["l"]?.arrayValue == [1])
        #expect(value["o"]?["k"]?.isNull == true)
        #expect(value["missing"] == nil)
        #expect(JSONValue.string("x")["a"] == nil)
    }
}
