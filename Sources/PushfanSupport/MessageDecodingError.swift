import Foundation

/// Why a Kafka record could not be turned into a message.
///
/// `code` is a fixed, low-cardinality string (`not_json`, `wrong_schema`,
/// `unsupported_version`, `invalid_field`) that is safe as a metric label and is
/// what the dead-letter record carries in its `error` field. `description`
/// says what is wrong and where: the JSON path of the offending field followed
/// by the problem, e.g. `notification.content.default.title: expected a string`.
package struct MessageDecodingError: Error, CustomStringConvertible, Equatable {
    private enum Code: String {
        /// The bytes are not a JSON document (empty, not UTF-8, syntax error,
        /// nested deeper than the parser allows).
        case notJSON = "not_json"
        /// Valid JSON, but not shaped like the message: a missing or mistyped
        /// field, a top level that is not an object, no integer `v`.
        case wrongSchema = "wrong_schema"
        /// The `v` field names a version this reader does not understand.
        case unsupportedVersion = "unsupported_version"
        /// Well-formed, but a value breaks a rule (length, range, allowed set,
        /// combination of fields).
        case invalidField = "invalid_field"
        /// The record is larger than its type allows (`Campaign.maxRecordBytes`); it is
        /// refused before it is parsed.
        case recordTooLarge = "record_too_large"
        /// A notification payload (the default texts' or a locale's) is larger than APNs
        /// allows for its push type.
        case payloadTooLarge = "payload_too_large"
    }

    private let kind: Code
    /// JSON path of the offending field, dotted with `[i]` for array elements
    /// (`audience.devices[3]`); empty when the problem concerns the whole payload.
    package let field: String
    /// What is wrong, in words meant for the person who produced the record.
    package let reason: String

    private init(_ kind: Code, field: String, reason: String) {
        self.kind = kind
        self.field = field
        self.reason = reason
    }

    /// The same problem at another field: a check run on a derived value (a variant's
    /// notification) reports the field the producer wrote.
    package func moved(to field: String) -> MessageDecodingError { MessageDecodingError(kind, field: field, reason: reason) }

    /// Machine-readable code, usable as a metric label and as the dead-letter `error`.
    package var code: String { kind.rawValue }

    package var description: String { field.isEmpty ? reason : "\(field): \(reason)" }

    package static func notJSON(_ reason: String, field: String = "") -> MessageDecodingError {
        MessageDecodingError(.notJSON, field: field, reason: reason)
    }

    package static func wrongSchema(_ field: String, _ reason: String) -> MessageDecodingError {
        MessageDecodingError(.wrongSchema, field: field, reason: reason)
    }

    package static func wrongSchema(at path: [any CodingKey], _ reason: String) -> MessageDecodingError {
        wrongSchema(JSONPath.render(path), reason)
    }

    package static func unsupportedVersion(_ version: Int, supported: ClosedRange<Int>) -> MessageDecodingError {
        let understood = supported.count == 1
            ? "version \(supported.lowerBound)"
            : "versions \(supported.lowerBound) to \(supported.upperBound)"
        return MessageDecodingError(
            .unsupportedVersion, field: "v",
            reason: "version \(version) is not supported; this reader understands \(understood)")
    }

    package static func invalidField(_ field: String, _ reason: String) -> MessageDecodingError {
        MessageDecodingError(.invalidField, field: field, reason: reason)
    }

    package static func payloadTooLarge(_ field: String, _ reason: String) -> MessageDecodingError {
        MessageDecodingError(.payloadTooLarge, field: field, reason: reason)
    }

    package static func invalidField(at path: [any CodingKey], _ reason: String) -> MessageDecodingError {
        invalidField(JSONPath.render(path), reason)
    }

    package static func recordTooLarge(_ reason: String) -> MessageDecodingError {
        MessageDecodingError(.recordTooLarge, field: "", reason: reason)
    }

    /// Every code this error can carry, for documentation and metric pre-registration.
    package static let allCodes: [String] = ["not_json", "wrong_schema", "unsupported_version", "invalid_field", "record_too_large", "payload_too_large"]
}
