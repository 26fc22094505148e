import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// Personalised texts through the whole stack: each device's payload as the simulator
/// received it, a device whose rendered payload is too large, and refusals at submission
/// and at planning.
@Suite(.serialized, .timeLimit(.minutes(4))) struct CampaignPersonalisationTests {
    @Test("each device gets its own texts; one whose rendered payload is too large ends rejected and the campaign goes on")
    func perDeviceTexts() async throws {
        let pipeline = try await Pipeline(simArguments: ["--log-payloads"])
        defer { pipeline.stop() }
        let bio = String(repeating: "ü", count: 2_200)
        try await pipeline.addApp("tpl", topic: "com.example.tpl", rate: 2_000, devices: 30, fields: { index in
            switch index {
            case 8: #""app_version":"3.1","attributes":{"first_name":"Long","bio":"\#(bio)"}"#
            case let index where index % 3 == 0: #""app_version":"3.1""#
            default: #""app_version":"3.\#(index % 2)","attributes":{"first_name":"name \"\#(index)\"","points":\#(index * 10)}"#
            }
        })
        try pipeline.startWorker("t1")
        let json = #"{"v":1,"id":"tpl-1","app":"tpl","audience":{"segment":"locale in (en_US, de_DE, fr_FR)"},"notification":{"push_type":"alert","content":{"default":{"title":"Hi {{ attr.first_name | default: \"there\" | upcase }}","subtitle":"{{ attr.bio }}","body":"{{ attr.points | default: \"no\" }} points on {{ device.app_version }}"},"locales":{"de":{"title":"Hallo {{ attr.first_name | default: \"du\" }}","body":"{{ attr.points | default: \"keine\" }} Punkte"}}},"data":{"profile":"app://u/{{ device.id }}"}}}"#
        try await pipeline.submit(json)
        let results = try await pipeline.results(of: "tpl-1")
        #expect(results.completed?.count(of: .delivered) == 29)
        #expect(results.completed?.count(of: .rejected) == 1)
        let rejected = try #require(results.devices["tpl-8"])
        #expect(rejected.outcome == .rejected && rejected.reason == "payload_too_large" && rejected.attempts == 0, "\(rejected)")

        let lines = pipeline.delivered(topic: "com.example.tpl")
        #expect(lines.count == 29)
        var seen = 0
        for line in lines {
            let token = try #require(line["token"] as? String)
            let index = try #require((0..<30).first { Pipeline.token($0) == token })
            let text = try #require(line["payload"] as? String)
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            let alert = try #require((payload["aps"] as? [String: Any])?["alert"] as? [String: Any])
            #expect(payload["profile"] as? String == "app://u/tpl-\(index)")
            let german = index % 3 == 1
            switch (index % 3 == 0, german) {
            case (true, _):
                #expect(alert["title"] as? String == "Hi THERE" && alert["body"] as? String == "no points on 3.1", "\(alert)")
            case (false, true):
                #expect(alert["title"] as? String == "Hallo name \"\(index)\"" && alert["body"] as? String == "\(index * 10) Punkte", "\(alert)")
            case (false, false):
                #expect(alert["title"] as? String == "Hi NAME \"\(index)\"" && alert["body"] as? String == "\(index * 10) points on 3.\(index % 2)", "\(alert)")
            }
            #expect(alert["subtitle"] == nil, "an empty rendering leaves the field out: \(alert)")
            seen += 1
        }
        #expect(seen == 29)
    }

    @Test("a placeholder that does not parse is refused by pushfan submit and by the planner, naming the field")
    func refusedWithTheField() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        try await pipeline.addApp("tpl", topic: "com.example.tpl", rate: 2_000, devices: 3)
        try pipeline.startWorker("t1")
        let bad = #"{"v":1,"id":"tpl-bad","app":"tpl","audience":{"segment":"locale = en_US"},"notification":{"push_type":"alert","content":{"default":{"title":"Hi","body":"Hi {{ user.name }}"}}}}"#
        let file = pipeline.directory + "/bad.json"
        try bad.write(toFile: file, atomically: true, encoding: .utf8)
        let submitted = try await CommandLineTool.run(TestBinaries.pushfan, ["submit", file] + pipeline.kafkaArguments)
        #expect(submitted.status != 0)
        #expect(submitted.error.contains("notification.content.default.body: at 7: unknown variable 'user.name'; expected device.id"), "\(submitted.error)")

        // Straight onto the topic: the planner refuses it before any device is reached.
        try await pipeline.produceRaw([bad], key: "tpl-bad")
        let letters = try await pipeline.readTopic(TopicNames.defaultDeadletter, timeout: .seconds(60), into: [DeadLetterRecord]()) { letters, record in
            if let letter = try? MessageCodec.decode(DeadLetterRecord.self, from: Data(record.value)), letter.key == "tpl-bad" { letters.append(letter) }
            return !letters.isEmpty
        }
        let letter = try #require(letters.first)
        #expect(letter.error == "invalid_field", "\(letter)")
        #expect(letter.reason.contains("notification.content.default.body: at 7: unknown variable 'user.name'"), "\(letter.reason)")
        #expect(pipeline.delivered(topic: "com.example.tpl").isEmpty)
    }
}
