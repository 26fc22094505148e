import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// Stored templates through the whole stack: saved with `pushfan templates set`, named by a
/// campaign that overrides part of it, and read off the wire at the simulator.
@Suite(.serialized, .timeLimit(.minutes(4))) struct StoredTemplateTests {
    @Test("a stored template's actions, summary and media arrive on the wire; the campaign's own keys win; an unknown one is refused")
    func templateOnTheWire() async throws {
        let pipeline = try await Pipeline(simArguments: ["--log-payloads"])
        defer { pipeline.stop() }
        try await pipeline.addApp("tmpl", topic: "com.example.tmpl", rate: 2_000, devices: 20)
        try pipeline.startWorker("t1")
        let file = pipeline.directory + "/order-update.json"
        try #"{"category":"ORDER_ACTIONS","media_url":"https://cdn.example/box.jpg","thread_id":"orders","summary_arg":"Shop","summary_arg_count":1,"interruption_level":"time-sensitive","actions":[{"id":"track","params":{"url":"shop://orders"}},{"id":"rate","params":{"stars":5}}]}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let saved = try await pipeline.run(["templates", "set", "--database", pipeline.database, "--app", "tmpl", "--name", "order-update", file])
        #expect(saved.output.contains("template order-update saved for app tmpl"))

        // What a user sees for a bad template: the field and the rule; nothing saved.
        let bad = pipeline.directory + "/bad.json"
        try #"{"media_url":"http://cdn.example/box.jpg"}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try await CommandLineTool.run(TestBinaries.pushfan, ["templates", "set", "--database", pipeline.database, "--app", "tmpl", "--name", "bad", bad])
        #expect(refused.status == 1 && refused.error.contains("media_url: must be an https URL") && refused.error.contains("nothing was saved"), "\(refused.error)")
        let listed = try await pipeline.run(["templates", "list", "--database", pipeline.database, "--app", "tmpl"])
        #expect(listed.output.hasPrefix("order-update\t{\"actions\":[") && !listed.output.contains("bad"), "\(listed.output)")

        let json = #"{"v":1,"id":"tmpl-1","app":"tmpl","audience":{"segment":"locale in (en_US, de_DE, fr_FR)"},"notification":{"push_type":"alert","template":"order-update","content":{"default":{"title":"Order shipped","body":"Track it"}},"aps":{"thread-id":"order-77"}}}"#
        try await pipeline.submit(json)
        let results = try await pipeline.results(of: "tmpl-1")
        #expect(results.completed?.count(of: .delivered) == 20)
        let lines = pipeline.delivered(topic: "com.example.tmpl")
        #expect(lines.count == 20)
        for line in lines.prefix(3) {
            let text = try #require(line["payload"] as? String)
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            let aps = try #require(payload["aps"] as? [String: Any])
            #expect(aps["category"] as? String == "ORDER_ACTIONS" && aps["thread-id"] as? String == "order-77", "the campaign's thread-id wins: \(aps)")
            #expect(aps["summary-arg"] as? String == "Shop" && aps["summary-arg-count"] as? Int == 1)
            #expect(aps["interruption-level"] as? String == "time-sensitive" && aps["mutable-content"] as? Int == 1)
            #expect(payload["media_url"] as? String == "https://cdn.example/box.jpg")
            let params = try #require(payload["action_params"] as? [String: [String: Any]])
            #expect(params["track"]?["url"] as? String == "shop://orders" && params["rate"]?["stars"] as? Int == 5)
        }

        // A campaign naming a template the app does not have: refused at planning, visibly.
        let unknown = #"{"v":1,"id":"tmpl-2","app":"tmpl","audience":{"segment":"locale = en_US"},"notification":{"push_type":"alert","template":"nope","content":{"default":{"body":"Hi"}}}}"#
        try await pipeline.produceRaw([unknown], key: "tmpl-2")
        let events = try await pipeline.readTopic(TopicNames.defaultResults, timeout: .seconds(60), into: [CampaignEvent]()) { events, record in
            if case .campaign(let event)? = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)), event.campaign == "tmpl-2" { events.append(event) }
            return events.contains { $0.event == .failed }
        }
        let failed = try #require(events.first { $0.event == .failed })
        #expect(failed.error?.contains("notification.template: app tmpl has no template \"nope\"") == true, "\(failed)")
        #expect(pipeline.delivered(topic: "com.example.tmpl").count == 20)
    }
}
