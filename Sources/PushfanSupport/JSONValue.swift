import Foundation

/// Any JSON value, for fields Pushfan passes through without interpreting them:
/// the campaign's extra `aps` keys and its custom data.
///
/// Integers and fractions are distinct cases so that what comes in as `1` goes
/// out as `1` (APNs wants `"badge": 1`, not `1.0`). A number is `.int` when it
/// is whole and fits in 64 bits (`1`, `1.0` and `1e2` all decode as `.int`),
/// otherwise `.number`. Because of that `.int(1)` and `.number(1)` are
/// different values for `==`; decoding never produces the latter.
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Deepest nesting accepted when decoding, counted from the top of the
    /// message. APNs payloads are at most 5 KB, so real ones are shallow; the
    /// limit keeps the recursive decoder far from the end of a thread's stack.
    package static let maxDecodingDepth = 64
}

// MARK: - Accessors

extension JSONValue {
    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The value as an integer, if it is one.
    package var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }

    /// The value as a Double, for either kind of number.
    package var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .number(let value): return value
        default: return nil
        }
    }

    package var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    package var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    package var isNull: Bool { self == .null }

    /// The member `key` of an object; nil for a missing key or a non-object.
    package subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// "a string", "an object"...: for error messages.
    package var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "true/false"
        case .int: return "an integer"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

// MARK: - Codable

extension JSONValue: Codable {
    package init(from decoder: any Decoder) throws {
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
            return
        }
        if let value = try? single.decode(Bool.self) {
            self = .bool(value)
            return
        }
        do {
            self = .string(try single.decode(String.self))
            return
        } catch is DecodingError {
            // Not a string.
        } catch {
            // A string whose text the parser refuses (raw newline, bad escape).
            throw ParserFailure.classify(error, at: decoder.codingPath)
        }
        // Whole numbers first, so integers stay integers. The parser raises a
        // DecodingError when the value is not a number at all and its own error
        // when it is a number that does not fit the requested type.
        var isNumber = true
        do {
            self = .int(try single.decode(Int64.self))
            return
        } catch is DecodingError {
            isNumber = false
        } catch {
            // A number, but a fraction or too big for Int64.
        }
        if isNumber {
            if let value = try? single.decode(Double.self), value.isFinite {
                self = .number(value)
                return
            }
            throw DecodingError.dataCorruptedError(
                in: single, debugDescription: "number is too large to represent")
        }

        guard decoder.codingPath.count < Self.maxDecodingDepth else {
            throw DecodingError.dataCorruptedError(
                in: single, debugDescription: "nested more than \(Self.maxDecodingDepth) levels deep")
        }
        if let object = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(object.allKeys.count)
            for key in object.allKeys {
                members[key.stringValue] = try object.decode(JSONValue.self, forKey: key)
            }
            self = .object(members)
            return
        }
        var array = try decoder.unkeyedContainer()
        var elements: [JSONValue] = []
        if let count = array.count { elements.reserveCapacity(count) }
        while !array.isAtEnd {
            elements.append(try array.decode(JSONValue.self))
        }
        self = .array(elements)
    }

    /// Non-finite numbers have no JSON form and are written as `null`.
    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .int(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .number(let value):
            var single = encoder.singleValueContainer()
            if value.isFinite { try single.encode(value) } else { try single.encodeNil() }
        case .string(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .array(let elements):
            var array = encoder.unkeyedContainer()
            for element in elements { try array.encode(element) }
        case .object(let members):
            var object = encoder.container(keyedBy: AnyCodingKey.self)
            for (key, value) in members {
                try object.encode(value, forKey: AnyCodingKey(stringValue: key))
            }
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    package init(nilLiteral: ()) { self = .null }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(integerLiteral value: Int64) { self = .int(value) }
    package init(floatLiteral value: Double) { self = .number(value) }
    package init(stringLiteral value: String) { self = .string(value) }
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }

    /// A repeated key keeps its last value.
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue {
    /// A value typed from text given on a command line or in a CSV cell: integers and
    /// decimals become numbers (so numeric segment comparisons work), anything else text.
    package static func inferred(from text: String) -> JSONValue {
        Int64(text).map(JSONValue.int) ?? Double(text).map(JSONValue.number) ?? .string(text)
    }
}
