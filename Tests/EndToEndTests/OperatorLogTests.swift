import Foundation
import PushfanMessages
import PushfanTestSupport
import Testing

extension APITests {
    @Test("the operator log: app management, campaign submission and control, templates are each logged with who, from where, what and the outcome; device registration and reads are not; over HTTP and in pushfan operator-log")
    func operatorCallsAreLogged() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, adminToken: "operator-log-admin-token-0123", extra: ["--trusted-proxy", "127.0.0.1"])
        defer { server.process.signal(SIGTERM) }
        let admin = ["Authorization: Bearer operator-log-admin-token-0123", "X-Forwarded-For: 192.0.2.44"]
        let created = try await server.call(
            "POST", "/v1/admin/apps",
            json: #"{"app":"news","topic":"com.example.news","team_id":"TEAM000002","key_id":"KEY0000002","key_file":"\#(pipeline.keyFile)"}"#, headers: admin)
        #expect(created.status == 201)
        #expect(try await server.call("PUT", "/v1/admin/apps/news/rate", json: #"{"rate":77}"#, headers: admin).status == 200)
        #expect(try await server.call("PUT", "/v1/admin/apps/nope/rate", json: #"{"rate":77}"#, headers: admin).status == 404)
        // Reads and the apps' own device traffic are not operator calls.
        #expect(try await server.call("GET", "/v1/admin/apps", headers: admin).status == 200)
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/d1", secret: server.application, json: #"{"token":"\#(Self.token(1))"}"#).status == 201)
        // Refused authentication is not logged here (the request log and the lockout see it).
        #expect(try await server.call("PUT", "/v1/admin/apps/news/rate", json: #"{"rate":1}"#, headers: ["Authorization: Bearer wrong-wrong-wrong-wrong"]).status == 401)
        let submitted = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: Pipeline.campaign("logged-1", app: "shop"))
        #expect(submitted.status == 202, "\(submitted.body)")
        #expect(try await server.call("PUT", "/v1/apps/shop/templates/sale", secret: server.master, json: #"{"category":"SALE"}"#).status == 201)

        let read = try await server.call("GET", "/v1/admin/operator-log", headers: admin)
        #expect(read.status == 200, "\(read.body)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(read.body.utf8)) as? [String: Any])["entries"] as? [[String: Any]] ?? []
        let lines = entries.map { "\($0["actor"] ?? "")|\($0["client"] ?? "")|\($0["action"] ?? "")|\($0["app"] ?? "")|\($0["target"] ?? "")|\($0["status"] ?? "")" }
        #expect(lines == [
            "admin token|192.0.2.44|POST /v1/admin/apps|news|created=/v1/admin/apps/news|201",
            "admin token|192.0.2.44|PUT /v1/admin/apps/{app}/rate|news||200",
            "admin token|192.0.2.44|PUT /v1/admin/apps/{app}/rate|nope||404",
            "app shop (master secret)|127.0.0.1|POST /v1/apps/{app}/campaigns|shop|created=/v1/apps/shop/campaigns/logged-1|202",
            "app shop (master secret)|127.0.0.1|PUT /v1/apps/{app}/templates/{name}|shop|name=sale|201",
        ], "\(lines)")
        #expect(!read.body.contains(server.master) && !read.body.contains("operator-log-admin-token"), "no secret in the log")
        // Paged, filtered, and the same from the command line.
        let first = entries.first?["seq"] as? Int ?? 0
        let paged = try await server.call("GET", "/v1/admin/operator-log?after=\(first)&limit=1&app=news", headers: admin)
        #expect(paged.body.contains(#""action":"PUT /v1/admin/apps/{app}/rate""#) && paged.body.contains(#""next":"#), "\(paged.body)")
        #expect(try await server.call("GET", "/v1/admin/operator-log?limit=0", headers: admin).status == 400)
        #expect(try await server.call("GET", "/v1/admin/operator-log", secret: server.master).status == 401, "an app's secret does not read the log")
        #expect(try await server.call("DELETE", "/v1/admin/operator-log", headers: admin).status == 405, "nothing removes entries")
        let cli = try await pipeline.run(["operator-log", "--database", pipeline.database, "--app", "shop"])
        let cliLines = cli.output.split(separator: "\n")
        #expect(cliLines.count == 2 && cliLines[0].contains(#""target":"created=/v1/apps/shop/campaigns/logged-1""#), "\(cli.output)")
        // Entries are committed in groups; the store's metrics still name the call that wrote them.
        let metrics = try await server.call("GET", "/metrics").body
        #expect(metrics.contains(#"pushfan_store_call_duration_seconds_count{call="OperatorLog.append"}"#), "\(metrics.prefix(1500))")
        #expect(!metrics.contains("GroupCommit."), "a group's commit is named by its caller")
    }
}
