import Testing

@testable import PushfanStore

/// The order a poll's engagement rows go into SQLite's B-trees: a permutation, close to the
/// keys' byte order, equal keys in their order (which of two equal device lines is "first"
/// must not change with the order).
@Suite struct KeyOrderTests {
    private static func order(_ items: [(String, String)]) -> [Int] {
        KeyOrder.indices(items, group: \.0, by: <, text: \.1)
    }

    @Test("groups in order, then the texts' bytes after what they all share, then arrival")
    func orders() {
        let items = [("b", "device-0003"), ("a", "device-0002"), ("b", "device-0001"), ("a", "device-0002"), ("a", "device-0001")]
        #expect(Self.order(items) == [4, 1, 3, 2, 0])
    }

    @Test("texts alike in their first 8 bytes after the shared part keep their arrival order; short texts sort first")
    func onlyEightBytes() {
        let items = [("a", "p-12345678-z"), ("a", "p-12345678-a"), ("a", "p-1"), ("a", "p-")]
        #expect(Self.order(items) == [3, 2, 0, 1])
    }

    @Test("every index once, whatever the texts")
    func permutation() {
        var generator = SystemRandomNumberGenerator()
        let items = (0..<500).map { _ in (["x", "y", ""].randomElement(using: &generator)!, String(UInt64.random(in: 0...999_999, using: &generator), radix: 16)) }
        #expect(Self.order(items).sorted() == Array(items.indices))
        #expect(Self.order([]) == [])
        #expect(Self.order([("a", "ü✓")]) == [0])
    }
}
