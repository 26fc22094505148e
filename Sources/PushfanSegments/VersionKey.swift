/// Order-preserving text keys for numeric version strings.
///
/// Versions such as `2.3`, `2.10.1` or `17.4.1` do not sort as text (`"2.10" <
/// "2.9"`) and do not compare equal when written with a different number of
/// components (`2.3` and `2.3.0` are the same release). The key fixes both: every
/// component is zero-padded to ``componentDigits`` digits and missing components
/// count as 0, so comparing two keys as plain bytes gives the version order, in
/// Swift, in SQLite (BINARY collation) and in PostgreSQL (`COLLATE "C"`).
///
/// The device store keeps this key next to the raw version (`app_version_key`,
/// `os_version_key`); segment comparisons such as `app_version >= 2.3` compile to
/// comparisons of those columns, and the reference evaluator compares the same
/// keys, so both sides agree by construction.
///
/// Anything that is not 1 to ``maxComponents`` dot-separated groups of ASCII
/// digits (a pre-release suffix, a leading `v`, spaces, a component above
/// 999999) has no key: such a device behaves like one without a version.
package enum VersionKey {
    /// Most components a version may have (`major.minor.patch.build`).
    package static let maxComponents = 4
    /// Width of each padded component; also the most significant digits a
    /// component may have.
    package static let componentDigits = 6

    /// The key of `version`, or nil when it is not a plain numeric version.
    ///
    /// `key("2.3") == key("2.3.0") == "000002.000003.000000.000000"`, and
    /// `key("2.10")! > key("2.9")!`. Leading zeros in a component are ignored
    /// (`2.03` is `2.3`).
    package static func key(_ version: String) -> String? {
        var components: [Int] = []
        components.reserveCapacity(maxComponents)
        var value = 0
        var significantDigits = 0
        var sawDigit = false
        for byte in version.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                sawDigit = true
                let digit = Int(byte - UInt8(ascii: "0"))
                if significantDigits == 0 && digit == 0 { continue }
                significantDigits += 1
                guard significantDigits <= componentDigits else { return nil }
                value = value * 10 + digit
            case UInt8(ascii: "."):
                // An empty component (`2..3`, `.5`) is not a version.
                guard sawDigit, components.count < maxComponents - 1 else { return nil }
                components.append(value)
                value = 0
                significantDigits = 0
                sawDigit = false
            default:
                return nil
            }
        }
        guard sawDigit else { return nil }
        components.append(value)
        while components.count < maxComponents { components.append(0) }
        // Written digit by digit: formatting and joining strings cost a tenth of an import.
        var key = [UInt8](repeating: UInt8(ascii: "0"), count: maxComponents * (componentDigits + 1) - 1)
        for (index, component) in components.enumerated() {
            var remaining = component
            var position = index * (componentDigits + 1) + componentDigits - 1
            while remaining > 0 {
                key[position] = UInt8(ascii: "0") + UInt8(remaining % 10)
                remaining /= 10
                position -= 1
            }
            if index > 0 { key[index * (componentDigits + 1) - 1] = UInt8(ascii: ".") }
        }
        return String(decoding: key, as: UTF8.self)
    }
}
