import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// Erasure and export with real processes: a user with three devices, tokens of another
/// kind, an alias, a message sent with an idempotency key, a capped campaign and an open
/// counted; the export shows all of it; after the erasure a dump of the whole database
/// names none of the devices, tokens or the alias, the export is gone, a tombstone is on the
/// results and events topics, both calls are in the operator log, and a later campaign
/// reaches only the other user's device.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ErasureTests {
    static let adminToken = "erasure-admin-token-0123456789"

    @Test("erasing a user removes every row naming its devices and tokens on both databases, writes tombstones, and a later campaign does not reach them", arguments: [false, true])
    func eraseUser(postgres: Bool) async throws {
        let pipeline = try await Pipeline(postgres: postgres)
        defer { pipeline.stop() }
        let server = try await APITests.start(pipeline, adminToken: Self.adminToken)
        defer { server.process.signal(SIGTERM) }
        try await pipeline.run(["apps", "set-caps", "--database", pipeline.database, "--app", "shop", "--caps", "10/1d"])
        let devices = ["erase-phone", "erase-tablet", "erase-watch"]
        let tokens = ["feed0001" + String(repeating: "a", count: 56), "feed0002" + String(repeating: "b", count: 56), "feed0003" + String(repeating: "c", count: 56)]
        let voip = "feed0004" + String(repeating: "d", count: 56)
        for (device, token) in zip(devices, tokens) {
            let body = #"{"token":"\#(token)","user_id":"erase-user-42","tags":["vip"],"attributes":{"first_name":"Ada"}}"#
            #expect(try await server.call("PUT", "/v1/apps/shop/devices/\(device)", secret: server.application, json: body).status == 201)
        }
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/erase-phone/tokens/voip", secret: server.application, json: #"{"token":"\#(voip)"}"#).status == 201)
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/keeper", secret: server.application, json: #"{"token":"\#(APITests.token(70))","user_id":"7"}"#).status == 201)
        #expect(try await server.call("PUT", "/v1/apps/shop/users/erase-user-42/aliases", secret: server.master, json: #"{"crm_id":"erase-crm-42"}"#).status == 200)
        try pipeline.startWorker("e1")

        // A message with an idempotency key, a capped campaign, an open counted.
        let message = try await server.call(
            "POST", "/v1/apps/shop/messages", secret: server.master, json: #"{"recipients":{"users":["erase-user-42"]},"notification":{"push_type":"alert","content":{"default":{"body":"Shipped"}}}}"#,
            headers: ["Idempotency-Key: erase-order-1"])
        #expect(message.status == 202 && message.body.contains("erase-phone"), "\(message.body)")
        let messageID = try #require((try JSONSerialization.jsonObject(with: Data(message.body.utf8)) as? [String: Any])?["message"] as? String)
        #expect(try await pipeline.results(of: messageID).completed?.count(of: .delivered) == 3)
        let campaign = #"{"v":1,"id":"erase-c","app":"shop","audience":{"segment":"user:erase-user-42"},"notification":{"push_type":"alert","content":{"default":{"body":"Sale"}}}}"#
        #expect(try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign).status == 202)
        #expect(try await pipeline.results(of: "erase-c").completed?.count(of: .delivered) == 3)
        let sendID = EngagementMarker.sendID(campaign: CampaignKey(app: "shop", id: "erase-c"), device: "erase-phone")
        let event = #"{"events":[{"kind":"opened","device_id":"erase-phone","campaign":"erase-c","send_id":"\#(sendID)","at":\#(Int64(Date().timeIntervalSince1970 * 1000))}]}"#
        #expect(try await server.call("POST", "/v1/apps/shop/events", secret: server.application, json: event).status == 202)
        var counted = false
        for _ in 0..<100 where !counted {
            counted = try await server.call("GET", "/v1/apps/shop/campaigns/erase-c/stats", secret: server.master).body.contains(#""opened":{"devices":1,"events":1}"#)
            if !counted { try await Task.sleep(for: .milliseconds(200)) }
        }
        let stats = try await server.call("GET", "/v1/apps/shop/campaigns/erase-c/stats", secret: server.master).body
        #expect(counted, "the open was counted: \(stats)")

        // The export: everything kept about the user.
        let export = try await server.call("GET", "/v1/apps/shop/users/erase-user-42/export", secret: server.master)
        #expect(export.status == 200, "\(export.body)")
        for fragment in devices + tokens + [voip, "erase-crm-42", #""campaign":"erase-c""#, #""campaign":"\#(messageID)""#, #""kind":"opened""#, #""frequency_pushes":[{"#] {
            #expect(export.body.contains(fragment), "the export has \(fragment): \(export.body.prefix(600))")
        }
        #expect(try await server.call("GET", "/v1/apps/shop/users/erase-user-42/export", secret: server.application).status == 403)
        #expect(try await server.call("DELETE", "/v1/apps/shop/users/erase-user-42", secret: server.application).status == 403, "the application secret ships in the app")

        let erased = try await server.call("DELETE", "/v1/apps/shop/users/erase-user-42", secret: server.master)
        #expect(erased.status == 200 && erased.body.contains(#""erased":true"#) && devices.allSatisfy { erased.body.contains($0) }, "\(erased.body)")

        // No row anywhere names the devices, their tokens or the alias.
        let dump = try await Self.dump(pipeline, postgres: postgres)
        #expect(dump.contains("keeper"), "the dump is the database's")
        for fragment in devices + tokens + [voip, "erase-crm-42"] {
            #expect(!dump.contains(fragment), "the database still names \(fragment): \(dump.split(separator: "\n").filter { $0.contains(fragment) }.prefix(5))")
        }
        #expect(try await server.call("GET", "/v1/apps/shop/users/erase-user-42/export", secret: server.master).status == 404)
        #expect(try await server.call("GET", "/v1/apps/shop/users/erase-user-42", secret: server.master).status == 404)
        #expect(try await server.call("DELETE", "/v1/apps/shop/users/erase-user-42", secret: server.master).status == 404)
        // The idempotent retry still answers, and sends nothing.
        let retry = try await server.call(
            "POST", "/v1/apps/shop/messages", secret: server.master, json: #"{"recipients":{"users":["erase-user-42"]},"notification":{"push_type":"alert","content":{"default":{"body":"Shipped"}}}}"#,
            headers: ["Idempotency-Key: erase-order-1"])
        #expect(retry.status == 202 && retry.body.contains("erased") && !retry.body.contains("erase-phone"), "\(retry.body)")

        // Tombstones on both topics.
        for topic in [TopicNames.defaultResults, TopicNames.defaultEvents] {
            let tombstone = try await pipeline.readTopic(topic, timeout: .seconds(30), into: nil as ErasureRecord?) { found, record in
                found = try? MessageCodec.decode(ErasureRecord.self, from: Data(record.value))
                return found != nil
            }
            #expect(tombstone?.user == "erase-user-42" && tombstone?.devices.sorted() == devices.sorted(), "\(topic): \(String(describing: tombstone))")
        }

        // A later campaign to everyone reaches the other user's device only.
        let before = pipeline.delivered(topic: "com.example.shop").count
        let everyone = #"{"v":1,"id":"erase-after","app":"shop","audience":{"segment":"tag:vip or not tag:vip"},"notification":{"push_type":"alert","content":{"default":{"body":"Hi"}}}}"#
        #expect(try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: everyone).status == 202)
        let after = try await pipeline.results(of: "erase-after")
        #expect(Array(after.devices.keys) == ["keeper"], "\(after.devices.keys)")
        #expect(pipeline.delivered(topic: "com.example.shop").dropFirst(before).allSatisfy { !tokens.contains($0["token"] as? String ?? "") })

        // One device, then the operator log has both kinds of call.
        #expect(try await server.call("POST", "/v1/apps/shop/devices/keeper/erase", secret: server.application).status == 403)
        let device = try await server.call("POST", "/v1/apps/shop/devices/keeper/erase", secret: server.master)
        #expect(device.status == 200 && device.body.contains(#""erased":true"#), "\(device.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/devices/keeper", secret: server.master).status == 404)
        #expect(try await server.call("POST", "/v1/apps/shop/devices/keeper/erase", secret: server.master).status == 404)
        let log = try await server.call("GET", "/v1/admin/operator-log?app=shop", headers: ["Authorization: Bearer \(Self.adminToken)"])
        for action in ["GET /v1/apps/{app}/users/{user}/export", "DELETE /v1/apps/{app}/users/{user}", "POST /v1/apps/{app}/devices/{device}/erase"] {
            #expect(log.body.contains(action), "the operator log has \(action): \(log.body.suffix(800))")
        }
    }

    /// The whole database as text: `sqlite3 .dump` or `pg_dump`.
    static func dump(_ pipeline: Pipeline, postgres: Bool) async throws -> String {
        let result = postgres
            ? try await CommandLineTool.run("pg_dump", ["--data-only", pipeline.database])
            : try await CommandLineTool.run("sqlite3", [String(pipeline.database.dropFirst("sqlite:".count)), ".dump"])
        guard result.status == 0 else { throw TestFailure("dump failed: \(result.error)") }
        return result.output
    }
}
