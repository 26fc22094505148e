import Foundation

extension JSONValue {
    /// The value of a JSON text, read in one pass over its bytes; nil for any text this
    /// reader is not sure to read exactly as `JSONDecoder` reads `JSONValue`, which its
    /// callers then ask, for the value or its error.
    ///
    /// Why a reader of its own: decoding through `Decodable` builds coding paths and key
    /// lists for every member, and was 55 % of the API's CPU taking events in batches of a
    /// thousand (scripts/bench-events). Only what is certain is read here: strict RFC 8259,
    /// valid UTF-8, no duplicate keys, half the decoder's nesting limit, and numbers whose
    /// `.int`/`.number` reading leaves no doubt (whole numbers of up to 18 digits; others
    /// read as the decoder reads a Double, below 2^53 when whole). Anything else (huge
    /// integers, lone surrogates, trailing bytes, a byte-order mark, invalid text) is the
    /// decoder's to judge.
    package static func parsedFast(_ bytes: UnsafeRawBufferPointer) -> JSONValue? {
        var reader = FastJSONReader(bytes: bytes)
        reader.skipSpace()
        guard let value = reader.value(depth: 0) else { return nil }
        reader.skipSpace()
        // Not `atEnd ? value : nil`: JSONValue takes `nil` as a literal, and that is `.null`.
        guard reader.atEnd else { return nil }
        return value
    }
}

/// The cursor behind `JSONValue.parsedFast`. Every method returns nil where the text leaves
/// its strict, certain subset.
private struct FastJSONReader {
    /// Containers nested deeper than this are left to the decoder, well inside its own limit.
    static let deepest = JSONValue.maxDecodingDepth / 2

    let bytes: UnsafeRawBufferPointer
    var index = 0

    var atEnd: Bool { index == bytes.count }

    mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func value(depth: Int) -> JSONValue? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < Self.deepest else { return nil }
            return bytes[index] == UInt8(ascii: "{") ? object(depth: depth + 1) : array(depth: depth + 1)
        case UInt8(ascii: "\""):
            guard let text = string() else { return nil }
            return .string(text)
        case UInt8(ascii: "t"):
            guard word("true") else { return nil }
            return .bool(true)
        case UInt8(ascii: "f"):
            guard word("false") else { return nil }
            return .bool(false)
        case UInt8(ascii: "n"):
            guard word("null") else { return nil }
            return .null
        default: return number()
        }
    }

    private mutating func word(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count, memcmp(bytes.baseAddress! + index, text.utf8Start, count) == 0 else { return false }
        index += count
        return true
    }

    private mutating func object(depth: Int) -> JSONValue? {
        index += 1
        var members: [String: JSONValue] = [:]
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            guard let member = value(depth: depth), members.updateValue(member, forKey: key) == nil else { return nil }
            skipSpace()
            guard index < bytes.count else { return nil }
            let separator = bytes[index]
            index += 1
            if separator == UInt8(ascii: "}") { return .object(members) }
            guard separator == UInt8(ascii: ",") else { return nil }
        }
    }

    private mutating func array(depth: Int) -> JSONValue? {
        index += 1
        var elements: [JSONValue] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipSpace()
            guard let element = value(depth: depth) else { return nil }
            elements.append(element)
            skipSpace()
            guard index < bytes.count else { return nil }
            let separator = bytes[index]
            index += 1
            if separator == UInt8(ascii: "]") { return .array(elements) }
            guard separator == UInt8(ascii: ",") else { return nil }
        }
    }

    /// A string from its opening quote: valid UTF-8, no raw control characters, the escapes
    /// RFC 8259 names (a `\u` surrogate only as half of a pair).
    private mutating func string() -> String? {
        index += 1
        let start = index
        var escaped = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { return nil }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                index += 1
            }
            index += 1
        }
        guard index < bytes.count else { return nil }
        let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        index += 1
        guard escaped else { return String(validating: raw, as: UTF8.self) }
        return JSONStringEscapes.resolve(raw)?.withUnsafeBytes { String(validating: $0, as: UTF8.self) }
    }

    /// `-`, digits (no leading zero), a fraction, an exponent. Whole numbers of up to 18
    /// digits are `.int` as written. With a fraction or exponent the text is read as the
    /// decoder reads a Double: `.number` when that is not whole, `.int` when it is whole and
    /// below 2^53 (`1.0000000000000001` is `.int(1)` there too), else nil.
    private mutating func number() -> JSONValue? {
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        let integerStart = index
        let integerDigits = digits()
        guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { return nil }
        var whole = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return nil }
            whole = false
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return nil }
            whole = false
        }
        let text = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        if whole {
            guard integerDigits <= 18 else { return nil }
            var value: Int64 = 0
            for byte in UnsafeRawBufferPointer(rebasing: bytes[integerStart..<index]) { value = value * 10 + Int64(byte - UInt8(ascii: "0")) }
            return .int(bytes[start] == UInt8(ascii: "-") ? -value : value)
        }
        guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else { return nil }
        if value.rounded(.towardZero) != value { return .number(value) }
        guard abs(value) < 9_007_199_254_740_992 else { return nil }
        return .int(Int64(value))
    }

    private mutating func digits() -> Int {
        let start = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        return index - start
    }
}
