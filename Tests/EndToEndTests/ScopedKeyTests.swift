import Foundation
import PushfanMessages
import PushfanTestSupport
import Testing

extension APITests {
    @Test("scoped keys: a campaigns:write key of one app submits and controls that app's campaigns and nothing else, a read-only key reads and changes nothing, revoking stops a key at once; keys made over HTTP and with the CLI, shown once, logged by id")
    func scopedKeys() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, adminToken: "scoped-keys-admin-token-01234")
        defer { server.process.signal(SIGTERM) }
        _ = try await pipeline.run([
            "apps", "add", "--database", pipeline.database, "--app", "news", "--topic", "com.example.news", "--team-id", "TEAM000001",
            "--key-id", "KEY0000001", "--key-file", pipeline.keyFile,
        ])
        let admin = ["Authorization: Bearer scoped-keys-admin-token-01234"]
        func bearer(_ token: String) -> [String] { ["Authorization: Bearer \(token)"] }
        func made(_ answer: (status: Int, headers: [String: String], body: String)) throws -> (id: String, key: String) {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any], "\(answer.body)")
            return (object["id"] as? String ?? "", object["key"] as? String ?? "")
        }
        let writerAnswer = try await server.call("POST", "/v1/admin/keys", json: #"{"name":"crm for shop","role":"campaigns:write","app":"shop"}"#, headers: admin)
        #expect(writerAnswer.status == 201 && writerAnswer.headers["location"]?.hasPrefix("/v1/admin/keys/") == true, "\(writerAnswer.body)")
        let writer = try made(writerAnswer)
        #expect(writer.key.hasPrefix("pfk_\(writer.id)_"))
        // Bad keys: each a 400 naming the field, nothing made.
        for (json, field) in [(#"{"name":"x","role":"god"}"#, "role"), (#"{"name":"x","role":"campaigns:write"}"#, "app"), (#"{"name":"x","role":"admin","app":"shop"}"#, "app"), (#"{"role":"admin"}"#, "name")] {
            let bad = try await server.call("POST", "/v1/admin/keys", json: json, headers: admin)
            #expect(bad.status == 400 && bad.body.contains(#""field":"\#(field)""#), "\(json): \(bad.body)")
        }
        // The campaigns:write key: that app's campaigns, and nothing else.
        let submitted = try await server.call("POST", "/v1/apps/shop/campaigns", json: Pipeline.campaign("keyed-1", app: "shop"), headers: bearer(writer.key))
        #expect(submitted.status == 202, "\(submitted.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/campaigns", headers: bearer(writer.key)).status == 200)
        let otherApp = try await server.call("POST", "/v1/apps/news/campaigns", json: Pipeline.campaign("keyed-2", app: "news"), headers: bearer(writer.key))
        #expect(otherApp.status == 403 && otherApp.body.contains("campaigns:write for shop"), "\(otherApp.body)")
        #expect(try await server.call("GET", "/v1/admin/apps", headers: bearer(writer.key)).status == 403, "no admin routes")
        #expect(try await server.call("GET", "/v1/apps/shop/devices/d1", headers: bearer(writer.key)).status == 401, "no device routes")
        #expect(try await server.call("PUT", "/v1/apps/shop/templates/t", json: #"{"category":"X"}"#, headers: bearer(writer.key)).status == 401, "no templates")
        // The read-only key, made with the CLI: reads, changes nothing.
        let cli = try await pipeline.run(["keys", "add", "--database", pipeline.database, "--name", "ops dashboard", "--role", "read-only"])
        let reader = try #require(cli.output.split(separator: " ").last.map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(try await server.call("GET", "/v1/admin/apps", headers: bearer(reader)).status == 200)
        #expect(try await server.call("GET", "/v1/admin/operator-log", headers: bearer(reader)).status == 200)
        #expect(try await server.call("GET", "/dashboard/state", headers: bearer(reader)).status == 200)
        #expect(try await server.call("PUT", "/v1/admin/apps/shop/rate", json: #"{"rate":5}"#, headers: bearer(reader)).status == 403)
        #expect(try await server.call("POST", "/v1/admin/keys", json: #"{"name":"x","role":"admin"}"#, headers: bearer(reader)).status == 403)
        // Listed without secrets; a wrong secret under a real id is a 401.
        let listed = try await server.call("GET", "/v1/admin/keys", headers: admin)
        #expect(listed.body.contains(#""role":"campaigns:write""#) && listed.body.contains(#""name":"ops dashboard""#) && !listed.body.contains(writer.key), "\(listed.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/campaigns", headers: bearer("pfk_\(writer.id)_" + String(repeating: "0", count: 64))).status == 401)
        // Revoked: at once, over HTTP; and the CLI sees it.
        #expect(try await server.call("DELETE", "/v1/admin/keys/\(writer.id)", headers: admin).status == 200)
        #expect(try await server.call("GET", "/v1/apps/shop/campaigns", headers: bearer(writer.key)).status == 401)
        #expect(try await server.call("DELETE", "/v1/admin/keys/\(writer.id)", headers: admin).status == 404)
        let keys = try await pipeline.run(["keys", "list", "--database", pipeline.database])
        #expect(keys.output.split(separator: "\n").count == 2 && keys.output.contains(#""revoked_at":null"#) && !keys.output.contains(#""id":"\#(writer.id)","name":"crm for shop","revoked_at":null"#))
        // The operator log names the key by id, never by its secret.
        let log = try await server.call("GET", "/v1/admin/operator-log?app=shop", headers: admin)
        #expect(log.body.contains("key \(writer.id) (crm for shop, campaigns:write)") && !log.body.contains(writer.key), "\(log.body)")
    }
}
