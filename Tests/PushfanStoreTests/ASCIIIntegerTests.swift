import Testing
@testable import PushfanStore

/// The in-place integer reader agrees with `Int64(String)` on every edge.
@Suite struct ASCIIIntegerTests {
    @Test(arguments: [
        "0", "7", "-7", "1700000000000", "9223372036854775807", "-9223372036854775808",
        "9223372036854775808", "-9223372036854775809", "99999999999999999999", "", "-", "12a", " 1", "1.5",
    ])
    func agreesWithTheStandardLibrary(_ text: String) {
        let parsed = Array(text.utf8).withUnsafeBytes { ASCIIInteger.parse($0) }
        #expect(parsed == Int64(text), "\(text)")
    }

    @Test func aPlusSignIsNotADigit() {
        // Int64("+1") is 1, but neither JSON nor PostgreSQL's output writes a plus sign.
        #expect(Array("+1".utf8).withUnsafeBytes { ASCIIInteger.parse($0) } == nil)
    }
}
