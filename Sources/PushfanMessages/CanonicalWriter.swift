import PushfanSupport

/// The steps of the hand-written record forms (`VersionedMessage.canonicalJSON`): literals
/// (the keys, in sorted order, with their punctuation), strings escaped as JSON requires,
/// integers, `null` for what is absent. `CanonicalReader` reads the same form back.
struct CanonicalWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func literal(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func string(_ value: String?) {
        if let value { JSONWriter.writeString(value, into: &bytes) } else { literal("null") }
    }

    /// Text that is already JSON (a number's spelling).
    mutating func text(_ json: String) { bytes.append(contentsOf: json.utf8) }

    mutating func integer(_ value: Int64?) {
        if let value { bytes.append(contentsOf: String(value).utf8) } else { literal("null") }
    }

    mutating func integer(_ value: Int?) { integer(value.map(Int64.init)) }

    mutating func strings(_ values: [String]) { array(values) { $0.string($1) } }

    mutating func integers(_ values: [Int64]) { array(values) { $0.integer($1) } }

    private mutating func array<Element>(_ values: [Element], _ element: (inout CanonicalWriter, Element) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            element(&self, value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Keys in `JSONEncoder`'s `.sortedKeys` order: by their UTF-8 bytes (`String`'s own order
    /// compares normalized text, and differs for keys not in NFC).
    static func sorted(_ keys: some Sequence<String>) -> [String] {
        keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// An object of integers, its keys sorted.
    mutating func counts(_ values: [String: Int]) {
        bytes.append(UInt8(ascii: "{"))
        for (index, key) in Self.sorted(values.keys).enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(key)
            bytes.append(UInt8(ascii: ":"))
            integer(values[key])
        }
        bytes.append(UInt8(ascii: "}"))
    }
}
