import Foundation
import PushfanSupport

/// Shared field rules.
package enum Rules {
    static let identifierMaxLength = 128
    static let identifierCharacters = "A-Z a-z 0-9 . _ : -"

    /// 1 to 128 characters of `[A-Za-z0-9._:-]`, not `.` or `..`: safe in Kafka keys (which
    /// use `#` and `/` as separators), URLs, logs and SQL identifiers.
    package static func isIdentifier(_ value: String) -> Bool {
        let bytes = value.utf8
        guard !bytes.isEmpty, bytes.count <= identifierMaxLength else { return false }
        // `.` and `..` mean this and the parent folder in a URL path: never a name.
        if bytes.allSatisfy({ $0 == UInt8(ascii: ".") }) && bytes.count <= 2 { return false }
        return bytes.allSatisfy(isIdentifierByte)
    }

    static func isIdentifierByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
    }

    static func identifier(_ value: String, field: String) throws(MessageDecodingError) {
        guard isIdentifier(value) else {
            if value.isEmpty { throw .invalidField(field, "must not be empty") }
            throw .invalidField(
                field, "must be 1 to \(identifierMaxLength) characters of \(identifierCharacters), got \(Quote.clip(value, max: 40))")
        }
    }

    static func nonNegative<T: BinaryInteger>(_ value: T, field: String) throws(MessageDecodingError) {
        guard value >= 0 else { throw .invalidField(field, "must not be negative, got \(value)") }
    }

    /// Epoch milliseconds: not negative, and not in seconds by mistake (a value
    /// below 10^11 ms is before 1973).
    static func epochMillis(_ value: Int64, field: String) throws(MessageDecodingError) {
        guard value >= 0 else { throw .invalidField(field, "must be milliseconds since the epoch, got \(value)") }
        guard value == 0 || value >= 100_000_000_000 else {
            throw .invalidField(field, "must be milliseconds since the epoch; \(value) looks like seconds")
        }
    }
}
