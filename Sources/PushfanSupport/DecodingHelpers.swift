import Foundation

/// The parser (swift-foundation's JSONDecoder) reports some problems only when
/// a value is read, with an internal error type that carries no coding path:
/// numbers it cannot represent as the requested type (1e400, 1.5 as an Int)
/// and strings whose text is invalid (raw newline, bad escape, lone surrogate).
package enum ParserFailure {
    package static func classify(_ error: any Error, at path: [any CodingKey], expected: Any.Type? = nil) -> MessageDecodingError {
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

/// Quoting of user-supplied text in error messages: escaped, and clipped so a
/// hostile payload cannot blow up a log line or a dead-letter record.
package enum Quote {
    package static func clip(_ text: String, max: Int) -> String {
        if text.count <= max { return text.debugDescription }
        return String(text.prefix(max)).debugDescription + "…"
    }
}

// MARK: - Decoding helpers

/// A coding key for objects whose keys are data (`aps`, `data`, locale tables).
package struct AnyCodingKey: CodingKey {
    package let stringValue: String
    package let intValue: Int?

    package init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    package init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}

/// Rendering of coding paths and decoding errors in the `field: reason` form.
package enum JSONPath {
    /// `notification.content.locales.de.title`, `audience.devices[3]`; keys that
    /// are not plain words are quoted: `notification.data["a.b"]`.
    package static func render(_ path: [any CodingKey]) -> String {
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

    package static func join(_ base: String, _ key: String) -> String {
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
    package static func translate(_ error: DecodingError) -> MessageDecodingError {
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
    package static func found(in error: any Error) -> String {
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

    package static func describe(_ type: Any.Type) -> String {
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
    package func field<T: Decodable>(_ key: Key, as type: T.Type = T.self) throws -> T {
        try naming(key, expected: T.self) { try decode(T.self, forKey: key) }
    }

    /// `decodeIfPresent` (absent or null gives nil) that names the field when
    /// the parser raises its own, pathless error (see `ParserFailure`).
    package func optionalField<T: Decodable>(_ key: Key, as type: T.Type = T.self) throws -> T? {
        try naming(key, expected: T.self) { try decodeIfPresent(T.self, forKey: key) }
    }

    /// `read`, with a pathless parser error turned into one that names `key` (and the
    /// `expected` type); errors that already name their field pass unchanged.
    private func naming<Value>(_ key: Key, expected: Any.Type, _ read: () throws -> Value) throws -> Value {
        do {
            return try read()
        } catch let error as DecodingError {
            throw error
        } catch let error as MessageDecodingError {
            throw error
        } catch {
            throw ParserFailure.classify(error, at: codingPath + [key], expected: expected)
        }
    }
}

/// Decoding of the string-valued enums, with the allowed values in the error.
package enum StringEnum {
    package static func decode<E: RawRepresentable & CaseIterable>(
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
