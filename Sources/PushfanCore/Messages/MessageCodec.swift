import Foundation

// MARK: - Error

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

// MARK: - Protocol

/// A record of one of Pushfan's Kafka topics.
///
/// Every record is a JSON object with an integer `v`. Readers refuse versions
/// outside `supportedVersions` (they go to the dead-letter topic), so a change
/// that old readers would misread must bump `currentVersion`; adding an optional
/// field that old readers may ignore does not.
package protocol VersionedMessage: Codable, Sendable {
    /// The version written by `MessageCodec.encode`.
    static var currentVersion: Int { get }
    /// The versions `MessageCodec.decode` accepts. Defaults to `currentVersion` alone.
    static var supportedVersions: ClosedRange<Int> { get }
    /// Checks the rules the type system cannot express (lengths, ranges,
    /// combinations). Called by `MessageCodec.decode` after decoding.
    func validate() throws(MessageDecodingError)
}

extension VersionedMessage {
    package static var supportedVersions: ClosedRange<Int> { currentVersion...currentVersion }
}

// MARK: - Codec

/// Turns Kafka record values into messages and back.
///
/// Decoding never traps: whatever the bytes, the result is a message that has
/// passed `validate()` or a `MessageDecodingError`.
package enum MessageCodec {
    /// Decodes and validates one record value.
    ///
    /// Order of checks: the bytes must be JSON (`not_json`); the top level must
    /// be an object with an integer `v` (`wrong_schema`) that this reader
    /// supports (`unsupported_version`); the fields must have the right types
    /// (`wrong_schema`, with the field path); then `validate()` (`invalid_field`).
    package static func decode<M: VersionedMessage>(
        _ type: M.Type, from data: Data
    ) throws(MessageDecodingError) -> M {
        if let problem = precheck(data) { throw problem }
        let message: M
        do {
            message = try JSONDecoder().decode(Envelope<M>.self, from: data).message
        } catch let error as MessageDecodingError {
            throw error
        } catch {
            // Everything raised once parsing has succeeded is converted inside
            // `Envelope`, so what is left here is the parser refusing the bytes.
            throw .notJSON(describeUnparsable(data))
        }
        try message.validate()
        return message
    }

    /// Decodes and validates one record value given as any byte collection
    /// (for example a buffer pointing into a librdkafka message).
    package static func decode<M: VersionedMessage>(
        _ type: M.Type, from bytes: some Collection<UInt8>
    ) throws(MessageDecodingError) -> M {
        try decode(type, from: Data(bytes))
    }

    /// Decodes a JSON object that is not a topic record (no `v`): a stored template sent to
    /// the API or the CLI. The same checks and error paths as records, without the version.
    package static func decodeDocument<D: Decodable>(_ type: D.Type, from data: Data) throws(MessageDecodingError) -> D {
        if let problem = precheck(data) { throw problem }
        do {
            return try JSONDecoder().decode(Document<D>.self, from: data).value
        } catch let error as MessageDecodingError {
            throw error
        } catch {
            throw .notJSON(describeUnparsable(data))
        }
    }

    /// `Envelope` without the version: errors get their field paths.
    private struct Document<D: Decodable>: Decodable {
        let value: D

        init(from decoder: any Decoder) throws {
            value = try MessageCodec.translatingErrors {
                do { _ = try decoder.container(keyedBy: AnyCodingKey.self) } catch let error as DecodingError {
                    throw MessageDecodingError.wrongSchema("", "expected a JSON object\(JSONPath.found(in: error))")
                }
                return try D(from: decoder)
            }
        }
    }

    /// Runs a decoding step, every error it raises turned into a `MessageDecodingError`
    /// with the field path.
    private static func translatingErrors<T>(_ body: () throws -> T) throws(MessageDecodingError) -> T {
        do {
            return try body()
        } catch let error as MessageDecodingError {
            throw error
        } catch let error as DecodingError {
            throw JSONPath.translate(error)
        } catch {
            // The parser's own error, raised lazily for a value it could not convert; the
            // field helpers usually catch it first, with a path.
            throw ParserFailure.classify(error, at: [])
        }
    }

    /// Encodes a message as compact JSON: no whitespace, keys sorted (so the
    /// same message always gives the same bytes), `/` not escaped.
    ///
    /// Pushfan's own message types cannot fail to encode (`JSONValue` writes
    /// non-finite numbers as `null`); a conforming type whose `encode(to:)`
    /// throws is a programming error and stops the process.
    package static func encode(_ message: some VersionedMessage) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(message)
        } catch {
            preconditionFailure("\(type(of: message)) failed to encode: \(error)")
        }
    }

    /// Reads `v`, refuses unknown versions, then decodes the message from the
    /// same decoder, so the payload is parsed only once. Every error raised in
    /// here is turned into a `MessageDecodingError` with the field path.
    private struct Envelope<M: VersionedMessage>: Decodable {
        let message: M

        private enum Keys: String, CodingKey { case v }

        init(from decoder: any Decoder) throws {
            message = try MessageCodec.translatingErrors {
                let container: KeyedDecodingContainer<Keys>
                do {
                    container = try decoder.container(keyedBy: Keys.self)
                } catch let error as DecodingError {
                    throw MessageDecodingError.wrongSchema(
                        "", "a message must be a JSON object\(JSONPath.found(in: error))")
                }
                guard container.contains(.v) else {
                    throw MessageDecodingError.wrongSchema(
                        "v", "required field is missing; every message needs an integer version \"v\"")
                }
                let version: Int
                do {
                    version = try container.decode(Int.self, forKey: .v)
                } catch {
                    throw MessageDecodingError.wrongSchema("v", "expected an integer version number")
                }
                guard M.supportedVersions.contains(version) else {
                    throw MessageDecodingError.unsupportedVersion(version, supported: M.supportedVersions)
                }
                return try M(from: decoder)
            }
        }
    }

    /// Checks the parser leaves for later: it validates the text inside strings
    /// only when a field is read, so bad bytes in a key or an ignored field
    /// would otherwise pass or be reported as something else; and its shape
    /// (`JSONShapeCheck`: no key twice, no nesting past the limit). Before parsing.
    private static func precheck(_ data: Data) -> MessageDecodingError? {
        if data.isEmpty { return .notJSON("the payload is empty") }
        guard String(validating: data, as: UTF8.self) != nil else {
            return .notJSON("the payload is not valid UTF-8 text, so it cannot be JSON")
        }
        // JSON allows raw bytes below 0x20 only as whitespace between tokens.
        if let index = data.firstIndex(where: { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) {
            let offset = data.distance(from: data.startIndex, to: index)
            let byte = String(data[index], radix: 16, uppercase: true)
            return .notJSON(
                "not valid JSON: raw control character 0x\(byte.count == 1 ? "0" : "")\(byte) at byte \(offset); "
                    + "inside strings write it escaped, like \\u0000")
        }
        if let problem = JSONShapeCheck.problem(in: data) { return .wrongSchema(problem.field, problem.reason) }
        return nil
    }

    /// A short explanation of why the parser refused the bytes.
    private static func describeUnparsable(_ data: Data) -> String {
        let text = String(decoding: data, as: UTF8.self)
        if text.allSatisfy(\.isWhitespace) { return "the payload is only whitespace" }
        return "not valid JSON (syntax error, trailing text, or nesting deeper than 512 levels); "
            + "the payload starts with \(Quote.clip(text.trimmingCharacters(in: .whitespacesAndNewlines), max: 32))"
    }
}

/// The parser (swift-foundation's JSONDecoder) reports some problems only when
/// a value is read, with an internal error type that carries no coding path:
/// numbers it cannot represent as the requested type (1e400, 1.5 as an Int)
/// and strings whose text is invalid (raw newline, bad escape, lone surrogate).
enum ParserFailure {
    static func classify(_ error: any Error, at path: [any CodingKey], expected: Any.Type? = nil) -> MessageDecodingError {
        let name = String(describing: error)
        if name.contains("number") || name.contains("Number") {
            if let expected, JSONPath.describe(expected) == "an integer" {
                return .wrongSchema(at: path, "expected an integer (a whole number within 64 bits)")
            }
            return .wrongSchema(at: path, "a number is out of range, or is a fraction where a whole number is expected")
        }
        let problem: String
        if name.contains("ControlCharacter") {
            problem = "a string contains a raw control character (newline, tab...); write it escaped, like \\n"
        } else if name.contains("Surrogate") || name.contains("UnicodeScalar") || name.contains("HexDigit") {
            problem = "a string contains an invalid \\u escape"
        } else if name.contains("Escape") {
            problem = "a string contains an invalid escape sequence"
        } else if name.contains("UTF8") {
            problem = "a string is not valid UTF-8"
        } else {
            problem = "a value could not be read"
        }
        return .notJSON("not valid JSON: \(problem)", field: JSONPath.render(path))
    }
}

// MARK: - Decoding helpers

/// A coding key for objects whose keys are data (`aps`, `data`, locale tables).
struct AnyCodingKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}

/// Rendering of coding paths and decoding errors in the `field: reason` form.
enum JSONPath {
    /// `notification.content.locales.de.title`, `audience.devices[3]`; keys that
    /// are not plain words are quoted: `notification.data["a.b"]`.
    static func render(_ path: [any CodingKey]) -> String {
        var out = ""
        for key in path {
            if let index = key.intValue, key.stringValue == "Index \(index)" {
                out += "[\(index)]"
            } else if isPlain(key.stringValue) {
                out += out.isEmpty ? key.stringValue : ".\(key.stringValue)"
            } else {
                out += "[\(Quote.clip(key.stringValue, max: 40))]"
            }
        }
        return out
    }

    static func join(_ base: String, _ key: String) -> String {
        if !isPlain(key) { return "\(base)[\(Quote.clip(key, max: 40))]" }
        return base.isEmpty ? key : "\(base).\(key)"
    }

    private static func isPlain(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.count <= 64 && key.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    /// `DecodingError` as a `wrong_schema` error naming the field.
    static func translate(_ error: DecodingError) -> MessageDecodingError {
        switch error {
        case .typeMismatch(let type, let context):
            return .wrongSchema(at: context.codingPath, "expected \(describe(type))\(found(context.debugDescription))")
        case .valueNotFound(let type, let context):
            return .wrongSchema(at: context.codingPath, "expected \(describe(type)), found null")
        case .keyNotFound(let key, let context):
            return .wrongSchema(at: context.codingPath + [key], "required field is missing")
        case .dataCorrupted(let context):
            return .wrongSchema(at: context.codingPath, context.debugDescription)
        @unknown default:
            return .wrongSchema("", "\(error)")
        }
    }

    /// ", found an array" for a failed container request; empty if unknown.
    static func found(in error: any Error) -> String {
        guard case .typeMismatch(_, let context)? = error as? DecodingError else { return "" }
        return found(context.debugDescription)
    }

    /// Pulls what the parser saw out of "Expected to decode X but found Y instead."
    private static func found(_ debugDescription: String) -> String {
        guard let start = debugDescription.range(of: "but found "),
              let end = debugDescription.range(of: " instead", range: start.upperBound..<debugDescription.endIndex)
        else { return "" }
        var seen = String(debugDescription[start.upperBound..<end.lowerBound]).lowercased()
        if seen.hasPrefix("a ") { seen.removeFirst(2) } else if seen.hasPrefix("an ") { seen.removeFirst(3) }
        switch seen {
        case "dictionary": return ", found an object"
        case "array": return ", found an array"
        case "string": return ", found a string"
        case "number": return ", found a number"
        case "bool", "boolean": return ", found true/false"
        case "null": return ", found null"
        default: return ""
        }
    }

    static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type, is Int16.Type, is Int8.Type,
             is UInt.Type, is UInt64.Type, is UInt32.Type, is UInt16.Type, is UInt8.Type:
            return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Dictionary") || name.contains("KeyedDecodingContainer") { return "an object" }
            if name.hasPrefix("Array") || name.contains("UnkeyedDecodingContainer") { return "an array" }
            return "a value of type \(name)"
        }
    }
}

extension KeyedDecodingContainerProtocol {
    /// `decode` that names the field when the parser raises its own, pathless
    /// error (see `ParserFailure`).
    func field<T: Decodable>(_ key: Key, as type: T.Type = T.self) throws -> T {
        do {
            return try decode(T.self, forKey: key)
        } catch let error as DecodingError {
            throw error
        } catch let error as MessageDecodingError {
            throw error
        } catch {
            throw ParserFailure.classify(error, at: codingPath + [key], expected: T.self)
        }
    }

    /// `decodeIfPresent` (absent or null gives nil) that names the field when
    /// the parser raises its own, pathless error (see `ParserFailure`).
    func optionalField<T: Decodable>(_ key: Key, as type: T.Type = T.self) throws -> T? {
        do {
            return try decodeIfPresent(T.self, forKey: key)
        } catch let error as DecodingError {
            throw error
        } catch let error as MessageDecodingError {
            throw error
        } catch {
            throw ParserFailure.classify(error, at: codingPath + [key], expected: T.self)
        }
    }
}

/// Decoding of the string-valued enums, with the allowed values in the error.
enum StringEnum {
    static func decode<E: RawRepresentable & CaseIterable>(
        _ type: E.Type, from decoder: any Decoder, what: String
    ) throws -> E where E.RawValue == String {
        let raw: String
        do {
            raw = try decoder.singleValueContainer().decode(String.self)
        } catch let error as DecodingError {
            throw error
        } catch {
            throw ParserFailure.classify(error, at: decoder.codingPath)
        }
        guard let value = E(rawValue: raw) else {
            let allowed = E.allCases.map(\.rawValue).joined(separator: ", ")
            throw MessageDecodingError.invalidField(
                at: decoder.codingPath, "unknown \(what) \(Quote.clip(raw, max: 40)); expected one of: \(allowed)")
        }
        return value
    }
}

// MARK: - Validation helpers

/// Quoting of user-supplied text in error messages: escaped, and clipped so a
/// hostile payload cannot blow up a log line or a dead-letter record.
enum Quote {
    static func clip(_ text: String, max: Int) -> String {
        if text.count <= max { return text.debugDescription }
        return String(text.prefix(max)).debugDescription + "…"
    }
}

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
