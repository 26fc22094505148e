import Foundation
import PushfanTestSupport
import Testing

/// `pushfan demo`, the README's main job, as a user runs it.
@Suite struct DemoTests {
    @Test("the demo's round trip works and every matching device is sent once, in its locale")
    func demoRunsEndToEnd() async throws {
        let result = try await CommandLineTool.run(TestBinaries.pushfan, ["demo", "--devices", "2100", "--partitions", "2"])
        #expect(result.status == 0, "\(result.error)")
        let output = result.output
        #expect(output.contains("==> round trip complete"))
        // 2,100 devices: a third carry tag sale-alerts, three of seven locales match.
        let sent = try #require(output.split(separator: "\n").first { $0.contains("sent to an APNs simulator") })
        #expect(sent.contains("300 devices, 300 accepted"), "\(sent)")
        #expect(output.contains("accepted by locale: de_DE 100, en_US 100, fr_FR 100"), "\(output)")
        #expect(output.contains("the simulator saw 300 requests, 300 distinct tokens, 0 duplicates"), "\(output)")
    }
}
