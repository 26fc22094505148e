import Foundation
import PushfanSupport
import Testing

/// `JSONValue.parsedFast` against `JSONDecoder`, the reader it stands in for: whatever it
/// reads, it reads to the decoder's value; what it leaves, the decoder still reads or refuses.
@Suite struct JSONFastParserTests {
    private static func fast(_ text: String) -> JSONValue? {
        Array(text.utf8).withUnsafeBytes { JSONValue.parsedFast($0) }
    }

    private static func decoded(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// What clients send: read here, to the decoder's value.
    static let common = [
        #"{"events":[{"kind":"opened","device_id":"d-1","campaign":"spring","send_id":"00ff00ff00ff00ff","variant":"a","at":1765000000000}]}"#,
        #"{"kind":"converted","value":4.99,"currency":"EUR","at":1765000000000,"value2":5.0,"tiny":1e-5,"big":1e12,"neg":-0.25}"#,
        " {\n\t\"a\" : [ 1 , -2 , 0 , true , false , null , \"\" , { } , [ ] ] } \r\n",
        #"{"text":"quote \" slash \/ back \\ \b\f\n\r\t \u00e9 \u2713 \ud83d\ude00 ü ✓ 😀","n":123456789012345678}"#,
        #"[1.0,1e2,1E+2,-0,-0.0,0.5,1.5e-3,123.456]"#,
        #"{"aps":{"alert":{"title":"Sale","body":"20% off"},"badge":3,"sound":"default"},"data":{"x":[{"y":null}]}}"#,
    ]

    /// Not read here; the decoder reads or refuses each as before.
    static let left = [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "[01]", "[1.]", "[.5]", "[-]", "[1e]", "[+1]",
        "[1e400]", "[12345678901234567890]", "[1234567890123456789]", "[100000000000000000000.0]", "[NaN]", "[Infinity]",
        "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\x41\"", "\"\\u12\"", "\"tab\there\"", "\"a\u{0}b\"",
        "{\"a\":1,\"a\":2}", #"{"e\u0301":1,"é":2}"#, "\u{FEFF}{}", "{} x", "[1] [2]", "[truee]", "[nul]", "nul", "[1,nul]", "[fals]", "'a'", "\"unterminated",
        String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
    ]

    @Test("what clients send is read here, to the decoder's value", arguments: common)
    func readsWhatTheDecoderReads(_ text: String) throws {
        let value = try #require(Self.fast(text), "left to the decoder: \(text)")
        #expect(value == Self.decoded(text), "\(text)")
    }

    @Test("odd and broken texts are left to the decoder", arguments: left)
    func leavesTheRest(_ text: String) {
        #expect(Self.fast(text) == Optional<JSONValue>.none, "read: \(text)")
    }

    @Test("numbers read to the decoder's kinds: whole ones as integers")
    func numberKinds() throws {
        let value = try #require(Self.fast("[1.0,1e2,-0,0.5,1.5e-3,9007199254740991,123456789012345678]"))
        #expect(value == .array([.int(1), .int(100), .int(0), .number(0.5), .number(0.0015), .int(9_007_199_254_740_991), .int(123_456_789_012_345_678)]))
        #expect(value == Self.decoded("[1.0,1e2,-0,0.5,1.5e-3,9007199254740991,123456789012345678]"))
    }

    @Test("at the edges: 32 levels read and 33 left; whole numbers below 2^53 read, at it left")
    func edges() throws {
        let nested = { (levels: Int) in String(repeating: "[", count: levels) + String(repeating: "]", count: levels) }
        #expect(Self.fast(nested(32)) == Self.decoded(nested(32)))
        #expect(Self.fast(nested(32)) != Optional<JSONValue>.none)
        #expect(Self.fast(nested(33)) == Optional<JSONValue>.none)
        #expect(Self.fast("9007199254740991.0") == .int(9_007_199_254_740_991))
        #expect(Self.fast("9007199254740992.0") == Optional<JSONValue>.none)
        for text in ["1.0000000000000001", "1e-400", "-1e-400", "0.1e1"] {
            let value = try #require(Self.fast(text), "\(text)")
            #expect(value == Self.decoded(text), "\(text)")
        }
    }
}
