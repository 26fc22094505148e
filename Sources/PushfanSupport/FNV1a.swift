/// FNV-1a, 64 bits: a hash that is the same in every process and run (Swift's `Hasher` is
/// seeded per process), for values several workers must derive alike.
package enum FNV1a {
    /// The hash of no bytes, where every hash starts.
    package static let start: UInt64 = 0xcbf2_9ce4_8422_2325

    package static func hash(_ text: String) -> UInt64 { hash(text, after: start) }

    /// `text`'s bytes hashed on from `state`, the hash of the bytes before them: parts hashed
    /// in turn give the hash of their concatenation, without building it (per device, the
    /// campaign's part is hashed once).
    package static func hash(_ text: String, after state: UInt64) -> UInt64 {
        var hash = state
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
