import Foundation
import PushfanTestSupport
import Testing

/// `pushfan demo`, the README's main job, as a user runs it.
@Suite struct DemoTests {
    @Test("the demo delivers its campaign through two workers: one outcome per matching device, failures classified")
    func demoDeliversTheCampaign() async throws {
        let result = try await CommandLineTool.run(TestBinaries.pushfan, ["demo", "--devices", "3000", "--partitions", "2"])
        #expect(result.status == 0, "\(result.error)")
        let output = result.output
        // 3,000 devices: a third carry tag sale-alerts and three of seven locales match: 428
        // devices, 6 of whose tokens the simulator treats as unregistered or bad.
        #expect(output.contains("428 matching devices"), "\(output)")
        #expect(output.contains("==> campaign completed"), "\(output)")
        let lines = output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
        #expect(lines.contains { $0.hasPrefix("delivered 422 ") }, "\(output)")
        #expect(lines.contains { $0.hasPrefix("invalid_token 6 ") }, "\(output)")
        #expect(lines.contains("total 428"), "\(output)")
        #expect(output.contains("the simulator accepted 422 distinct tokens with 0 duplicates"), "\(output)")
        #expect(output.contains("token hygiene: 6 devices invalidated"), "\(output)")
    }
}
