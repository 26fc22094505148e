import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// Broadcast channels (iOS 18) through the whole stack: the API creates a channel at the
/// simulator with the app's credentials, a Live Activity update campaign addressed to it is
/// one broadcast request and one result, and every wrong call is refused naming why.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct BroadcastTests {
    static func update(_ id: String, app: String = "shop", audience: String, extra: String = "") -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return #"{"v":1,"id":"\#(id)","app":"\#(app)","audience":\#(audience),"notification":{"push_type":"liveactivity","aps":{"event":"update","timestamp":\#(now),"content-state":{"home":2,"away":1}}}\#(extra)}"#
    }

    @Test("a channel made over HTTP at the simulator; an update to it is one broadcast and one result; another app's id is 404; a deleted channel is refused by name")
    func channelLifecycle() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        var apns = ["--url", pipeline.sim.url]
        if let caFile = pipeline.sim.caFile { apns += ["--ca-file", caFile] }
        let server = try await APITests.start(pipeline, extra: apns)
        defer { server.process.signal(SIGTERM) }
        let news = try await pipeline.run([
            "apps", "add", "--database", pipeline.database, "--app", "news", "--topic", "com.example.news", "--team-id", "TEAM000001",
            "--key-id", "KEY0000001", "--key-file", pipeline.keyFile,
        ]).output
        let newsMaster = news.split(separator: "\n").first { $0.hasPrefix("master secret: ") }.map { String($0.dropFirst("master secret: ".count)) } ?? ""

        let created = try await server.call("POST", "/v1/apps/shop/channels", secret: server.master, json: #"{"message_storage_policy":"most_recent"}"#)
        #expect(created.status == 201, "\(created.body)")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(created.body.utf8)) as? [String: Any])
        let id = try #require(body["channel_id"] as? String)
        #expect(body["message_storage_policy"] as? String == "most_recent" && body["environment"] as? String == "production", "\(body)")
        let encoded = try #require(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        #expect(created.headers["location"] == "/v1/apps/shop/channels/\(encoded)")
        #expect(try await pipeline.sim.stats()["channels"] as? Int == 1)
        let listed = try await server.call("GET", "/v1/apps/shop/channels", secret: server.master)
        let channels = (try JSONSerialization.jsonObject(with: Data(listed.body.utf8)) as? [String: Any])?["channels"] as? [[String: Any]]
        #expect(listed.status == 200 && channels?.map { $0["channel_id"] as? String } == [id], "\(listed.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/channels/\(encoded)", secret: server.master).status == 200)

        // What a caller gets wrong, and another tenant.
        let refusals: [(status: Int, code: String, answer: (status: Int, headers: [String: String], body: String))] = [
            (400, "invalid_field", try await server.call("POST", "/v1/apps/shop/channels", secret: server.master, json: #"{"message_storage_policy":"forever"}"#)),
            (400, "unknown_field", try await server.call("POST", "/v1/apps/shop/channels", secret: server.master, json: #"{"push_type":"LiveActivity"}"#)),
            (403, "forbidden", try await server.call("POST", "/v1/apps/shop/channels", secret: server.application, json: "{}")),
            (404, "not_found", try await server.call("GET", "/v1/apps/news/channels/\(encoded)", secret: newsMaster, app: "news")),
            (404, "not_found", try await server.call("DELETE", "/v1/apps/news/channels/\(encoded)", secret: newsMaster, app: "news")),
            (422, "unknown_channel", try await server.call("POST", "/v1/apps/news/campaigns", secret: newsMaster, app: "news", json: Self.update("n-1", app: "news", audience: #"{"channel":"\#(id)"}"#))),
            (400, "invalid_field", try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: #"{"v":1,"id":"s-alert","app":"shop","audience":{"channel":"\#(id)"},"notification":{"push_type":"alert","content":{"default":{"body":"Goal"}}}}"#)),
            (400, "invalid_field", try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: Self.update("s-ab", audience: #"{"channel":"\#(id)"}"#, extra: #","variants":[{"id":"a","weight":1,"content":{"default":{"body":"A"}}},{"id":"b","weight":1,"content":{"default":{"body":"B"}}}]"#))),
            (400, "invalid_field", try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: Self.update("s-bad", audience: #"{"channel":"not base64!"}"#))),
        ]
        for (status, code, answer) in refusals {
            #expect(answer.status == status && answer.body.contains(#""code":"\#(code)""#), "expected \(status) \(code): \(answer.status) \(answer.body)")
        }
        #expect(try await pipeline.sim.stats()["channels"] as? Int == 1, "a refused call made no channel")

        try pipeline.startWorker("w")
        let submitted = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: Self.update("score-1", audience: #"{"channel":"\#(id)"}"#))
        #expect(submitted.status == 202, "\(submitted.body)")
        let results = try await pipeline.results(of: "score-1")
        #expect(results.completed?.count(of: .delivered) == 1, "\(String(describing: results.completed))")
        let result = try #require(results.devices[id], "\(results.devices.keys)")
        #expect(result.broadcast && result.outcome == .delivered && result.attempts == 1)
        let stats = try await pipeline.sim.stats()
        #expect((stats["broadcasts"] as? [String: Int]) == [id: 1] && stats["distinct_tokens_accepted"] as? Int == 0, "\(stats)")

        let deleted = try await server.call("DELETE", "/v1/apps/shop/channels/\(encoded)", secret: server.master)
        #expect(deleted.status == 204, "\(deleted.body)")
        #expect(try await pipeline.sim.stats()["channels"] as? Int == 0)
        #expect(try await server.call("GET", "/v1/apps/shop/channels/\(encoded)", secret: server.master).status == 404)
        let again = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: Self.update("score-2", audience: #"{"channel":"\#(id)"}"#))
        #expect(again.status == 422 && again.body.contains("has no broadcast channel"), "\(again.body)")
        // Straight onto the topic: the planner refuses it the same way.
        try await pipeline.produceRaw([Self.update("score-3", audience: #"{"channel":"\#(id)"}"#)], key: "shop/score-3")
        let events = try await pipeline.readTopic(TopicNames.defaultResults, timeout: .seconds(60), into: [CampaignEvent]()) { events, record in
            if case .campaign(let event)? = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)), event.campaign == "score-3" { events.append(event) }
            return events.contains { $0.event == .failed }
        }
        let failed = try #require(events.first { $0.event == .failed })
        #expect(failed.error?.contains("audience.channel: app shop has no broadcast channel") == true, "\(failed)")
        #expect((try await pipeline.sim.stats()["broadcasts"] as? [String: Int]) == [id: 1], "nothing more was broadcast")
    }
}
