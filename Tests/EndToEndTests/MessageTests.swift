import Foundation
import PushfanMessages
import Testing

import PushfanTestSupport

/// Transactional messages with real processes: sent to a user's devices by id, alias or
/// device while a campaign of the same app is sending, one result per device, a device APNs
/// called unregistered reported as such, and every refusal as the client sees it.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MessageTests {
    static let notification = #"{"push_type":"alert","content":{"default":{"title":"Order shipped","body":"On its way to {{ device.id }}"}}}"#

    @Test("a message to a user of 3 devices, one of which APNs calls unregistered, sent while a campaign of the app runs: one result per device, the dead one invalid and reported by the next message; unknown recipients reported; bad input refused", arguments: [false, true])
    func messages(postgres: Bool) async throws {
        let rules = FileManager.default.temporaryDirectory.appendingPathComponent("message-rules-\(UUID().uuidString.prefix(6)).json").path
        try #"{"prefixes": {"dea0": "Unregistered"}}"#.write(toFile: rules, atomically: true, encoding: .utf8)
        let pipeline = try await Pipeline(simArguments: ["--rules", rules, "--log-payloads"], postgres: postgres)
        defer { pipeline.stop() }
        let server = try await APITests.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        try await pipeline.addApp("news", topic: "com.example.news", rate: 1_000, devices: 1)
        func post(_ json: String, secret: String? = nil, headers: [String] = []) async throws -> (status: Int, body: String, object: [String: Any]) {
            let answer = try await server.call("POST", "/v1/apps/shop/messages", secret: secret ?? server.master, json: json, headers: headers)
            let object = (try? JSONSerialization.jsonObject(with: Data(answer.body.utf8))) as? [String: Any] ?? [:]
            return (answer.status, answer.body, object)
        }
        for (device, token, user) in [("phone", APITests.token(1), "42"), ("tablet", APITests.token(2), "42"), ("old", "dea0" + APITests.token(3).dropFirst(4), "42"), ("seven", APITests.token(7), "7")] {
            let registered = try await server.call("PUT", "/v1/apps/shop/devices/\(device)", secret: server.application, json: #"{"token":"\#(token)","user_id":"\#(user)"}"#)
            #expect(registered.status == 201, "\(registered.body)")
        }
        #expect(try await server.call("PUT", "/v1/apps/shop/users/7/aliases", secret: server.master, json: #"{"crm_id":"C-7"}"#).status == 200)

        // A campaign of 2,000 other devices of the app at 100/s: twenty seconds of sending, so
        // the message has most of them to finish in even on a loaded machine.
        var lines = ""
        for index in 0..<2_000 { lines += #"{"device_id":"bulk-\#(index)","token":"\#(String(format: "b%063x", index))","locale":"fr_FR"}"# + "\n" }
        try lines.write(toFile: pipeline.directory + "/bulk.ndjson", atomically: true, encoding: .utf8)
        try await pipeline.run(["devices", "import", "--database", pipeline.database, "--app", "shop", pipeline.directory + "/bulk.ndjson"])
        try pipeline.startWorker("m1")
        let campaign = try await server.call(
            "POST", "/v1/apps/shop/campaigns", secret: server.master,
            json: #"{"v":1,"id":"sale","app":"shop","audience":{"segment":"locale = fr_FR"},"notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"}}},"options":{"rate":100}}"#)
        #expect(campaign.status == 202, "\(campaign.body)")
        #expect(await Pipeline.eventually(timeout: .seconds(60)) { pipeline.delivered(topic: "com.example.shop").count >= 100 }, "the campaign is sending")

        // The message goes out beside the campaign: its devices are all final while the campaign still runs.
        let first = try await post(#"{"recipients":{"users":["42"]},"notification":\#(Self.notification)}"#)
        #expect(first.status == 202 && first.object["devices"] as? Int == 3, "\(first.body)")
        let id = try #require(first.object["message"] as? String)
        #expect(id.hasPrefix("msg-"))
        let results = try await pipeline.results(of: id, timeout: .seconds(60))
        // Told by the simulator's receive times, not by when this test gets to look: the
        // campaign still sent after the message's last device reached APNs.
        let messageReached = try #require(
            pipeline.delivered(topic: "com.example.shop").filter { $0["collapse_id"] as? String == id }.compactMap { $0["time_ms"] as? Int }.max())
        #expect(
            await Pipeline.eventually(timeout: .seconds(60)) {
                pipeline.delivered(topic: "com.example.shop").contains { $0["collapse_id"] as? String == "sale" && ($0["time_ms"] as? Int ?? 0) > messageReached }
            }, "the campaign was still sending when the message reached APNs")
        #expect(results.completed?.finished == 3 && results.devices.count == 3)
        #expect(results.devices["phone"]?.outcome == .delivered && results.devices["tablet"]?.outcome == .delivered, "\(results.devices)")
        #expect(results.devices["old"]?.outcome == .invalidToken, "\(String(describing: results.devices["old"]))")
        let sent = pipeline.delivered(topic: "com.example.shop").filter { $0["collapse_id"] as? String == id }
        #expect(Set(sent.compactMap { $0["token"] as? String }) == [APITests.token(1), APITests.token(2)])
        let phonePayload = sent.first { $0["token"] as? String == APITests.token(1) }?["payload"] as? String ?? ""
        #expect(phonePayload.contains("On its way to phone"), "personalised per device: \(phonePayload)")
        let read = try await server.call("GET", "/v1/apps/shop/messages/\(id)", secret: server.master)
        #expect(read.status == 200 && read.body.contains(#""delivered":2"#) && read.body.contains(#""invalid_token":1"#), "\(read.body)")

        // Now the dead device is reported and not sent; an alias, a device and unknowns in one message.
        let second = try await post(
            #"{"recipients":{"users":["42","nobody"],"aliases":{"crm_id":["C-7","C-0"]},"devices":["phone","news-0","missing"]},"notification":\#(Self.notification),"options":{"collapse_id":"order-1"}}"#)
        #expect(second.status == 202 && second.object["devices"] as? Int == 3, "phone, tablet and seven, phone once: \(second.body)")
        #expect(second.body.contains(#"{"devices":["phone","tablet"],"not_sent":[{"device":"old","status":"invalid"}],"user":"42"}"#), "\(second.body)")
        #expect(second.body.contains(#""error":"unknown_user""#) && second.body.contains(#""error":"unknown_alias""#), "\(second.body)")
        #expect(second.body.contains(#"{"device":"news-0","error":"unknown_device""#), "another app's device is unknown here: \(second.body)")
        let secondID = try #require(second.object["message"] as? String)
        let secondResults = try await pipeline.results(of: secondID, timeout: .seconds(60))
        #expect(Set(secondResults.devices.keys) == ["phone", "tablet", "seven"] && secondResults.records == 3, "\(secondResults.devices.keys)")
        #expect(pipeline.delivered(topic: "com.example.shop").filter { $0["collapse_id"] as? String == "order-1" }.count == 3)

        // Idempotency: the same key and body answer the first message; another body is a conflict.
        let keyed = #"{"recipients":{"devices":["seven"]},"notification":\#(Self.notification)}"#
        let once = try await post(keyed, headers: ["Idempotency-Key: order-2"])
        let again = try await post(keyed, headers: ["Idempotency-Key: order-2"])
        #expect(once.status == 202 && again.status == 202 && once.object["message"] as? String == again.object["message"] as? String, "\(again.body)")
        let reused = try await post(#"{"recipients":{"devices":["phone"]},"notification":\#(Self.notification)}"#, headers: ["Idempotency-Key: order-2"])
        #expect(reused.status == 409 && reused.body.contains(#""code":"idempotency_key_reused""#), "\(reused.body)")

        // Refusals, each naming what is wrong; none sends anything.
        let users = (0...1_000).map { "\"u\($0)\"" }.joined(separator: ",")
        let refusals: [(String, Int, String, String?)] = [
            (#"{"recipients":{"users":[\#(users)]},"notification":\#(Self.notification)}"#, 400, "too_many_recipients", "recipients"),
            (#"{"recipients":{},"notification":\#(Self.notification)}"#, 400, "no_recipients", "recipients"),
            (#"{"recipients":{"users":["nobody"],"devices":["news-0"]},"notification":\#(Self.notification)}"#, 422, "no_reachable_devices", nil),
            (#"{"recipients":{"users":["42"]},"notification":{"push_type":"alert"}}"#, 400, "invalid_field", "notification.content.default"),
            (#"{"recipients":{"users":["42"]},"notification":\#(Self.notification),"options":{"send_at":1}}"#, 400, "invalid_input", "options.send_at"),
            (#"{"recipients":{"users":["42"]},"notification":\#(Self.notification),"audience":{"segment":"x"}}"#, 400, "invalid_input", "audience"),
            (#"{"recipients":{"users":["42"]},"notification":{"push_type":"alert","template":"none","content":{"default":{"body":"Hi"}}}}"#, 422, "unknown_template", "notification.template"),
        ]
        for (body, status, code, field) in refusals {
            let refused = try await post(body)
            #expect(refused.status == status && refused.body.contains(#""code":"\#(code)""#), "\(code): \(refused.body)")
            if let field { #expect(refused.body.contains(#""field":"\#(field)""#), "\(code): \(refused.body)") }
        }
        let unreachable = try await post(#"{"recipients":{"users":["nobody"]},"notification":\#(Self.notification)}"#)
        #expect(unreachable.body.contains(#""recipients":[{"error":"unknown_user""#), "the refusal says why, per recipient: \(unreachable.body)")
        let noVoIPToken = try await post(#"{"recipients":{"devices":["seven"]},"notification":{"push_type":"voip","data":{"call":"1"}}}"#)
        #expect(
            noVoIPToken.status == 422 && noVoIPToken.body.contains(#""code":"no_reachable_devices""#)
                && noVoIPToken.body.contains(#"{"device":"seven","devices":[],"not_sent":[{"device":"seven","reason":"no_token_for_push_type","status":"active"}]}"#),
            "a VoIP message to a device without a VoIP token: \(noVoIPToken.body)")
        #expect(try await post(keyed, secret: server.application).status == 403, "the application secret ships in the app: it sends nothing")
        let otherApp = try await server.call("POST", "/v1/apps/news/messages", secret: server.master, json: keyed)
        #expect(otherApp.status == 401 || otherApp.status == 403, "shop's secret is not news's: \(otherApp.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/messages/sale", secret: server.master).status == 404, "a campaign is not a message")
    }
}
