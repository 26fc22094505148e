import Foundation

/// The few steps the canonical readers take over bytes in their writer's one form
/// (`DeviceResult(canonicalJSON:)`, `EngagementEvent(canonicalJSON:)`, `TaskRecord.canonical`,
/// `CanonicalWriter`'s counterpart): literals in a fixed
/// order, strings without escapes, plain numbers. Anything else is not theirs to read, and
/// the generic decoder reads it.
struct CanonicalReader {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    var atEnd: Bool { index == bytes.count }

    mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count, memcmp(bytes.baseAddress! + index, text.utf8Start, count) == 0 else { return false }
        index += count
        return true
    }

    /// `"text"` without escapes as .some(text), `null` as .some(nil), else nil.
    mutating func optionalString() -> String?? {
        if literal("null") { return .some(nil) }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        var end = start
        var union: UInt8 = 0
        while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
            let byte = bytes[end]
            guard byte >= 0x20, byte != UInt8(ascii: "\\") else { return nil }
            union |= byte
            end += 1
        }
        guard end < bytes.count else { return nil }
        index = end + 1
        let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
        if union < 0x80 { return .some(String(decoding: raw, as: UTF8.self)) }
        return String(validating: raw, as: UTF8.self).map { .some($0) }
    }

    /// A decimal integer (optionally negative, no leading zeros) that fits in 64 bits.
    mutating func integer() -> Int64? {
        let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
        var at = negative ? index + 1 : index
        let first = at
        var value: Int64 = 0
        // Every Int64 the writer can print (19 digits at most), without overflowing.
        while at < bytes.count, (0x30...0x39).contains(bytes[at]) {
            let (times, over) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(Int64(bytes[at] - 0x30))
            guard !over, !carry else { return nil }
            value = sum
            at += 1
        }
        guard at > first, at == first + 1 || bytes[first] != 0x30 else { return nil }
        guard at == bytes.count || !(0x30...0x39).contains(bytes[at]) else { return nil }
        index = at
        return negative ? -value : value
    }

    mutating func optionalInteger() -> Int64?? {
        if literal("null") { return .some(nil) }
        return integer().map { .some($0) }
    }

    /// A JSON number (`-`, digits, a fraction, an exponent) as a finite Double.
    mutating func number() -> Double? {
        var at = index
        func digits() -> Bool {
            let first = at
            while at < bytes.count, (0x30...0x39).contains(bytes[at]) { at += 1 }
            return at > first
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
        guard digits() else { return nil }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            guard digits() else { return nil }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
            at += 1
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard digits() else { return nil }
        }
        guard let value = Double(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[index..<at]), as: UTF8.self)), value.isFinite else { return nil }
        index = at
        return value
    }

    /// `"text"` when the next bytes are `key` (a literal like `,"name":`); .some(nil) when
    /// they are not, nil when the key is there and its value is not a plain string.
    mutating func optionalMember(_ key: StaticString) -> String?? {
        guard literal(key) else { return .some(nil) }
        guard let text = optionalString() ?? nil else { return nil }
        return .some(text)
    }
}

extension CanonicalReader {
    /// An integer that fits in `Int`.
    mutating func int() -> Int? { integer().flatMap { Int(exactly: $0) } }

    /// `[1,2,3]`: integers without spaces.
    mutating func integers() -> [Int64]? {
        guard literal("[") else { return nil }
        var values: [Int64] = []
        if literal("]") { return values }
        repeat {
            guard let value = integer() else { return nil }
            values.append(value)
        } while literal(",")
        return literal("]") ? values : nil
    }

    /// `["a","b"]`: strings without escapes, without spaces.
    mutating func strings() -> [String]? {
        guard literal("[") else { return nil }
        var values: [String] = []
        if literal("]") { return values }
        repeat {
            guard let value = optionalString() ?? nil else { return nil }
            values.append(value)
        } while literal(",")
        return literal("]") ? values : nil
    }
}
