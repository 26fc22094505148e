import Testing

@testable import PushfanMessages
@testable import PushfanSegments

@Suite("VersionKey")
struct SegmentVersionKeyTests {
    @Test(arguments: [
        ("2.3", "000002.000003.000000.000000"),
        ("2.10.1", "000002.000010.000001.000000"),
        ("17.4.1", "000017.000004.000001.000000"),
        ("1.2.3.4", "000001.000002.000003.000004"),
        ("0", "000000.000000.000000.000000"),
        ("2.03", "000002.000003.000000.000000"),
        ("999999.0000001", "999999.000001.000000.000000"),
    ])
    func keys(_ version: String, _ key: String) {
        #expect(VersionKey.key(version) == key)
    }

    @Test(arguments: [
        "", ".", "2.", ".2", "2..3", "1.2.3.4.5", "v2.3", "2.3-beta", "2.3b", " 2.3", "2.3 ", "1234567", "2.1000000",
        "-1", "+1", "2,3", "\u{0664}.\u{0665}", "２.３",
    ])
    func refusesWhatIsNotANumericVersion(_ version: String) {
        #expect(VersionKey.key(version) == nil)
    }

    @Test(arguments: [("2.3", "2.3.0"), ("2.3", "2.3.0.0"), ("2", "2.0"), ("2.03", "2.3"), ("10.0", "010.00.0")])
    func equalVersionsHaveEqualKeys(_ left: String, _ right: String) {
        #expect(VersionKey.key(left) == VersionKey.key(right))
    }

    /// Sorting by key gives version order, which plain text order does not.
    @Test func keysSortInVersionOrder() throws {
        let ordered = ["0.9", "1", "1.0.0.1", "1.0.1", "1.2", "1.10", "2.3", "2.9", "2.9.1", "2.10", "2.10.1", "10.0", "17.4.1", "999999"]
        let keys = try ordered.map { try #require(VersionKey.key($0)) }
        #expect(keys == keys.sorted())
        #expect(Set(keys).count == keys.count)
        for (lower, higher) in zip(keys, keys.dropFirst()) {
            #expect(ByteOrder.compare(lower, higher) < 0)
        }
        #expect("2.10" < "2.9", "plain text order is wrong, which is why the key exists")
    }
}
