/// A compact JSON writer: APNs payloads, JWT parts, result records, stored attributes.
///
/// Why not `JSONSerialization`: it escapes `/` as `\/` and its key order is not
/// fixed, and every byte counts against the 4 KB payload limit. This writer
/// emits no whitespace, sorts object keys (so one payload always gives the same
/// bytes, and tests can compare them), writes non-ASCII text as UTF-8 rather
/// than `\u` escapes, and escapes only what JSON requires, in its short forms where it
/// has them (as `JSONEncoder` does). Non-finite numbers,
/// which JSON cannot express, are written as `null` (as `JSONValue` does).
package enum JSONWriter {
    package static func bytes(_ value: JSONValue) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(value, into: &output)
        return output
    }

    package static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null:
            output.append(contentsOf: "null".utf8)
        case .bool(let flag):
            output.append(contentsOf: (flag ? "true" : "false").utf8)
        case .int(let number):
            output.append(contentsOf: String(number).utf8)
        case .number(let number):
            writeNumber(number, into: &output)
        case .string(let text):
            writeString(text, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(element, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            writeObject(members, into: &output)
        }
    }

    package static func writeObject(_ members: [String: JSONValue], into output: inout [UInt8]) {
        output.append(UInt8(ascii: "{"))
        for (index, key) in members.keys.sorted().enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            writeString(key, into: &output)
            output.append(UInt8(ascii: ":"))
            // The key comes from the dictionary itself, so the lookup succeeds.
            write(members[key] ?? .null, into: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    /// Swift's shortest round-trip form (`0.5`, `1.0`, `1e-05`, `1e+20`) is
    /// valid JSON for every finite value.
    package static func writeNumber(_ number: Double, into output: inout [UInt8]) {
        guard number.isFinite else {
            output.append(contentsOf: "null".utf8)
            return
        }
        output.append(contentsOf: String(number).utf8)
    }

    package static func writeString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Most strings need no escape: copy them whole.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            output.append(contentsOf: text.utf8)
            output.append(UInt8(ascii: "\""))
            return
        }
        let hex: StaticString = "0123456789abcdef"
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x00..<0x20:
                output.append(contentsOf: "\\u00".utf8)
                output.append(hex.utf8Start[Int(byte >> 4)])
                output.append(hex.utf8Start[Int(byte & 0x0F)])
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

extension JSONWriter {
    /// An object with its members in the given order (JWT header and claims
    /// read best in the conventional `alg, kid` / `iss, iat` order).
    package static func writeKeyedObject(_ members: [(String, JSONValue)], into output: inout [UInt8]) {
        output.append(UInt8(ascii: "{"))
        for (index, (key, value)) in members.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            writeString(key, into: &output)
            output.append(UInt8(ascii: ":"))
            write(value, into: &output)
        }
        output.append(UInt8(ascii: "}"))
    }
}

extension JSONValue {
    /// Compact JSON text with sorted keys (the same writer as APNs payloads), e.g. for
    /// storing device attributes.
    package var compactJSON: String { String(decoding: JSONWriter.bytes(self), as: UTF8.self) }

    /// A compact JSON object with its members in the given order, for output
    /// people read (command results, benchmark lines).
    package static func orderedObjectJSON(_ members: [(String, JSONValue)]) -> String {
        var output: [UInt8] = []
        JSONWriter.writeKeyedObject(members, into: &output)
        return String(decoding: output, as: UTF8.self)
    }
}
