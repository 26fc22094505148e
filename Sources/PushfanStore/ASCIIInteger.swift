/// Decimal integers read straight from bytes (an optional `-`, then digits), for the
/// per-row paths that would otherwise make a `String` only to parse it: PostgreSQL's text
/// results and numbers in import lines. Nil for anything else or a value outside Int64.
enum ASCIIInteger {
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        var index = 0
        let negative = !bytes.isEmpty && bytes[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < bytes.count else { return nil }
        var magnitude: UInt64 = 0
        while index < bytes.count {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(digit))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = sum
            index += 1
        }
        if negative { return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }
}
