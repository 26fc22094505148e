import Foundation
import PushfanMessages
import PushfanTestSupport
import Testing

/// `pushfan send` and `pushfan bench apns` as a user runs them.
@Suite(.serialized) struct SendCommandTests {
    private func pushfan(_ arguments: [String]) async throws -> CommandLineTool.Result {
        try await CommandLineTool.run(TestBinaries.pushfan, arguments)
    }

    private func baseArguments(_ harness: SenderHarness) -> [String] {
        var arguments = [
            "--url", harness.simulator.url, "--team-id", SenderHarness.teamID, "--key-id", SenderHarness.keyID,
            "--key-file", harness.keyFile, "--topic", SenderHarness.topic,
        ]
        if let caFile = harness.simulator.caFile { arguments += ["--ca-file", caFile] }
        return arguments
    }

    private func json(_ text: String) throws -> [String: Any] {
        let line = try #require(text.split(separator: "\n").last)
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test("send prints the acceptance, and a rejection with its reason, disposition and 410 timestamp")
    func sendOutcomes() async throws {
        let gone = SenderHarness.randomToken()
        let harness = try await SenderHarness.start(rules: ["unregistered": [gone.hex: 1_700_000_000_000]])
        defer { harness.stop() }
        let token = SenderHarness.randomToken()
        let accepted = try await pushfan(["send", "--token", token.hex.uppercased(), "--payload", #"{"aps":{"alert":"hi"}}"#,
                                          "--collapse-id", "c1", "--apns-id", "6f1c1fbc-6e9e-4bbd-8c36-1d0a0b0b3c11"] + baseArguments(harness))
        #expect(accepted.status == 0, "\(accepted.error)")
        let acceptedJSON = try json(accepted.output)
        #expect(acceptedJSON["outcome"] as? String == "accepted")
        #expect(acceptedJSON["apns_id"] as? String == "6f1c1fbc-6e9e-4bbd-8c36-1d0a0b0b3c11")
        #expect(harness.acceptedLog()["6f1c1fbc-6e9e-4bbd-8c36-1d0a0b0b3c11"]?["token"] as? String == token.hex)

        let rejected = try await pushfan(["send", "--token", gone.hex, "--payload", #"{"aps":{"alert":"hi"}}"#] + baseArguments(harness))
        #expect(rejected.status == 1)
        let rejectedJSON = try json(rejected.output)
        #expect(rejectedJSON["outcome"] as? String == "rejected")
        #expect(rejectedJSON["status"] as? Int == 410)
        #expect(rejectedJSON["reason"] as? String == "Unregistered")
        #expect(rejectedJSON["disposition"] as? String == "invalidate_token")
        #expect(rejectedJSON["timestamp_ms"] as? Int == 1_700_000_000_000)
        #expect(rejectedJSON["attempts"] as? Int == 1, "a definitive rejection is not retried")
    }

    @Test("send refuses bad input before anything reaches the wire", arguments: [
        (["--payload", #"{"aps":{"alert":"x"#], "payload"),
        (["--payload", #"{"aps":{"alert":""# + String(repeating: "x", count: 4100) + #""}}"#], "4096"),
        (["--payload", #"{"aps":{"alert":"x"}}"#, "--push-type", "background"], "background"),
        (["--payload", #"{"aps":{"alert":"x"}}"#, "--collapse-id", String(repeating: "c", count: 65)], "64"),
        (["--payload", #"{"aps":{"alert":"x"}}"#, "--priority", "7"], "--priority must be 10, 5 or 1"),
        (["--payload", #"{"aps":{"alert":"x"}}"#, "--push-type", "smoke"], "--push-type must be one of"),
        (["--payload", "@/nonexistent.json"], "cannot read payload file"),
    ])
    func sendRejectsBadInput(extra: [String], message: String) async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let result = try await pushfan(["send", "--token", SenderHarness.randomToken().hex] + extra + baseArguments(harness))
        #expect(result.status != 0)
        #expect(result.error.contains(message), "\(result.error)")
        #expect(result.output.isEmpty)
        #expect(try await harness.simulator.stats().count("requests") == 0)
    }

    @Test("send refuses bad credentials and endpoints with a clear message", arguments: [
        (["--team-id", "T", "--key-id", "K"], "token auth needs --team-id, --key-id and --key-file together"),
        (["--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", "/nonexistent.p8"], "cannot read key file /nonexistent.p8"),
        (["--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", "/dev/null", "--cert", "c.pem"], "not both"),
        (["--team-id", "team1", "--key-id", "KEY1234567", "--key-file", "/dev/null"], "--team-id must be Apple's 10-character id"),
        (["--cert-key", "/nonexistent.key"], "--cert is required"),
        ([], "credentials are required"),
        (["--cert", "/nonexistent.pem", "--cert-key", "/nonexistent.key"], "cannot read certificate file"),
        (["--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", "/dev/null", "--url", "ftp://x"], "must look like https://host[:port]"),
        (["--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", "/dev/null", "--port", "8080"], "port 443 or 2197"),
    ])
    func sendRejectsBadSetup(arguments: [String], message: String) async throws {
        let result = try await pushfan(["send", "--token", SenderHarness.randomToken().hex, "--topic", "com.example.app",
                                        "--payload", #"{"aps":{"alert":"x"}}"#] + arguments)
        #expect(result.status != 0)
        #expect(result.error.contains(message), "\(result.error)")
    }

    @Test("bench apns reports its rate and outcome counts as the last line")
    func benchApns() async throws {
        let rejected = SenderHarness.randomToken()
        let harness = try await SenderHarness.start(rules: ["tokens": [rejected.hex: "BadDeviceToken"]], log: false)
        defer { harness.stop() }
        let tokensFile = harness.simulator.directory + "/tokens.txt"
        let accepted = SenderHarness.randomToken()
        try Data("\(accepted.hex)\n\(rejected.hex)\n".utf8).write(to: URL(fileURLWithPath: tokensFile))
        var arguments = ["bench", "apns", "--url", harness.simulator.url, "--count", "2000", "--tokens", tokensFile,
                         "--team-id", SenderHarness.teamID, "--key-id", SenderHarness.keyID, "--key-file", harness.keyFile]
        if let caFile = harness.simulator.caFile { arguments += ["--ca-file", caFile] }
        let result = try await pushfan(arguments)
        #expect(result.status == 0, "\(result.error)")
        let report = try json(result.output)
        #expect(report["bench"] as? String == "apns")
        #expect(report["sent"] as? Int == 2000)
        #expect((report["sent_per_s"] as? Int ?? 0) > 0)
        #expect((report["cpu_us_per_notification"] as? Double ?? 0) > 0)
        let outcomes = try #require(report["outcomes"] as? [String: Int])
        #expect(outcomes == ["accepted": 1000, "rejected:BadDeviceToken": 1000])
        // The warm-up request is counted by the simulator too.
        let stats = try await harness.simulator.stats()
        #expect(stats.count("requests") == 2001, "\(stats)")
    }
}
