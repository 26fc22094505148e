import Foundation
import PushfanCore
import PushfanTestSupport
import Testing

/// A push goes only to a token of its own kind, with real workers: devices registered with
/// their alert token only are skipped by a VoIP or widgets campaign without a request, and
/// stay reachable by the alert campaign after it (a VoIP push to an alert token is answered
/// DeviceTokenNotForTopic, which used to invalidate the alert token).
@Suite(.serialized, .timeLimit(.minutes(5)))
struct TokenKindTests {
    @Test("a voip and a widgets campaign to devices with only alert tokens: each device skipped no_token_for_push_type, no request; an alert campaign after them reaches every device")
    func pushOfAnotherKindNeverReachesTheAlertToken() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let count = 300
        try await pipeline.addApp("calls", topic: "com.example.calls", rate: 20_000, devices: count)
        try pipeline.startWorker("a")
        let kinds = [
            ("calls-voip", #"{"push_type":"voip","data":{"call":"c-1"}}"#),
            ("calls-widgets", #"{"push_type":"widgets","aps":{"content-changed":true}}"#),
        ]
        for (id, notification) in kinds {
            try await pipeline.submit(#"{"v":1,"id":"\#(id)","app":"calls","audience":{"segment":"locale in (en_US, de_DE, fr_FR)"},"notification":\#(notification)}"#)
            let results = try await pipeline.results(of: id)
            let completed = try #require(results.completed, "\(id) never completed")
            #expect(completed.count(of: .skipped) == count, "\(id): \(completed)")
            #expect(results.devices.count == count)
            #expect(results.devices.values.allSatisfy { $0.outcome == .skipped && $0.reason == APNsTokenKind.missingTokenReason },
                    "\(id): \(Set(results.devices.values.map { "\($0.outcome) \($0.reason ?? "")" }))")
        }
        let before = try await pipeline.sim.stats()["requests"] as? Int ?? -1
        #expect(before == 0, "\(before) requests for pushes no device has a token for")

        try await pipeline.submit(Pipeline.campaign("calls-alert", app: "calls"))
        let alert = try await pipeline.results(of: "calls-alert")
        #expect(alert.completed?.count(of: .delivered) == count, "\(String(describing: alert.completed))")
        #expect(pipeline.delivered(topic: "com.example.calls").count == count)
        let list = try await pipeline.run(["devices", "list", "--app", "calls", "--limit", "1000", "--database", pipeline.database])
        #expect(!list.output.contains("invalid"), "\(list.output.prefix(600))")
        // Nothing for the repair to restore; an unknown app is named.
        let repair = try await pipeline.run(["devices", "repair-tokens", "--app", "calls", "--database", pipeline.database])
        #expect(repair.output.contains("0 device(s) invalidated by a push of another kind; nothing changed"), "\(repair.output)")
        let unknown = try await CommandLineTool.run(TestBinaries.pushfan, ["devices", "repair-tokens", "--app", "nobody", "--database", pipeline.database])
        #expect(unknown.status == 1 && unknown.error.contains("no app nobody in the store"), "\(unknown.error)")
    }
}
