import Foundation
import Testing

/// Rules the test suites keep about themselves, checked on their source: a check that is
/// wrapped so that its failure is expected cannot fail, and hides what it was meant to show.
@Suite struct TestHonestyTests {
    /// Every Swift file under Tests/.
    static func testSources() throws -> [(path: String, text: String)] {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        guard let walker = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil) else { return [] }
        var sources: [(String, String)] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            sources.append((url.path.replacingOccurrences(of: tests.path + "/", with: ""), try String(contentsOf: url, encoding: .utf8)))
        }
        return sources
    }

    @Test("no test hides a check by expecting it to fail as a known issue: a known problem is fixed or written in an issue, not expected by the suite")
    func noKnownIssueWrappers() throws {
        let sources = try Self.testSources()
        #expect(sources.count > 50, "found only \(sources.count) test files: the walk went wrong")
        // Built from pieces, so that this file does not name what it looks for.
        let wrapper = "withKnown" + "Issue"
        let offenders = sources.filter { $0.text.contains(wrapper) }.map(\.path)
        #expect(offenders.isEmpty, "\(wrapper) in \(offenders)")
    }
}
