import Foundation

/// A device token as APNs wants it in the request path: lowercase hex, an even
/// number of digits, 16 to 200 bytes.
///
/// Token lengths vary: 32 bytes (64 hex digits) is the common case and Live
/// Activity tokens of 80 bytes (160 digits) are seen, so the length is not
/// pinned. Surrounding whitespace is trimmed and upper case is accepted, since
/// apps and SDKs report tokens both ways; anything else that is not hex is
/// refused rather than repaired.
///
/// A token identifies a person's device, so `description` shows only its first
/// 8 digits; use `hex` where the full value is needed (the request path, the
/// device store).
package struct DeviceToken: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// Fewest bytes accepted.
    package static let minBytes = 16
    /// Most bytes accepted.
    package static let maxBytes = 200

    /// The token in lowercase hex.
    package let hex: String

    /// Normalises and checks a hex token.
    ///
    /// Errors name the first problem: a character that is not hex (with its
    /// 1-based position in the trimmed text), an odd number of digits, or a
    /// length outside 32...400 digits.
    package init(_ text: String) throws(APNsRequestError) {
        var digits: [UInt8] = []
        digits.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            guard let lower = Self.lowercaseHexDigit(byte) else {
                digits.removeAll()
                break
            }
            digits.append(lower)
        }
        if digits.isEmpty || digits.count != text.utf8.count {
            // Not plain hex: trim, then look again (and name the culprit).
            digits = try Self.slowPath(text)
        }
        guard digits.count.isMultiple(of: 2) else {
            throw .invalidDeviceToken("must have an even number of hex digits (two per byte); found \(digits.count)")
        }
        let range = (2 * Self.minBytes)...(2 * Self.maxBytes)
        guard range.contains(digits.count) else {
            throw .invalidDeviceToken(
                "must be \(range.lowerBound) to \(range.upperBound) hex digits (\(Self.minBytes) to \(Self.maxBytes) bytes); found \(digits.count)")
        }
        hex = String(decoding: digits, as: UTF8.self)
    }

    private static func slowPath(_ text: String) throws(APNsRequestError) -> [UInt8] {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw .invalidDeviceToken("is empty") }
        var digits: [UInt8] = []
        digits.reserveCapacity(trimmed.utf8.count)
        for (offset, character) in trimmed.enumerated() {
            guard let ascii = character.asciiValue, let lower = lowercaseHexDigit(ascii) else {
                throw .invalidDeviceToken(
                    "must be hexadecimal; found \(APNsQuote.character(character)) at position \(offset + 1)")
            }
            digits.append(lower)
        }
        return digits
    }

    /// A token from its raw bytes (as an app receives it from the OS).
    package init(bytes: some Collection<UInt8>) throws(APNsRequestError) {
        guard (Self.minBytes...Self.maxBytes).contains(bytes.count) else {
            throw .invalidDeviceToken(
                "must be \(Self.minBytes) to \(Self.maxBytes) bytes; found \(bytes.count)")
        }
        let alphabet = Array("0123456789abcdef".utf8)
        var digits: [UInt8] = []
        digits.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            digits.append(alphabet[Int(byte >> 4)])
            digits.append(alphabet[Int(byte & 0x0F)])
        }
        hex = String(decoding: digits, as: UTF8.self)
    }

    /// Length in bytes.
    package var byteCount: Int { hex.utf8.count / 2 }

    /// The raw bytes.
    package var bytes: [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(byteCount)
        var high: UInt8 = 0
        for (index, digit) in hex.utf8.enumerated() {
            let value = digit <= UInt8(ascii: "9") ? digit - UInt8(ascii: "0") : digit - UInt8(ascii: "a") + 10
            if index.isMultiple(of: 2) { high = value } else { result.append(high << 4 | value) }
        }
        return result
    }

    /// The first 8 hex digits and an ellipsis: enough to match log lines, not
    /// enough to address the device.
    package var description: String { String(hex.prefix(8)) + "…" }

    package var debugDescription: String { "DeviceToken(\(description))" }

    /// Keeps `dump` and the test runner's value printing redacted too.
    package var customMirror: Mirror { Mirror(self, children: ["hex": description]) }

    private static func lowercaseHexDigit(_ ascii: UInt8) -> UInt8? {
        switch ascii {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): return ascii
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return ascii + 32
        default: return nil
        }
    }
}
