import Foundation
import Testing

import PushfanTestSupport

/// Users over HTTP, as a client and an attacker holding the application secret see them: a
/// user's devices across registrations, linking that needs the device's own token, aliases
/// that name one user, segments by user, and other apps' users out of reach.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct UserTests {
    @Test("users over HTTP: devices join a user by registration or link, only a device's own token moves it with the application secret, aliases name one user, user: segments count them, another app sees none", arguments: [false, true])
    func users(postgres: Bool) async throws {
        let pipeline = try await Pipeline(postgres: postgres)
        defer { pipeline.stop() }
        let added = try await pipeline.run([
            "apps", "add", "--database", pipeline.database, "--app", "news", "--topic", "com.example.news", "--team-id", "TEAM000001",
            "--key-id", "KEY0000001", "--key-file", pipeline.keyFile,
        ]).output
        let newsMaster = try #require(added.split(separator: "\n").first { $0.hasPrefix("master secret: ") }?.dropFirst("master secret: ".count))
        let server = try await APITests.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        let token = APITests.token
        func register(_ device: String, _ index: Int, user: String?) async throws -> (status: Int, body: String) {
            let member = user.map { #","user_id":"\#($0)""# } ?? ""
            let answer = try await server.call("PUT", "/v1/apps/shop/devices/\(device)", secret: server.application, json: #"{"token":"\#(token(index))"\#(member)}"#)
            return (answer.status, answer.body)
        }
        #expect(try await register("phone", 1, user: "42").status == 201)
        #expect(try await register("tablet", 2, user: "42").status == 201)
        #expect(try await register("watch", 3, user: nil).status == 201)

        let user = try await server.call("GET", "/v1/apps/shop/users/42", secret: server.master)
        #expect(user.status == 200 && user.body.contains(#""user_id":"42""#) && user.body.contains(#""aliases":{}"#), "\(user.body)")
        #expect(user.body.contains(#""device_id":"phone""#) && user.body.contains(#""device_id":"tablet""#) && !user.body.contains("watch"), "\(user.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/users/42", secret: server.application).status == 403, "reading users takes the master secret")
        let nobody = try await server.call("GET", "/v1/apps/shop/users/nobody", secret: server.master)
        #expect(nobody.status == 404 && nobody.body.contains("app shop has no user nobody"), "\(nobody.body)")

        // Linking with the application secret needs the device's own token.
        let needsDevice = #""code":"user_change_needs_device""#
        let bare = try await server.call("PUT", "/v1/apps/shop/users/42/devices/watch", secret: server.application, json: "{}")
        #expect(bare.status == 403 && bare.body.contains(needsDevice), "\(bare.body)")
        let guessed = try await server.call("PUT", "/v1/apps/shop/users/42/devices/watch", secret: server.application, json: #"{"token":"\#(token(1))"}"#)
        #expect(guessed.status == 403 && guessed.body.contains(needsDevice), "another device's token proves nothing: \(guessed.body)")
        let linked = try await server.call("PUT", "/v1/apps/shop/users/42/devices/watch", secret: server.application, json: #"{"token":"\#(token(3))"}"#)
        #expect(linked.status == 200 && linked.body.contains(#""user_id":"42""#), "\(linked.body)")
        #expect(try await server.call("PUT", "/v1/apps/shop/users/42/devices/nothing", secret: server.master).status == 404)

        // A registration moves its device to another user only with the device's own token.
        let moved = try await register("phone", 9, user: "7")
        #expect(moved.status == 403 && moved.body.contains(needsDevice), "\(moved.body)")
        #expect(try await register("phone", 1, user: "7").status == 200)
        #expect(try await server.call("GET", "/v1/apps/shop/users/7", secret: server.master).body.contains(#""device_id":"phone""#))
        #expect(try await register("phone", 1, user: "42").status == 200)
        let patched = try await server.call("PATCH", "/v1/apps/shop/devices/tablet/attributes", secret: server.application, json: #"{"user_id":"7"}"#)
        #expect(patched.status == 403 && patched.body.contains(needsDevice), "\(patched.body)")
        let numeric = try await server.call("PATCH", "/v1/apps/shop/devices/tablet/attributes", secret: server.master, json: #"{"user_id":7}"#)
        #expect(numeric.status == 400 && numeric.body.contains(#""field":"attributes.user_id""#) && numeric.body.contains("is a string"), "\(numeric.body)")

        // Unlinking: only from the user it belongs to.
        #expect(try await server.call("DELETE", "/v1/apps/shop/users/42/devices/tablet", secret: server.master).status == 200)
        let notTheirs = try await server.call("DELETE", "/v1/apps/shop/users/42/devices/tablet", secret: server.master)
        #expect(notTheirs.status == 404 && notTheirs.body.contains("is not user 42's"), "\(notTheirs.body)")
        let three = try await server.call("GET", "/v1/apps/shop/users/42", secret: server.master)
        #expect(three.body.contains(#""device_id":"phone""#) && three.body.contains(#""device_id":"watch""#) && !three.body.contains("tablet"), "\(three.body)")

        // Aliases.
        let aliased = try await server.call("PUT", "/v1/apps/shop/users/42/aliases", secret: server.master, json: #"{"crm_id":"C-1","email":"ada@example.com"}"#)
        #expect(aliased.status == 200 && aliased.body.contains(#""crm_id":"C-1""#), "\(aliased.body)")
        let taken = try await server.call("PUT", "/v1/apps/shop/users/7/aliases", secret: server.master, json: #"{"crm_id":"C-1"}"#)
        #expect(taken.status == 409 && taken.body.contains(#""code":"alias_taken""#) && taken.body.contains(#""field":"aliases.crm_id""#), "\(taken.body)")
        let found = try await server.call("GET", "/v1/apps/shop/aliases/crm_id/C-1", secret: server.master)
        #expect(found.status == 200 && found.body.contains(#""user_id":"42""#), "\(found.body)")
        for (body, field) in [(#"{"CRM":"x"}"#, "aliases"), (#"{"crm_id":5}"#, "aliases.crm_id"), (#"{"crm_id":""}"#, "aliases.crm_id")] {
            let refused = try await server.call("PUT", "/v1/apps/shop/users/7/aliases", secret: server.master, json: body)
            #expect(refused.status == 400 && refused.body.contains(#""field":"\#(field)""#), "\(body): \(refused.body)")
        }
        #expect(try await server.call("PUT", "/v1/apps/shop/users/7/aliases", secret: server.application, json: "{}").status == 403)

        // Segments by user.
        let counted = try await server.call("POST", "/v1/apps/shop/segments/count", secret: server.master, json: #"{"segment":"user:42"}"#)
        #expect(counted.status == 200 && counted.body.contains(#""count":2"#), "\(counted.body)")

        // Another app: its own namespace, and no way into this one's.
        let news = try await server.call("GET", "/v1/apps/news/users/42", secret: String(newsMaster), app: "news")
        #expect(news.status == 404, "\(news.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/users/42", secret: String(newsMaster), app: "news").status == 401)
        #expect(try await server.call("PUT", "/v1/apps/news/users/42/devices/phone", secret: String(newsMaster), app: "news").status == 404)
        #expect(try await server.call("GET", "/v1/apps/news/aliases/crm_id/C-1", secret: String(newsMaster), app: "news").status == 404)
    }
}
