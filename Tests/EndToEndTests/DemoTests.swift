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
        #expect(output.contains("live dashboard: http://admin:"), "\(output)")
    }

    @Test("with --stay the demo's live dashboard shows the finished campaign until SIGTERM")
    func demoDashboardStays() async throws {
        let demo = try ManagedProcess(TestBinaries.pushfan, ["demo", "--devices", "3000", "--partitions", "2", "--stay"], name: "demo")
        guard let output = await demo.waitForOutput(timeout: .seconds(120), { $0.contains("Ctrl-C to stop") }),
              let line = output.split(separator: "\n").first(where: { $0.contains("live dashboard: ") }),
              let url = line.split(separator: " ").first(where: { $0.hasPrefix("http://admin:") })
        else { throw TestFailure("the demo did not stay with its dashboard: \(demo.standardOutput) \(demo.standardError.suffix(1000))") }
        // What the dashboard counted from the results topic: the demo's 428 devices.
        let stateURL = url.replacingOccurrences(of: "/dashboard", with: "/dashboard/state")
        var row: [String: Any]?
        for _ in 0..<100 {
            let state = try await CommandLineTool.run("curl", ["-sf", stateURL])
            let object = try? JSONSerialization.jsonObject(with: Data(state.output.utf8)) as? [String: Any]
            row = (object?["campaigns"] as? [[String: Any]])?.first
            // Completed (the ledger's count) and every device result counted.
            if row?["status"] as? String == "completed", (row?["outcomes"] as? [String: Int])?.values.reduce(0, +) == 428 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(row?["status"] as? String == "completed" && row?["done"] as? Int == 428, "\(String(describing: row))")
        #expect((row?["outcomes"] as? [String: Int])?["delivered"] == 422)
        demo.signal(SIGTERM)
        let status = await demo.waitForExit(timeout: .seconds(30))
        let crash = demo.standardError.components(separatedBy: "\n").filter { $0.contains("Fatal") || $0.contains("crashed") || $0.contains(" at /") }
        #expect(status == 0, "the demo did not stop cleanly on SIGTERM: \(crash.prefix(40).joined(separator: "\n"))")
    }
}
