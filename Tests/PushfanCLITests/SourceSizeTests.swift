import Foundation
import Testing

/// A room a reader can hold in their head: no Swift file of the product is over 600 lines
/// (the OpenAPI document is JSON in docs/, built in at build time).
@Suite struct SourceSizeTests {
    static let limit = 600

    @Test("no Swift file under Sources/ has more than 600 lines")
    func filesStaySmall() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources")
        let walker = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        var counted = 0
        var over: [String] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            counted += 1
            let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).count
            if lines > Self.limit { over.append("\(url.path.replacingOccurrences(of: sources.path + "/", with: "")): \(lines)") }
        }
        #expect(counted > 100, "found only \(counted) Swift files: the walk went wrong")
        #expect(over.isEmpty, "over \(Self.limit) lines: \(over)")
    }
}
