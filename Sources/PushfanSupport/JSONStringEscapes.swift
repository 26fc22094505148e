/// JSON's string escapes (RFC 8259, section 7) resolved, for the readers that read JSON from
/// its bytes (`JSONValue.parsedFast`, the device import reader).
package enum JSONStringEscapes {
    /// The bytes between a string's quotes, which hold no raw control character, as the
    /// string's UTF-8 bytes; nil for an escape JSON does not have, or a `\u` surrogate that is
    /// not half of a pair. Whether the result is valid UTF-8 is the caller's to check.
    package static func resolve(_ raw: UnsafeRawBufferPointer) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var at = 0
        func hex4() -> UInt32? {
            guard at + 4 <= raw.count else { return nil }
            var value: UInt32 = 0
            for byte in raw[at..<(at + 4)] {
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            at += 4
            return value
        }
        while at < raw.count {
            let byte = raw[at]
            at += 1
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                continue
            }
            guard at < raw.count else { return nil }
            let escape = raw[at]
            at += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard var scalar = hex4() else { return nil }
                if (0xD800...0xDBFF).contains(scalar) {
                    guard at + 2 <= raw.count, raw[at] == UInt8(ascii: "\\"), raw[at + 1] == UInt8(ascii: "u") else { return nil }
                    at += 2
                    guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let unicode = Unicode.Scalar(scalar) else { return nil }
                out.append(contentsOf: UTF8.encode(unicode)!)
            default: return nil
            }
        }
        return out
    }
}
