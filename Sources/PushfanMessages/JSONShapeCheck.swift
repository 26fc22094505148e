import PushfanSupport

/// Checks a JSON text's shape before a decoder reads it: every object names each key once,
/// and nothing nests deeper than `JSONValue.maxDecodingDepth`.
///
/// Why a pass of its own: Foundation's JSONDecoder keeps one of two equal keys without a
/// word, so a record could mean one thing to Pushfan and another to a proxy, a tool or a
/// second reader of the same topic; and it refuses nesting past 512 levels only as a syntax
/// error that names nothing. One scan over the bytes, no values built; text that is not JSON
/// at all passes through untouched (`nil`) for the decoder to describe.
package enum JSONShapeCheck {
    package enum Problem: Equatable, Sendable {
        /// `key` appears twice in the object at `path` ("" for the top level).
        case duplicateKey(path: String, key: String)
        /// A value at `path` opens more than `JSONValue.maxDecodingDepth` levels.
        case tooDeep(path: String)

        /// The field at fault, in the decoders' `notification.data.x[0]` form.
        package var field: String {
            switch self {
            case .duplicateKey(let path, let key): JSONPath.join(path, key)
            case .tooDeep(let path): path
            }
        }

        package var reason: String {
            switch self {
            case .duplicateKey: "duplicate key: a JSON object names each key once (readers disagree on which of two counts)"
            case .tooDeep: "nested more than \(JSONValue.maxDecodingDepth) levels deep"
            }
        }
    }

    private enum Frame {
        case object(keys: Set<String>, current: String?)
        case array(index: Int)
    }

    package static func problem(in bytes: some Collection<UInt8>) -> Problem? {
        let result = bytes.withContiguousStorageIfAvailable { scan(UnsafeRawBufferPointer($0)) }
        return result ?? Array(bytes).withUnsafeBytes { scan($0) }
    }

    private static func scan(_ bytes: UnsafeRawBufferPointer) -> Problem? {
        var frames: [Frame] = []
        var expectingKey = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if frames.count >= JSONValue.maxDecodingDepth { return .tooDeep(path: path(frames)) }
                frames.append(byte == UInt8(ascii: "{") ? .object(keys: [], current: nil) : .array(index: 0))
                expectingKey = byte == UInt8(ascii: "{")
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard frames.popLast() != nil else { return nil }
                expectingKey = false
                index += 1
            case UInt8(ascii: ","):
                switch frames.last {
                case .object(let keys, _)?: frames[frames.count - 1] = .object(keys: keys, current: nil); expectingKey = true
                case .array(let position)?: frames[frames.count - 1] = .array(index: position + 1)
                case nil: return nil
                }
                index += 1
            case UInt8(ascii: "\""):
                guard let end = stringEnd(bytes, from: index) else { return nil }
                if expectingKey, case .object(var keys, _)? = frames.last {
                    guard let key = unescaped(UnsafeRawBufferPointer(rebasing: bytes[(index + 1)..<(end - 1)])) else { return nil }
                    guard keys.insert(key).inserted else { return .duplicateKey(path: path(frames.dropLast()), key: key) }
                    frames[frames.count - 1] = .object(keys: keys, current: key)
                    expectingKey = false
                }
                index = end
            default:
                // ':', whitespace, numbers and literals say nothing about shape.
                index += 1
            }
        }
        return nil
    }

    /// The path of the value the innermost frame is reading.
    private static func path(_ frames: some Sequence<Frame>) -> String {
        var out = ""
        for frame in frames {
            switch frame {
            case .object(_, let current?): out = JSONPath.join(out, current)
            case .object(_, nil): break
            case .array(let index): out += "[\(index)]"
            }
        }
        return out
    }

    /// The index just past the string that opens at `start`; nil when it never closes.
    private static func stringEnd(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var index = start + 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""): return index + 1
            default: index += 1
            }
        }
        return nil
    }

    /// A key's text with its escapes resolved, so `"a"` and `"\u0061"` are the same key; nil
    /// for an escape JSON does not have (the decoder reports it).
    private static func unescaped(_ raw: UnsafeRawBufferPointer) -> String? {
        guard raw.contains(UInt8(ascii: "\\")) else { return String(decoding: raw, as: UTF8.self) }
        var scalars = String.UnicodeScalarView()
        var text = Array(String(decoding: raw, as: UTF8.self).unicodeScalars)[...]
        while let scalar = text.popFirst() {
            guard scalar == "\\" else { scalars.append(scalar); continue }
            switch text.popFirst() {
            case "\""?: scalars.append("\"")
            case "\\"?: scalars.append("\\")
            case "/"?: scalars.append("/")
            case "b"?: scalars.append("\u{08}")
            case "f"?: scalars.append("\u{0C}")
            case "n"?: scalars.append("\n")
            case "r"?: scalars.append("\r")
            case "t"?: scalars.append("\t")
            case "u"?:
                guard let high = hexUnit(&text) else { return nil }
                if (0xD800..<0xDC00).contains(high) {
                    guard text.popFirst() == "\\", text.popFirst() == "u", let low = hexUnit(&text), (0xDC00..<0xE000).contains(low),
                          let combined = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)) else { return nil }
                    scalars.append(combined)
                } else {
                    guard let single = Unicode.Scalar(high) else { return nil }
                    scalars.append(single)
                }
            default: return nil
            }
        }
        return String(scalars)
    }

    private static func hexUnit(_ text: inout ArraySlice<Unicode.Scalar>) -> UInt32? {
        guard text.count >= 4 else { return nil }
        let digits = String(String.UnicodeScalarView(text.prefix(4)))
        text = text.dropFirst(4)
        return UInt32(digits, radix: 16)
    }
}
