import Foundation
import PushfanMessages
import PushfanTestSupport
import Testing

/// A/B variants through the real pipeline: each device gets its variant's notification on
/// the wire, the holdout gets nothing, results name the variant, and a worker killed with
/// `SIGKILL` mid-campaign changes no device's variant.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct CampaignVariantsTests {
    @Test("variants on the wire and in the results, a holdout skipped, the same variant per device after kill -9 of a sender")
    func variantsThroughACrash() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let count = 6_000
        try await pipeline.addApp("ab", topic: "com.example.ab", rate: 2_000, devices: count)
        // Each variant replaces the texts with its own of a different length, so the size of
        // each request the simulator logged tells which variant it carried.
        let json = #"""
            {"v":1,"id":"ab-1","app":"ab","audience":{"segment":"locale in (en_US, de_DE, fr_FR)"},
             "notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"}}},
             "variants":[{"id":"short","weight":45,"content":{"default":{"title":"A","body":"Short"}}},
                         {"id":"long","weight":35,"content":{"default":{"title":"A much longer title","body":"And a much longer body line"}},"data":{"variant":"long"}}],
             "holdout":20}
            """#
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(json.utf8))
        let api = try await DashboardTests.startAPI(pipeline)
        defer { api.process.signal(SIGTERM) }
        let victim = try pipeline.startWorker("victim", lease: 3)
        try pipeline.startWorker("survivor", lease: 3)
        try await pipeline.submit(json.replacingOccurrences(of: "\n", with: " "))
        let reached = await Pipeline.eventually(timeout: .seconds(60)) { pipeline.delivered(topic: "com.example.ab").count >= count * 3 / 10 }
        #expect(reached, "the campaign never reached 30% of its sends")
        victim.signal(SIGKILL)
        _ = await victim.waitForExit()
        // The survivor takes over the victim's tasks, sends what it had not recorded and emits
        // again what it had: every one of those results must name the same variant.
        let results = try await pipeline.results(of: "ab-1")
        let completed = try #require(results.completed)
        #expect(completed.finished == count)

        // Every device's result names the variant its id gives, or is the holdout's skip.
        var perVariant: [String: Int] = [:]
        for index in 0..<count {
            let device = "ab-\(index)"
            let result = try #require(results.devices[device], "no result for \(device)")
            switch campaign.share(of: device) {
            case .holdout:
                #expect(result.outcome == .skipped && result.reason == "holdout" && result.variant == nil && result.attempts == 0, "\(result)")
                perVariant["holdout", default: 0] += 1
            case .variant(let index):
                #expect(result.outcome == .delivered && result.variant == campaign.variants[index].id, "\(result)")
                perVariant[campaign.variants[index].id, default: 0] += 1
            case .base:
                Issue.record("a campaign with variants gave \(device) the base notification")
            }
        }
        #expect(perVariant.values.reduce(0, +) == count, "per-variant counts add up to the audience: \(perVariant)")
        #expect(abs(Double(perVariant["holdout"] ?? 0) / Double(count) - 0.20) < 0.03, "\(perVariant)")
        #expect(completed.count(of: .skipped) == perVariant["holdout"])
        // The completed event counts per variant, from the ledger: the same split, adding up.
        #expect(completed.variants.mapValues { $0.values.reduce(0, +) } == perVariant, "\(completed.variants)")
        #expect(completed.variants["holdout"] == ["skipped": perVariant["holdout"] ?? -1])
        #expect(completed.variants["long"]?["delivered"] == perVariant["long"])
        // Progress events counted per variant too, never more than the final counts.
        // The dashboard shows the same split, from the completed event.
        let row = try await DashboardTests.waitForRow(api, "ab/ab-1") { $0["status"] as? String == "completed" }
        let shown = (row["variants"] as? [String: [String: Int]] ?? [:]).mapValues { $0.values.reduce(0, +) }
        #expect(shown == perVariant, "dashboard \(shown) vs results \(perVariant)")
        // How many progress events come depends on timing (one per worker per 2 s while it
        // sends; a loaded machine has given none), so each one that counts any outcome is
        // checked: it counts them per variant too.
        let progress = results.events.filter { $0.event == .progress && $0.counts.values.reduce(0, +) > 0 }
        #expect(progress.allSatisfy { !$0.variants.isEmpty }, "a progress event with outcomes but no variants: \(progress)")
        #expect(progress.allSatisfy { event in event.variants.allSatisfy { ($0.value.values.reduce(0, +)) <= (perVariant[$0.key] ?? 0) } })

        // On the wire: no held-out device was sent to, and each request's size is its variant's.
        var deviceOfToken: [String: String] = [:]
        for index in 0..<count { deviceOfToken[Pipeline.token(index)] = "ab-\(index)" }
        var sizes: [String: Set<Int>] = [:]
        for line in pipeline.delivered(topic: "com.example.ab") {
            guard let token = line["token"] as? String, let device = deviceOfToken[token], let bytes = line["payload_bytes"] as? Int else { continue }
            sizes[campaign.variantID(of: device) ?? "holdout", default: []].insert(bytes)
        }
        #expect(sizes["holdout"] == nil, "held-out devices were sent to: \(sizes)")
        #expect(sizes["short"]?.count == 1 && sizes["long"]?.count == 1, "one payload per variant: \(sizes)")
        #expect((sizes["long"]?.first ?? 0) > (sizes["short"]?.first ?? 0) + 30, "\(sizes)")
    }

    @Test("actions with parameters and hidden-preview summary arguments arrive on the wire as documented")
    func actionsOnTheWire() async throws {
        let pipeline = try await Pipeline(simArguments: ["--log-payloads"])
        defer { pipeline.stop() }
        try await pipeline.addApp("act", topic: "com.example.act", rate: 2_000, devices: 50, appArguments: ["--default-category", "ACT_DEFAULT"])
        try pipeline.startWorker("a1")
        let json = #"{"v":1,"id":"act-1","app":"act","audience":{"segment":"locale in (en_US, de_DE, fr_FR)"},"notification":{"push_type":"alert","content":{"default":{"title":"Order shipped","body":"Track it or rate us"}},"aps":{"category":"ORDER_ACTIONS","thread-id":"orders","summary-arg":"Shop","summary-arg-count":1,"interruption-level":"time-sensitive","mutable-content":1},"data":{"order":"o-77"},"actions":[{"id":"track","params":{"url":"shop://orders/o-77"}},{"id":"rate","params":{"stars":5}}]}}"#
        try await pipeline.submit(json)
        let results = try await pipeline.results(of: "act-1")
        #expect(results.completed?.count(of: .delivered) == 50)
        let lines = pipeline.delivered(topic: "com.example.act")
        #expect(lines.count == 50)
        // Every push carries the engagement marker with its device's own send id.
        var deviceOfToken: [String: String] = [:]
        for index in 0..<50 { deviceOfToken[Pipeline.token(index)] = "act-\(index)" }
        var sendIDs: Set<String> = []
        for line in lines {
            let text = try #require(line["payload"] as? String, "no payload logged: \(line)")
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            let device = try #require(deviceOfToken[line["token"] as? String ?? ""], "a token of no device: \(line)")
            let sendID = EngagementMarker.sendID(campaign: CampaignKey(app: "act", id: "act-1"), device: device)
            #expect(payload["pushfan"] as? [String: String] == ["campaign": "act-1", "send_id": sendID], "\(text)")
            sendIDs.insert(sendID)
        }
        #expect(sendIDs.count == 50)
        for line in lines.prefix(5) {
            let text = try #require(line["payload"] as? String, "no payload logged: \(line)")
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            let aps = try #require(payload["aps"] as? [String: Any])
            #expect(aps["category"] as? String == "ORDER_ACTIONS" && aps["thread-id"] as? String == "orders")
            #expect(aps["summary-arg"] as? String == "Shop" && aps["summary-arg-count"] as? Int == 1)
            #expect(aps["interruption-level"] as? String == "time-sensitive" && aps["mutable-content"] as? Int == 1)
            #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Order shipped")
            let params = try #require(payload["action_params"] as? [String: [String: Any]])
            #expect(params["track"]?["url"] as? String == "shop://orders/o-77" && params["rate"]?["stars"] as? Int == 5)
            #expect(payload["order"] as? String == "o-77")
        }

        // A campaign that names no category gets the app's default one; a background push none.
        try await pipeline.submit(Pipeline.campaign("act-2", app: "act"))
        _ = try await pipeline.results(of: "act-2")
        let categories = pipeline.delivered(topic: "com.example.act").suffix(50).compactMap { line -> String? in
            guard let text = line["payload"] as? String, let payload = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return nil }
            return (payload["aps"] as? [String: Any])?["category"] as? String
        }
        #expect(categories.count == 50 && Set(categories) == ["ACT_DEFAULT"], "\(Set(categories))")
    }
}
