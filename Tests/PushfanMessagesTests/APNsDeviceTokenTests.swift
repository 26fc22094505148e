import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages

@Suite("APNs device token")
struct APNsDeviceTokenTests {
    static let common = String(repeating: "0123456789abcdef", count: 4)  // 64 digits, 32 bytes

    @Test("normalises: trims whitespace and lowercases")
    func normalises() throws {
        let token = try DeviceToken("  \n" + Self.common.uppercased() + "\t ")
        #expect(token.hex == Self.common)
        #expect(token.byteCount == 32)
    }

    @Test("accepts every even length from 16 to 200 bytes", arguments: [16, 32, 80, 100, 200])
    func acceptsLengths(bytes: Int) throws {
        let hex = String(repeating: "ab", count: bytes)
        let token = try DeviceToken(hex)
        #expect(token.hex == hex)
        #expect(token.byteCount == bytes)
    }

    @Test("Live Activity tokens of 160 hex digits")
    func liveActivityLength() throws {
        let hex = String(repeating: "0f", count: 80)
        #expect(try DeviceToken(hex).hex.count == 160)
    }

    @Test("round-trips raw bytes")
    func rawBytes() throws {
        let bytes: [UInt8] = (0..<32).map { UInt8($0 * 8) }
        let token = try DeviceToken(bytes: bytes)
        #expect(token.bytes == bytes)
        #expect(token.hex == "0008101820283038404850586068707880889098a0a8b0b8c0c8d0d8e0e8f0f8")
        #expect(try DeviceToken(token.hex.uppercased()) == token)
        #expect(throws: APNsRequestError.invalidDeviceToken("must be 16 to 200 bytes; found 15")) {
            try DeviceToken(bytes: [UInt8](repeating: 1, count: 15))
        }
    }

    struct Reject: Sendable, CustomTestStringConvertible {
        let name: String
        let input: String
        let message: String
        var testDescription: String { name }
    }

    static let rejects: [Reject] = [
        Reject(name: "empty", input: "", message: "device token is empty"),
        Reject(name: "only whitespace", input: " \n\t", message: "device token is empty"),
        Reject(name: "a g", input: "abcdg" + String(repeating: "0", count: 59),
               message: "device token must be hexadecimal; found 'g' at position 5"),
        Reject(name: "inner space", input: "abcd ef" + String(repeating: "0", count: 57),
               message: "device token must be hexadecimal; found ' ' at position 5"),
        Reject(name: "angle brackets of NSData's description", input: "<" + common + ">",
               message: "device token must be hexadecimal; found '<' at position 1"),
        Reject(name: "non-ASCII", input: "ab\u{E9}" + String(repeating: "0", count: 61),
               message: "device token must be hexadecimal; found '\\u{00E9}' at position 3"),
        Reject(name: "control character", input: "ab\u{0}" + String(repeating: "0", count: 61),
               message: "device token must be hexadecimal; found '\\0' at position 3"),
        Reject(name: "0x prefix", input: "0x" + common,
               message: "device token must be hexadecimal; found 'x' at position 2"),
        Reject(name: "odd length", input: String(common.dropLast()),
               message: "device token must have an even number of hex digits (two per byte); found 63"),
        Reject(name: "too short", input: String(repeating: "ab", count: 15),
               message: "device token must be 32 to 400 hex digits (16 to 200 bytes); found 30"),
        Reject(name: "too long", input: String(repeating: "ab", count: 201),
               message: "device token must be 32 to 400 hex digits (16 to 200 bytes); found 402"),
    ]

    @Test("refuses malformed tokens with a clear message", arguments: rejects)
    func rejectsMalformed(_ reject: Reject) {
        #expect {
            try DeviceToken(reject.input)
        } throws: { error in
            let error = error as? APNsRequestError
            return error?.description == reject.message && error?.code == "invalid_device_token"
        }
    }

    @Test("description and debug output show only the first 8 digits")
    func redacts() throws {
        let token = try DeviceToken(Self.common)
        #expect(token.description == "01234567…")
        #expect("\(token)" == "01234567…")
        #expect(String(reflecting: token) == "DeviceToken(01234567…)")
        var dumped = ""
        dump(token, to: &dumped)
        #expect(!dumped.contains(Self.common))
        #expect(!dumped.contains("89abcdef0123"))
    }
}
