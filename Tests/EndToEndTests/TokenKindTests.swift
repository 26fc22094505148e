import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport
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

    @Test("tokens by kind over HTTP: a voip campaign goes to voip tokens only, a rejected voip token is invalidated alone and the alert campaign after it reaches every device; bad registrations are refused naming the field; Notificare's Live Activity calls store and end an update token")
    func voipTokensAndTheirRejections() async throws {
        let rules = FileManager.default.temporaryDirectory.appendingPathComponent("kind-rules-\(UUID().uuidString.prefix(6)).json").path
        try #"{"prefixes": {"0bad": "BadDeviceToken"}}"#.write(toFile: rules, atomically: true, encoding: .utf8)
        let pipeline = try await Pipeline(simArguments: ["--rules", rules])
        defer { pipeline.stop() }
        let server = try await APITests.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        // 20 devices with alert tokens; 15 with voip tokens, of which APNs refuses 5.
        func voip(_ index: Int) -> String { (index < 5 ? "0bad" : "7e11") + String(format: "%060x", index) }
        for index in 0..<20 {
            let device = try await server.call("PUT", "/v1/apps/shop/devices/d\(index)", secret: server.application, json: #"{"token":"\#(APITests.token(index))","locale":"en_US"}"#)
            #expect(device.status == 201, "\(device.body)")
            guard index < 15 else { continue }
            let token = try await server.call("PUT", "/v1/apps/shop/devices/d\(index)/tokens/voip", secret: server.application, json: #"{"token":"\#(voip(index))"}"#)
            #expect(token.status == 201 && token.body == #"{"created":true,"device":"d\#(index)","kind":"voip"}"#, "\(token.body)")
        }
        let again = try await server.call("PUT", "/v1/apps/shop/devices/d5/tokens/voip", secret: server.application, json: #"{"token":"\#(voip(5).uppercased())"}"#)
        #expect(again.status == 200 && again.body.contains(#""created":false"#), "\(again.body)")

        // What a caller sees for each mistake; nothing is stored by any of them.
        let refusals: [(path: String, json: String, status: Int, field: String?, says: String)] = [
            ("d1/tokens/pager", #"{"token":"\#(voip(1))"}"#, 400, "kind", "one of voip, liveactivity_start"),
            ("d1/tokens/alert", #"{"token":"\#(voip(1))"}"#, 400, "kind", "the alert token is the device's own"),
            ("d1/tokens/voip", #"{"token":"abc"}"#, 400, "token", "even number of hex digits"),
            ("d1/tokens/voip", #"{}"#, 400, "token", "required"),
            ("d1/tokens/voip", #"{"token":"\#(voip(1))","environment":"prod"}"#, 400, "environment", "production or sandbox"),
            ("d1/tokens/voip", #"{"token":"\#(voip(1))","activity_id":"a-1"}"#, 400, "activity_id", "not a field of a voip token"),
            ("d1/tokens/liveactivity_start", #"{"token":"\#(voip(1))"}"#, 400, "attributes_type", "required"),
            ("d1/tokens/liveactivity_update", #"{"token":"\#(voip(1))","activity_id":"a/b"}"#, 400, "activity_id", "characters of"),
            ("d1/tokens/voip", #"{"token":"\#(voip(1))","expires_at":1700000000}"#, 400, "expires_at", "milliseconds"),
            ("d1/tokens/voip", #"{"token":"\#(voip(1))","attributes_type":"MatchActivity"}"#, 400, "attributes_type", "not a field of a voip token"),
            ("d1/tokens/liveactivity_update", #"{"token":"\#(voip(1))","activity_id":"a-1","attributes_type":"MatchActivity","attributes":{"match":1234}}"#, 400,
             "attributes.match", "expected a string"),
            ("d1/tokens/liveactivity_update", #"{"token":"\#(voip(1))","activity_id":"a-1","attributes":{"match":"1234"}}"#, 400, "attributes",
             "need its attributes_type"),
            ("nobody/tokens/voip", #"{"token":"\#(voip(1))"}"#, 404, nil, "has no device nobody"),
        ]
        for refusal in refusals {
            let answer = try await server.call("PUT", "/v1/apps/shop/devices/" + refusal.path, secret: server.application, json: refusal.json)
            #expect(answer.status == refusal.status && answer.body.contains(refusal.says), "\(refusal.path) \(refusal.json): \(answer.status) \(answer.body)")
            if let field = refusal.field { #expect(answer.body.contains(#""field":"\#(field)""#), "\(refusal.path): \(answer.body)") }
        }
        #expect(try await server.call("GET", "/v1/apps/shop/devices/d1/tokens", secret: server.application).status == 403)
        let listed = try await server.call("GET", "/v1/apps/shop/devices/d1/tokens", secret: server.master)
        #expect(listed.status == 200 && listed.body.contains(#""kind":"voip""#) && !listed.body.contains("liveactivity"), "\(listed.body)")

        try pipeline.startWorker("a")
        try await pipeline.submit(#"{"v":1,"id":"ring","app":"shop","audience":{"segment":"locale = en_US"},"notification":{"push_type":"voip","data":{"call":"c-1"}}}"#)
        let ring = try await pipeline.results(of: "ring")
        #expect(ring.completed?.count(of: .delivered) == 10 && ring.completed?.count(of: .invalidToken) == 5 && ring.completed?.count(of: .skipped) == 5,
                "\(String(describing: ring.completed))")
        #expect(ring.devices["d15"]?.reason == APNsTokenKind.missingTokenReason)
        // Sent to the voip topic, only ever with voip tokens.
        let voipRequests = pipeline.delivered(topic: "com.example.shop.voip")
        #expect(voipRequests.count == 10 && voipRequests.allSatisfy { ($0["token"] as? String)?.hasPrefix("7e11") == true }, "\(voipRequests.prefix(2))")
        let rejected = try await server.call("GET", "/v1/apps/shop/devices/d0/tokens", secret: server.master)
        #expect(rejected.body.contains(#""status":"invalid""#) && rejected.body.contains(#""invalid_reason":"BadDeviceToken""#), "\(rejected.body)")
        let device = try await server.call("GET", "/v1/apps/shop/devices/d0", secret: server.master)
        #expect(device.body.contains(#""status":"active""#), "the rejected voip token left the device alone: \(device.body)")

        try await pipeline.submit(Pipeline.campaign("after-ring", app: "shop", audience: #"{"segment":"locale = en_US"}"#))
        let after = try await pipeline.results(of: "after-ring")
        #expect(after.completed?.count(of: .delivered) == 20, "\(String(describing: after.completed))")
        // A second voip campaign finds the refused tokens invalid: skipped, no request.
        try await pipeline.submit(#"{"v":1,"id":"ring-2","app":"shop","audience":{"segment":"locale = en_US"},"notification":{"push_type":"voip","data":{"call":"c-2"}}}"#)
        let second = try await pipeline.results(of: "ring-2")
        #expect(second.completed?.count(of: .delivered) == 10 && second.completed?.count(of: .skipped) == 10, "\(String(describing: second.completed))")
        #expect(pipeline.delivered(topic: "com.example.shop.voip").count == 20)

        // Notificare's SDK: a Live Activity's update token under the app's activity id, then its end.
        let sdk = ["X-Notificare-SDK-Version: 4.2.3"]
        let started = try await server.call(
            "POST", "/live-activity", secret: server.application, json: #"{"activity":"match-1234","token":"\#(voip(19))","deviceID":"d7","topics":["5E6F"]}"#, headers: sdk)
        #expect(started.status == 200 && started.body == #"{"message":"live activity registered"}"#, "\(started.body)")
        let withActivity = try await server.call("GET", "/v1/apps/shop/devices/d7/tokens", secret: server.master)
        #expect(withActivity.body.contains(#""kind":"liveactivity_update""#) && withActivity.body.contains(#""activity_id":"match-1234""#), "\(withActivity.body)")
        let shown = try await pipeline.run(["devices", "show", "--app", "shop", "--device", "d7", "--database", pipeline.database])
        #expect(shown.output.contains("liveactivity_update") && shown.output.contains("match-1234"), "\(shown.output)")
        let unknownDevice = try await server.call("POST", "/live-activity", secret: server.application, json: #"{"activity":"m","token":"\#(voip(19))","deviceID":"ghost"}"#, headers: sdk)
        #expect(unknownDevice.status == 404, "\(unknownDevice.body)")
        for _ in 0..<2 {
            let ended = try await server.call("DELETE", "/live-activity/match-1234/d7", secret: server.application, headers: sdk)
            #expect(ended.status == 200 && ended.body == #"{"message":"live activity ended"}"#, "\(ended.body)")
        }
        #expect(try await server.call("GET", "/v1/apps/shop/devices/d7/tokens", secret: server.master).body.contains("liveactivity") == false)
        #expect(try await server.call("DELETE", "/v1/apps/shop/devices/d7/tokens/voip", secret: server.application).status == 204)
        #expect(try await server.call("DELETE", "/v1/apps/shop/devices/d7/tokens/voip", secret: server.application).status == 404)
    }

    @Test("Live Activities: a start goes to the push-to-start tokens of its attributes type, an update to exactly the devices following the activity its audience names (an expired token left out), both on the liveactivity topic; an update without an activity, or an activity audience for another push, is refused naming the field")
    func liveActivityStartAndUpdate() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await APITests.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        func token(_ prefix: String, _ index: Int) -> String { prefix + String(format: "%060x", index) }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for index in 0..<30 {
            #expect(try await server.call("PUT", "/v1/apps/shop/devices/d\(index)", secret: server.application, json: #"{"token":"\#(APITests.token(index))","locale":"en_US"}"#).status == 201)
            if index < 20 {
                let start = try await server.call(
                    "PUT", "/v1/apps/shop/devices/d\(index)/tokens/liveactivity_start", secret: server.application,
                    json: #"{"token":"\#(token("5a00", index))","attributes_type":"\#(index < 18 ? "MatchActivity" : "RideActivity")"}"#)
                #expect(start.status == 201, "\(start.body)")
            }
        }
        // Ten devices follow match 1234 (Notificare's call), one of them with a token past its
        // end; five follow another match (the native call).
        for index in 0..<10 {
            let body = #"{"activity":"match-1234","token":"\#(token("a1a1", index))","deviceID":"d\#(index)","topics":["UUID-\#(index)"]}"#
            #expect(try await server.call("POST", "/live-activity", secret: server.application, json: body).status == 200)
        }
        #expect(try await server.call(
            "PUT", "/v1/apps/shop/devices/d9/tokens/liveactivity_update", secret: server.application,
            json: #"{"token":"\#(token("a1a1", 9))","activity_id":"match-1234","expires_at":\#(now - 60_000)}"#).status == 200)
        for index in 10..<15 {
            #expect(try await server.call(
                "PUT", "/v1/apps/shop/devices/d\(index)/tokens/liveactivity_update", secret: server.application,
                json: #"{"token":"\#(token("b2b2", index))","activity_id":"match-99"}"#).status == 201)
        }
        let seconds = now / 1000
        let update = #"{"v":1,"id":"goal","app":"shop","audience":{"activity":"match-1234"},"notification":{"push_type":"liveactivity","aps":{"event":"update","timestamp":\#(seconds),"content-state":{"home":1,"away":0}}},"options":{"priority":5}}"#
        // What a marketing tool sees for an update it cannot address.
        let unaddressed = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: update.replacingOccurrences(of: #"{"activity":"match-1234"}"#, with: #"{"segment":"locale = en_US"}"#))
        #expect(unaddressed.status == 400 && unaddressed.body.contains(#""field":"audience""#) && unaddressed.body.contains("give audience.activity"), "\(unaddressed.body)")
        let misaddressed = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: Pipeline.campaign("wrong", app: "shop", audience: #"{"activity":"match-1234"}"#))
        #expect(misaddressed.status == 400 && misaddressed.body.contains(#""field":"audience.activity""#), "\(misaddressed.body)")

        try pipeline.startWorker("a")
        let start = #"{"v":1,"id":"kickoff","app":"shop","audience":{"segment":"locale = en_US"},"notification":{"push_type":"liveactivity","aps":{"event":"start","timestamp":\#(seconds),"content-state":{"home":0,"away":0},"attributes-type":"MatchActivity","attributes":{"match":"1234"},"alert":{"title":"Kick-off","body":"Match 1234"}}}}"#
        try await pipeline.submit(start)
        let started = try await pipeline.results(of: "kickoff")
        #expect(started.completed?.count(of: .delivered) == 18 && started.completed?.count(of: .skipped) == 12, "\(String(describing: started.completed))")
        let startRequests = pipeline.delivered(topic: "com.example.shop.push-type.liveactivity")
        #expect(startRequests.count == 18 && startRequests.allSatisfy { ($0["token"] as? String)?.hasPrefix("5a00") == true && $0["push_type"] as? String == "liveactivity" },
                "\(startRequests.prefix(2))")

        try await pipeline.submit(update)
        let goal = try await pipeline.results(of: "goal")
        #expect(goal.completed?.audience == 9 && goal.completed?.count(of: .delivered) == 9, "\(String(describing: goal.completed))")
        #expect(Set(goal.devices.keys) == Set((0..<9).map { "d\($0)" }))
        let updates = pipeline.delivered(topic: "com.example.shop.push-type.liveactivity").filter { ($0["token"] as? String)?.hasPrefix("a1a1") == true }
        #expect(updates.count == 9 && updates.allSatisfy { ($0["priority"] as? Int) == 5 }, "\(updates.prefix(2))")
        #expect(pipeline.delivered(topic: "com.example.shop.push-type.liveactivity").allSatisfy { ($0["token"] as? String)?.hasPrefix("b2b2") == false })
    }

    @Test("Live Activities at scale: push-to-start to 10,000 imported devices of MatchActivity; an update by attribute reaches exactly the running activities for that match; an attributes type nobody registered is refused over HTTP (422) and on the topic (failed, naming the field)")
    func liveActivitiesByAttribute() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        func token(_ prefix: String, _ index: Int) -> String { prefix + String(format: "%060x", index) }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        // Every device can start a MatchActivity; 3,000 run one: 1,800 for match 1234 (20 of
        // them already ended), 1,200 for match 777.
        var lines = ""
        for index in 0..<10_000 {
            var tokens = [#"{"kind":"liveactivity_start","token":"\#(token("5a00", index))","attributes_type":"MatchActivity"}"#]
            if index < 3_000 {
                let match = index < 1_800 ? "1234" : "777"
                let ended = index < 20 ? #","expires_at":\#(now - 60_000)"# : ""
                tokens.append(#"{"kind":"liveactivity_update","token":"\#(token("a1a1", index))","activity_id":"act-\#(index)","attributes_type":"MatchActivity","attributes":{"match":"\#(match)","league":"premier"}\#(ended)}"#)
            }
            lines += #"{"device_id":"d\#(index)","token":"\#(Pipeline.token(index))","locale":"en_US","tokens":[\#(tokens.joined(separator: ","))]}"# + "\n"
        }
        let server = try await APITests.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        try lines.write(toFile: pipeline.directory + "/devices.ndjson", atomically: true, encoding: .utf8)
        try await pipeline.run(["devices", "import", "--database", pipeline.database, "--app", "shop", pipeline.directory + "/devices.ndjson"])
        try pipeline.startWorker("a")

        let seconds = now / 1000
        let start = #"{"v":1,"id":"kickoff","app":"shop","audience":{"segment":"locale = en_US"},"notification":{"push_type":"liveactivity","aps":{"event":"start","timestamp":\#(seconds),"content-state":{"home":0,"away":0},"attributes-type":"MatchActivity","attributes":{"match":"1234"},"alert":{"title":"Kick-off","body":"Match 1234"}}}}"#
        let started = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: start)
        #expect(started.status == 202, "\(started.body)")
        let kickoff = try await pipeline.results(of: "kickoff")
        #expect(kickoff.completed?.count(of: .delivered) == 10_000, "\(String(describing: kickoff.completed))")

        let update = #"{"v":1,"id":"goal","app":"shop","audience":{"activities":{"attributes_type":"MatchActivity","attributes":{"match":"1234"}}},"notification":{"push_type":"liveactivity","aps":{"event":"update","timestamp":\#(seconds),"content-state":{"home":1,"away":0}}},"options":{"priority":5}}"#
        let submitted = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: update)
        #expect(submitted.status == 202, "\(submitted.body)")
        let goal = try await pipeline.results(of: "goal")
        #expect(goal.completed?.audience == 1_780 && goal.completed?.count(of: .delivered) == 1_780, "\(String(describing: goal.completed))")
        #expect(Set(goal.devices.keys) == Set((20..<1_800).map { "d\($0)" }))
        let updates = pipeline.delivered(topic: "com.example.shop.push-type.liveactivity").filter { ($0["token"] as? String)?.hasPrefix("a1a1") == true }
        #expect(updates.count == 1_780 && updates.allSatisfy { $0["priority"] as? Int == 5 && $0["push_type"] as? String == "liveactivity" }, "\(updates.prefix(2))")

        // A type nobody registered: what the marketing tool sees, and what a producer writing
        // straight onto the topic gets.
        let typo = update.replacingOccurrences(of: #""attributes_type":"MatchActivity""#, with: #""attributes_type":"MatchActivty""#)
        let refused = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: typo)
        #expect(refused.status == 422 && refused.body.contains(#""code":"unknown_attributes_type""#) && refused.body.contains(#""field":"audience.activities.attributes_type""#)
                && refused.body.contains("MatchActivty"), "\(refused.body)")
        let startTypo = start.replacingOccurrences(of: #""attributes-type":"MatchActivity""#, with: #""attributes-type":"RideActivity""#)
        let refusedStart = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: startTypo)
        #expect(refusedStart.status == 422 && refusedStart.body.contains(#""field":"notification.aps.attributes-type""#), "\(refusedStart.body)")
        try await pipeline.produceRaw([typo.replacingOccurrences(of: #""id":"goal""#, with: #""id":"goal-2""#)], key: "shop/goal-2")
        let events = try await pipeline.readTopic(TopicNames.defaultResults, timeout: .seconds(60), into: [CampaignEvent]()) { events, record in
            if case .campaign(let event)? = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)), event.campaign == "goal-2" { events.append(event) }
            return events.contains { $0.event == .failed }
        }
        let failed = try #require(events.first { $0.event == .failed })
        #expect(failed.error?.contains("audience.activities.attributes_type: no device of app shop registered an update token of attributes type \"MatchActivty\"") == true, "\(failed)")
    }
}
