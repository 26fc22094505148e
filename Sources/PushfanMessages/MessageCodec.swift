import Foundation
import PushfanSupport

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
    /// The record written by hand, for the types a hot path writes thousands of times a
    /// second: what the generic encoder writes, read the same way (keys sorted, no
    /// whitespace), without its cost. Nil: the generic encoder writes it.
    var canonicalJSON: [UInt8]? { get }
    /// Reads back exactly the spelling `canonicalJSON` writes; nil for any other, which the
    /// generic decoder then reads. `MessageCodec.decode` validates what it returns.
    static func canonical(_ bytes: UnsafeRawBufferPointer) -> Self?
}

extension VersionedMessage {
    package static var supportedVersions: ClosedRange<Int> { currentVersion...currentVersion }
    package var canonicalJSON: [UInt8]? { nil }
    package static func canonical(_ bytes: UnsafeRawBufferPointer) -> Self? { nil }
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
        // The hand-written form first; what it refuses, or what fails the rules, the generic
        // path reads again and explains.
        if let fast = data.withUnsafeBytes({ M.canonical($0) }), (try? fast.validate()) != nil { return fast }
        return try decodeGenerically(type, from: data)
    }

    /// `decode` through `JSONDecoder` alone: what the hand-written forms are checked against.
    package static func decodeGenerically<M: VersionedMessage>(
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
        if let bytes = message.canonicalJSON { return Data(bytes) }
        return encodeGenerically(message)
    }

    /// `encode` through `JSONEncoder` alone: what the hand-written forms are checked against.
    package static func encodeGenerically(_ message: some VersionedMessage) -> Data {
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
