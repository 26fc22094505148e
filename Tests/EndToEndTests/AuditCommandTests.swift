import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// `pushfan audit` against a real run: a campaign through a `kill -9` passes with its
/// duplicates counted; a contradicting result written onto the topic fails it, by name.
@Suite(.serialized, .timeLimit(.minutes(4))) struct AuditCommandTests {
    @Test("audit passes a campaign that survived kill -9, counts its duplicates, and fails one with a forged result")
    func auditsARealRun() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        try await pipeline.addApp("aud", topic: "com.example.aud", rate: 1_500, devices: 3_000)
        let first = try pipeline.startWorker("a1")
        try pipeline.startWorker("a2")
        try await pipeline.submit(Pipeline.campaign("aud-1", app: "aud"))
        // Kill a sender mid-campaign: its claimed devices move over after the lease.
        _ = await Pipeline.eventually(timeout: .seconds(30)) { pipeline.delivered(topic: "com.example.aud").count > 600 }
        first.signal(SIGKILL)
        let results = try await pipeline.results(of: "aud-1")
        #expect(results.completed?.finished == 3_000)

        let audit = { (extra: [String]) in
            try await CommandLineTool.run(TestBinaries.pushfan, ["audit", "--database", pipeline.database, "--sim-log", pipeline.directory + "/sim.ndjson"]
                + extra + pipeline.kafkaArguments)
        }
        let passed = try await audit(["--campaign", "aud/aud-1"])
        #expect(passed.status == 0, "\(passed.output)\n\(passed.error)")
        let lines = passed.output.split(separator: "\n")
        #expect(lines.first?.hasPrefix("campaign") == true && lines.contains { $0.hasPrefix("aud/aud-1") && $0.contains("completed") && $0.contains("   3000 ") })
        let summary = try #require(lines.last.flatMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) })
        #expect(summary["violations"] == 0 && summary["campaigns"] == 1, "\(summary)")
        let report = try #require(summary["audit"]?.arrayValue?.first)
        #expect(report["devices"] == 3_000 && report["results"] == 3_000)
        #expect((report["apns_duplicates"]?.intValue ?? -1) >= 0 && (report["duplicate_results"]?.intValue ?? -1) >= 0, "\(report)")

        // A result for aud-7 that says failed, written straight onto the topic after the real
        // one: the topic now contradicts the ledger, and the audit says so.
        let forged = #"aud/aud-1/aud-7|{"v":1,"type":"device","app":"aud","campaign":"aud-1","device":"aud-7","outcome":"failed","reason":"forged","attempts":1,"at":1}"#
        try await pipeline.run(["produce", "--topic", TopicNames.defaultResults, "--key-delimiter", "|"] + pipeline.kafkaArguments, input: Data((forged + "\n").utf8))
        let failed = try await audit(["--all"])
        #expect(failed.status == 1, "\(failed.output)")
        #expect(failed.output.contains("✗ 1 results that contradict the ledger (outcome differs): aud-7"), "\(failed.output)")
        #expect(try await audit(["--campaign", "aud/nope"]).status == 2)
        // The same id in another app is another campaign, which does not exist.
        #expect(try await audit(["--campaign", "other/aud-1"]).status == 2)
        // A store that cannot be read is not a violation.
        let (dead, held) = try FreePort.held()
        defer { close(held) }
        let unreadable = try await CommandLineTool.run(TestBinaries.pushfan, ["audit", "--all", "--database", "postgres://127.0.0.1:\(dead)/none"] + pipeline.kafkaArguments)
        #expect(unreadable.status == 2 && unreadable.error.contains("the sources could not be read"), "\(unreadable.status) \(unreadable.error)")
        let bare = try await audit(["--campaign", "aud-1"])
        #expect(bare.status == 2 && bare.error.contains("--campaign: give the campaign as APP/ID"), "\(bare.error)")
    }
}
