/// FNV-1a, 64 bits: a hash that is the same in every process and run (Swift's `Hasher` is
/// seeded per process), for values several workers must derive alike.
package enum FNV1a {
    package static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
