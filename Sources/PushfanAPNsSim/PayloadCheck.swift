/// A lean check that a payload is one JSON object (RFC 8259 syntax, nesting at most 64
/// deep) with the member APNs needs, without building any values: it runs for every
/// request, so it only walks the bytes once.
package enum PayloadCheck {
    package enum Requirement: Sendable {
        /// A top-level `aps` whose value is an object (every push type but mdm).
        case apsObject
        /// A top-level `mdm` whose value is a string (mdm pushes).
        case mdmString
    }

    package static func isAcceptable(_ bytes: [UInt8], requiring requirement: Requirement) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            scanner.skipSpace()
            guard scanner.peek == UInt8(ascii: "{") else { return false }
            guard let found = scanner.topLevelObject(requirement: requirement) else { return false }
            scanner.skipSpace()
            return found && scanner.atEnd
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        var atEnd: Bool { index >= bytes.count }
        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Parses the top-level object; nil if malformed, else whether the required member was there.
        mutating func topLevelObject(requirement: Requirement) -> Bool? {
            index += 1  // {
            skipSpace()
            var found = false
            if peek == UInt8(ascii: "}") { index += 1; return false }
            while true {
                skipSpace()
                guard let keyStart = stringBody() else { return nil }
                let key = UnsafeBufferPointer(rebasing: bytes[keyStart.start..<keyStart.end])
                skipSpace()
                guard peek == UInt8(ascii: ":") else { return nil }
                index += 1
                skipSpace()
                let valueStart = peek
                guard value(depth: 1) else { return nil }
                switch requirement {
                case .apsObject where key.elementsEqual("aps".utf8) && !keyStart.escaped:
                    found = valueStart == UInt8(ascii: "{")
                case .mdmString where key.elementsEqual("mdm".utf8) && !keyStart.escaped:
                    found = valueStart == UInt8(ascii: "\"")
                default: break
                }
                skipSpace()
                guard let next = peek else { return nil }
                index += 1
                if next == UInt8(ascii: "}") { return found }
                guard next == UInt8(ascii: ",") else { return nil }
            }
        }

        /// A string's contents (without quotes); nil if malformed.
        mutating func stringBody() -> (start: Int, end: Int, escaped: Bool)? {
            guard peek == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            var escaped = false
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return (start, index - 1, escaped)
                }
                if byte < 0x20 { return nil }
                if byte == UInt8(ascii: "\\") {
                    escaped = true
                    index += 1
                    guard let next = peek else { return nil }
                    switch next {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                         UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        index += 1
                        for _ in 0..<4 {
                            guard let hex = peek, Self.isHex(hex) else { return nil }
                            index += 1
                        }
                    default: return nil
                    }
                    continue
                }
                index += 1
            }
            return nil
        }

        mutating func value(depth: Int) -> Bool {
            guard depth <= 64, let first = peek else { return false }
            switch first {
            case UInt8(ascii: "{"):
                index += 1
                skipSpace()
                if peek == UInt8(ascii: "}") { index += 1; return true }
                while true {
                    skipSpace()
                    guard stringBody() != nil else { return false }
                    skipSpace()
                    guard peek == UInt8(ascii: ":") else { return false }
                    index += 1
                    skipSpace()
                    guard value(depth: depth + 1) else { return false }
                    skipSpace()
                    guard let next = peek else { return false }
                    index += 1
                    if next == UInt8(ascii: "}") { return true }
                    guard next == UInt8(ascii: ",") else { return false }
                }
            case UInt8(ascii: "["):
                index += 1
                skipSpace()
                if peek == UInt8(ascii: "]") { index += 1; return true }
                while true {
                    skipSpace()
                    guard value(depth: depth + 1) else { return false }
                    skipSpace()
                    guard let next = peek else { return false }
                    index += 1
                    if next == UInt8(ascii: "]") { return true }
                    guard next == UInt8(ascii: ",") else { return false }
                }
            case UInt8(ascii: "\""):
                return stringBody() != nil
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        /// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
        mutating func number() -> Bool {
            if peek == UInt8(ascii: "-") { index += 1 }
            guard let first = peek, Self.isDigit(first) else { return false }
            index += 1
            if first != UInt8(ascii: "0") { while let d = peek, Self.isDigit(d) { index += 1 } }
            if peek == UInt8(ascii: ".") {
                index += 1
                guard let d = peek, Self.isDigit(d) else { return false }
                while let d = peek, Self.isDigit(d) { index += 1 }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                index += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
                guard let d = peek, Self.isDigit(d) else { return false }
                while let d = peek, Self.isDigit(d) { index += 1 }
            }
            return true
        }

        static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
        static func isHex(_ byte: UInt8) -> Bool { isDigit(byte) || (0x61...0x66).contains(byte) || (0x41...0x46).contains(byte) }
    }
}
