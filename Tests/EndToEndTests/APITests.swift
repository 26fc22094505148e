import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// `pushfan api` as a client sees it: a real server process over the dev cluster, the store
/// and the simulator, curl as the client. Every route's answer and every refusal, with the
/// status and body a user gets; a campaign submitted over HTTP is delivered by workers.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct APITests {
    /// A running `pushfan api` and the secrets of the app `shop`.
    struct Server {
        let process: ManagedProcess
        let url: String
        let master: String
        let application: String

        /// One request with curl: status, headers (lower-cased names) and the body.
        func call(
            _ method: String, _ path: String, secret: String? = nil, app: String = "shop", json: String? = nil,
            contentType: String = "application/json", headers: [String] = []
        ) async throws -> (status: Int, headers: [String: String], body: String) {
            var arguments = ["-s", "-S", "-i", "-X", method, url + path]
            var written: String?
            if let secret { arguments += ["-u", "\(app):\(secret)"] }
            if let json {
                // Through a file: large bodies do not fit in an argument list.
                var file = json
                if !json.hasPrefix("@") {
                    let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-body-\(UUID().uuidString.prefix(8))").path
                    try json.write(toFile: path, atomically: true, encoding: .utf8)
                    written = path
                    file = "@" + path
                }
                arguments += ["-H", "Content-Type: \(contentType)", "--data-binary", file]
            }
            defer { if let written { try? FileManager.default.removeItem(atPath: written) } }
            for header in headers { arguments += ["-H", header] }
            let result = try await CommandLineTool.run("curl", arguments)
            guard result.status == 0 else { throw TestFailure("curl \(method) \(path): \(result.error)") }
            let parts = result.output.components(separatedBy: "\r\n\r\n")
            let head = parts[0].split(separator: "\r\n")
            let status = Int(head.first?.split(separator: " ")[1] ?? "") ?? 0
            var fields: [String: String] = [:]
            for line in head.dropFirst() {
                if let colon = line.firstIndex(of: ":") {
                    fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
            return (status, fields, parts.dropFirst().joined(separator: "\r\n\r\n").trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// `pushfan api` for `pipeline`, after adding `app` (nil: no app is added, the secrets
    /// are empty; for a restart).
    static func start(_ pipeline: Pipeline, app: String? = "shop", brokers: [String]? = nil, extra: [String] = []) async throws -> Server {
        var added = ""
        if let app {
            added = try await pipeline.run([
                "apps", "add", "--database", pipeline.database, "--app", app, "--topic", "com.example.\(app)", "--team-id", "TEAM000001",
                "--key-id", "KEY0000001", "--key-file", pipeline.keyFile, "--rate", "20000",
            ]).output
        }
        func secret(_ label: String) -> String {
            added.split(separator: "\n").first { $0.hasPrefix(label) }.map { String($0.dropFirst(label.count)) } ?? ""
        }
        let process = try ManagedProcess(
            TestBinaries.pushfan, ["api", "--port", "0", "--database", pipeline.database, "--log-level", "info"] + (brokers ?? pipeline.kafkaArguments) + extra,
            name: "api")
        guard let output = await process.waitForOutput(timeout: .seconds(20), { $0.contains("api listening on ") }),
              let line = output.split(separator: "\n").first(where: { $0.hasPrefix("api listening on ") })
        else { throw TestFailure("pushfan api did not start: \(process.standardError)") }
        return Server(process: process, url: String(line.dropFirst("api listening on ".count)), master: secret("master secret: "), application: secret("application secret: "))
    }

    static func token(_ index: Int) -> String { String(format: "%064x", index + 1) }

    /// `start` with `adminToken` in a file only its owner may read, as an operator keeps it.
    static func start(_ pipeline: Pipeline, adminToken: String, app: String? = "shop", extra: [String] = []) async throws -> Server {
        let tokenFile = pipeline.directory + "/admin-token"
        try adminToken.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: tokenFile)
        return try await start(pipeline, app: app, extra: ["--admin-token-file", tokenFile] + extra)
    }

    @Test("devices over HTTP: the application secret registers, updates and unregisters; reading needs the master secret; every refusal has its status and error", arguments: [false, true])
    func devices(postgres: Bool) async throws {
        let pipeline = try await Pipeline(postgres: postgres)
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, extra: ["--max-body", "2048"])
        defer { server.process.signal(SIGTERM) }
        #expect(!server.master.isEmpty && !server.application.isEmpty && server.master != server.application)

        let health = try await server.call("GET", "/healthz")
        #expect(health.status == 200 && health.body == #"{"status":"ok"}"#)
        let ready = try await server.call("GET", "/readyz")
        #expect(ready.status == 200 && ready.body.contains(#""status":"ready""#), "\(ready.body)")

        let body = #"{"token":"\#(Self.token(1))","locale":"de_DE","timezone":"Europe/Berlin","tags":["vip"],"attributes":{"plan":"pro"},"quiet_hours":{"start":"22:00","end":"07:00"}}"#
        let created = try await server.call("PUT", "/v1/apps/shop/devices/phone-1", secret: server.application, json: body)
        #expect(created.status == 201 && created.body == #"{"created":true,"device":"phone-1"}"#, "\(created.body)")
        let updated = try await server.call("PUT", "/v1/apps/shop/devices/phone-1", secret: server.application, json: body)
        #expect(updated.status == 200 && updated.body == #"{"created":false,"device":"phone-1"}"#)
        // With the application secret (public: it ships in the app) a token held by another
        // device moves only when the caller names that registration, and the answer does not
        // say which device lost it; the master secret moves it freely and is told.
        let squat = try await server.call("PUT", "/v1/apps/shop/devices/phone-2", secret: server.application, json: #"{"token":"\#(Self.token(1))"}"#)
        #expect(squat.status == 409 && squat.body.contains(#""code":"token_registered_elsewhere""#) && !squat.body.contains("phone-1"), "\(squat.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/devices/phone-2", secret: server.master).status == 404, "nothing stored")
        let proven = try await server.call("PUT", "/v1/apps/shop/devices/phone-2?previous_device_id=phone-1", secret: server.application, json: #"{"token":"\#(Self.token(1))"}"#)
        #expect(proven.status == 201 && !proven.body.contains("token_moved_from"), "\(proven.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/devices/phone-1", secret: server.master).status == 404, "the token left phone-1")
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/phone-7", secret: server.application, json: #"{"token":"\#(Self.token(7))"}"#).status == 201)
        let moved = try await server.call("PUT", "/v1/apps/shop/devices/phone-8", secret: server.master, json: #"{"token":"\#(Self.token(7))"}"#)
        #expect(moved.status == 201 && moved.body.contains(#""token_moved_from":["phone-7"]"#), "\(moved.body)")
        _ = try await server.call("PUT", "/v1/apps/shop/devices/phone-1", secret: server.application, json: body.replacingOccurrences(of: Self.token(1), with: Self.token(3)))

        let forbidden = try await server.call("GET", "/v1/apps/shop/devices/phone-1", secret: server.application)
        #expect(forbidden.status == 403 && forbidden.body.contains(#""code":"forbidden""#))
        let read = try await server.call("GET", "/v1/apps/shop/devices/phone-1", secret: server.master)
        #expect(read.status == 200, "\(read.body)")
        for part in [#""quiet_hours":{"end":"07:00","start":"22:00"}"#, #""tags":["vip"]"#, #""attributes":{"plan":"pro"}"#, #""timezone":"Europe/Berlin""#, #""token":"\#(Self.token(3))""#] {
            #expect(read.body.contains(part), "\(part) not in \(read.body)")
        }

        // One trait at a time.
        let tagged = try await server.call("PUT", "/v1/apps/shop/devices/phone-1/tags/beta", secret: server.application)
        #expect(tagged.status == 200 && tagged.body.contains(#""tags":["beta","vip"]"#) || tagged.body.contains(#""tags":["vip","beta"]"#), "\(tagged.body)")
        let untagged = try await server.call("DELETE", "/v1/apps/shop/devices/phone-1/tags/vip", secret: server.application)
        #expect(untagged.body.contains(#""tags":["beta"]"#), "\(untagged.body)")
        let patched = try await server.call("PATCH", "/v1/apps/shop/devices/phone-1/attributes", secret: server.application, json: #"{"visits":3,"plan":null}"#)
        #expect(patched.body.contains(#""attributes":{"visits":3}"#), "\(patched.body)")
        let quiet = try await server.call("PUT", "/v1/apps/shop/devices/phone-1/quiet_hours", secret: server.application, json: #"{"start":"21:30","end":"06:00"}"#)
        #expect(quiet.body.contains(#""quiet_hours":{"end":"06:00","start":"21:30"}"#), "\(quiet.body)")
        let loud = try await server.call("DELETE", "/v1/apps/shop/devices/phone-1/quiet_hours", secret: server.application)
        #expect(loud.body.contains(#""quiet_hours":null"#))
        let badWindow = try await server.call("PUT", "/v1/apps/shop/devices/phone-1/quiet_hours", secret: server.application, json: #"{"start":"21:30","end":"21:30"}"#)
        #expect(badWindow.status == 400 && badWindow.body.contains("same time"))
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/nobody/tags/x", secret: server.application).status == 404)
        let user = try await server.call("PUT", "/v1/apps/shop/devices/phone-5", secret: server.application, json: #"{"token":"\#(Self.token(5))","user_id":"u-9"}"#)
        #expect(user.status == 201)
        #expect(try await server.call("GET", "/v1/apps/shop/devices/phone-5", secret: server.master).body.contains(#""user_id":"u-9""#))

        let gone = try await server.call("DELETE", "/v1/apps/shop/devices/phone-2", secret: server.application)
        #expect(gone.status == 204)
        let inactive = try await server.call("PUT", "/v1/apps/shop/devices/phone-2/tags/x", secret: server.application)
        #expect(inactive.status == 409 && inactive.body.contains(#""code":"device_inactive""#), "an unregistered device is not revived by a tag: \(inactive.body)")
        let again = try await server.call("DELETE", "/v1/apps/shop/devices/nobody", secret: server.application)
        #expect(again.status == 404 && again.body.contains(#""code":"not_found""#))

        // Refusals, as a client sees them.
        let anonymous = try await server.call("GET", "/v1/apps/shop/devices/phone-1")
        #expect(anonymous.status == 401 && anonymous.headers["www-authenticate"] == #"Basic realm="pushfan""#)
        let wrongSecret = try await server.call("GET", "/v1/apps/shop/devices/phone-1", secret: "wrong")
        let unknownApp = try await server.call("GET", "/v1/apps/other/devices/phone-1", secret: server.master, app: "other")
        #expect(wrongSecret.status == 401 && unknownApp.status == 401 && wrongSecret.body == unknownApp.body, "an unknown app must look like a wrong secret")
        let otherApp = try await server.call("GET", "/v1/apps/other/devices/phone-1", secret: server.master)
        #expect(otherApp.status == 401, "the key must be the path's app")
        let cases: [(String, String, String?, String, Int, String)] = [
            ("PUT", "/v1/apps/shop/devices/phone-9", #"{"token":"\#(Self.token(9))"}"#, "text/plain", 415, "unsupported_media_type"),
            ("PUT", "/v1/apps/shop/devices/phone-9", #"{"token":"#, "application/json", 400, "invalid_input"),
            ("PUT", "/v1/apps/shop/devices/phone-9", #"{"token":"xyz"}"#, "application/json", 400, "invalid_input"),
            ("PUT", "/v1/apps/shop/devices/phone-9", #"{"device_id":"phone-8","token":"\#(Self.token(9))"}"#, "application/json", 400, "invalid_input"),
            ("PUT", "/v1/apps/shop/devices/phone-9", #"{"token":"\#(Self.token(9))","timezone":"Mars/Olympus"}"#, "application/json", 400, "invalid_input"),
            ("PUT", "/v1/apps/shop/devices/phone-9", #"{"token":"\#(Self.token(9))","quiet_hours":{"start":"22:00"}}"#, "application/json", 400, "invalid_input"),
            ("PUT", "/v1/apps/shop/devices/phone-9", #"{"token":"\#(Self.token(9))","tags":["\#(String(repeating: "x", count: 3000))"]}"#, "application/json", 413, "body_too_large"),
            ("PATCH", "/v1/apps/shop/devices/phone-9", "{}", "application/json", 405, "method_not_allowed"),
            ("GET", "/v1/nothing/here", nil, "application/json", 404, "not_found"),
            ("PUT", "/v1/apps/shop/devices/%2E%2E", #"{"token":"\#(Self.token(1))"}"#, "application/json", 400, "invalid_input"),
            ("PUT", "/v1/apps/shop/devices/%2E", #"{"token":"\#(Self.token(1))"}"#, "application/json", 400, "invalid_input"),
        ]
        for (method, path, json, type, status, code) in cases {
            let answer = try await server.call(method, path, secret: server.application, json: json, contentType: type)
            #expect(answer.status == status && answer.body.contains(#""code":"\#(code)""#), "\(method) \(path) \(json?.prefix(60) ?? ""): \(answer.status) \(answer.body)")
        }
        // Hostile bodies: each a 4xx, none a crash or an echo of the input.
        let token = Self.token(9)
        let hostile: [(String, String)] = [
            (#"{"token":"\#(token)","attributes":{"a":\#(String(repeating: "[", count: 10_000))1\#(String(repeating: "]", count: 10_000))}}"#, "nested deeper than 32 levels"),
            (#"{"token":"\#(token)","attributes":{\#((0..<10_000).map { #""k\#($0)":\#($0)"# }.joined(separator: ","))}}"#, "attributes: at most 100 per device"),
            (#"{"token":"\#(token)","locale":"\#(String(repeating: "x", count: 1_900))"}"#, "locale must look like"),
            (#"{"token":"\#(token)","attributes":{"bio":"\#(String(repeating: "x", count: 20_000))"}}"#, "attributes: at most 16384 bytes as JSON per device"),
            (#"{"token":"\#(token)","token":"\#(Self.token(10))"}"#, #"duplicate key \"token\""#),
            (#"{"token":"\#(token)","attributes":{"a":1,"a":2}}"#, #"duplicate key \"a\""#),
            (#"{"token":"\#(token)","attributes":{"n":1e999}}"#, "beyond the range of a double"),
            (#"{"token":"\#(token)","attributes":{"n":123456789012345678901234567890}}"#, "beyond 64 bits"),
            (#"{"token":"\#(token)","last_seen":99999999999999999}"#, "last_seen: milliseconds since the epoch, from 2000"),
            (#"{"token":"\#(token)","last_seen":1700000000}"#, "last_seen: milliseconds since the epoch, from 2000"),
        ]
        let roomy = try await Self.start(pipeline, app: "roomy")
        defer { roomy.process.signal(SIGTERM) }
        for (json, message) in hostile {
            let answer = try await roomy.call("PUT", "/v1/apps/roomy/devices/h1", secret: roomy.application, app: "roomy", json: json)
            #expect(answer.status == 400 && answer.body.contains(message) && answer.body.utf8.count < 400, "\(json.prefix(50)): \(answer.status) \(answer.body.prefix(300))")
        }
        let megabyte = #"{"token":"\#(token)","locale":"\#(String(repeating: "x", count: 1_000_000))"}"#
        let tooLong = try await roomy.call("PUT", "/v1/apps/roomy/devices/h1", secret: roomy.application, app: "roomy", json: megabyte)
        #expect(tooLong.status == 400 && tooLong.body.utf8.count < 400, "a 1 MB string: \(tooLong.status) \(tooLong.body.prefix(200))")
        let bytes = pipeline.directory + "/invalid-utf8.json"
        try Data(Array(#"{"token":"\#(token)","locale":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)).write(to: URL(fileURLWithPath: bytes))
        let invalidUTF8 = try await roomy.call("PUT", "/v1/apps/roomy/devices/h1", secret: roomy.application, app: "roomy", json: "@" + bytes)
        #expect(invalidUTF8.status == 400 && invalidUTF8.body.contains("not valid UTF-8"), "\(invalidUTF8.body)")

        let patch = try await server.call("PATCH", "/v1/apps/shop/devices/phone-9", secret: server.application, json: "{}")
        #expect(patch.headers["allow"] == "PUT, DELETE, GET")
        _ = try await server.call("BREW", "/v1/apps/shop/devices/phone-9")

        // What it counted, in a format promtool accepts, labelled by route, never by path.
        let metrics = try await server.call("GET", "/metrics")
        #expect(metrics.status == 200 && metrics.headers["content-type"]?.hasPrefix("text/plain") == true)
        #expect(metrics.body.contains(#"pushfan_api_requests_total{method="PUT",route="/v1/apps/{app}/devices/{device}",status="201"} 6"#), "\(metrics.body.prefix(600))")
        #expect(metrics.body.contains(#"pushfan_api_requests_total{method="other",route="unmatched",status="405"} 1"#), "an invented method is one label")
        #expect(metrics.body.contains(#"pushfan_api_requests_total{method="PUT",route="unrouted",status="413"} 1"#), "a body refused before routing is counted")
        #expect(!metrics.body.contains("phone-1"), "a device id became a label")
        let file = pipeline.directory + "/metrics.txt"
        try metrics.body.appending("\n").write(toFile: file, atomically: true, encoding: .utf8)
        let checked = try await CommandLineTool.run("sh", ["-c", "promtool check metrics < \(file)"])
        #expect(checked.status == 0, "promtool: \(checked.output) \(checked.error)")
        let invalidToken = try await server.call("PUT", "/v1/apps/shop/devices/phone-9", secret: server.application, json: #"{"token":"xyz"}"#)
        #expect(invalidToken.body.contains(#""field":"token""#) && invalidToken.body.contains("must be"), "\(invalidToken.body)")
        let badZone = try await server.call("PUT", "/v1/apps/shop/devices/phone-9", secret: server.application, json: #"{"token":"\#(Self.token(9))","tags":"vip"}"#)
        #expect(badZone.body.contains(#""field":"tags""#), "\(badZone.body)")
    }

    @Test("ten failed authentications from one address answer 429 with Retry-After, also for the right secret")
    func failedAuthenticationIsThrottled() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        // The window must outlast ten calls while the whole suite loads the machine.
        let server = try await Self.start(pipeline, extra: ["--auth-window", "8"])
        defer { server.process.signal(SIGTERM) }
        for attempt in 0..<10 {
            let answer = try await server.call("GET", "/v1/apps/shop/devices/d", secret: "guess-\(attempt)")
            #expect(answer.status == 401, "attempt \(attempt): \(answer.status)")
        }
        let blocked = try await server.call("GET", "/v1/apps/shop/devices/d", secret: server.master)
        #expect(blocked.status == 429 && blocked.body.contains(#""code":"too_many_failures""#), "\(blocked.body)")
        let wait = Int(blocked.headers["retry-after"] ?? "") ?? 0
        #expect((1...8).contains(wait), "Retry-After \(blocked.headers["retry-after"] ?? "missing")")
        // That the right secret works again when Retry-After has passed is ThrottleWindowTests',
        // on a clock it moves instead of waiting here.
    }

    @Test("a campaign over HTTP: the master secret submits it, workers deliver it, its status and counts read back; the application secret and bad campaigns are refused")
    func campaignDeliveredEndToEnd() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        for index in 0..<30 {
            let answer = try await server.call("PUT", "/v1/apps/shop/devices/d\(index)", secret: server.application, json: #"{"token":"\#(Self.token(index))","locale":"en_US"}"#)
            #expect(answer.status == 201)
        }
        try pipeline.startWorker("a")
        let campaign = Pipeline.campaign("shop-http-1", app: "shop", audience: #"{"segment":"locale = en_US"}"#)
        let denied = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.application, json: campaign)
        #expect(denied.status == 403)
        let mismatch = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign.replacingOccurrences(of: #""app":"shop""#, with: #""app":"other""#))
        #expect(mismatch.status == 422 && mismatch.body.contains(#""code":"app_mismatch""#), "\(mismatch.body)")
        let invalid = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign.replacingOccurrences(of: #""options":{}"#, with: #""options":{"priority":7}"#))
        #expect(invalid.status == 400 && invalid.body.contains(#""field":"options.priority""#), "\(invalid.body)")
        // A key given twice means one thing to one reader and another to the next: refused,
        // naming it, in a campaign and in any other body.
        let keyTwice = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign.replacingOccurrences(of: #""options":{}"#, with: #""options":{"priority":5,"priority":10}"#))
        #expect(keyTwice.status == 400 && keyTwice.body.contains(#""code":"wrong_schema""#) && keyTwice.body.contains(#""field":"options.priority""#) && keyTwice.body.contains("duplicate key"), "\(keyTwice.body)")
        let twiceSegment = try await server.call("POST", "/v1/apps/shop/segments/count", secret: server.master, json: #"{"segment":"locale = en_US","segment":"tag:x"}"#)
        #expect(twiceSegment.status == 400 && twiceSegment.body.contains(#""field":"segment""#) && twiceSegment.body.contains("duplicate key"), "\(twiceSegment.body)")
        let deep = try await server.call("POST", "/v1/apps/shop/segments/count", secret: server.master, json: #"{"segment":"#  + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}")
        #expect(deep.status == 400 && deep.body.contains("nested more than 64 levels"), "\(deep.body)")

        let submitted = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign)
        #expect(submitted.status == 202 && submitted.body.contains(#""campaign":"shop-http-1""#), "\(submitted.body)")
        #expect(submitted.headers["location"] == "/v1/apps/shop/campaigns/shop-http-1")
        let results = try await pipeline.results(of: "shop-http-1")
        #expect(results.completed?.count(of: .delivered) == 30)
        #expect(pipeline.delivered(topic: "com.example.shop").count == 30)

        // Segments: preview, save, read back; a bad expression says where.
        let counted = try await server.call("POST", "/v1/apps/shop/segments/count", secret: server.master, json: #"{"segment":"locale = en_US"}"#)
        #expect(counted.status == 200 && counted.body.contains(#""count":30"#), "\(counted.body)")
        let broken = try await server.call("POST", "/v1/apps/shop/segments/count", secret: server.master, json: #"{"segment":"plan = free"}"#)
        #expect(broken.status == 400 && broken.body.contains(#""code":"invalid_segment""#) && broken.body.contains("unknown field"), "\(broken.body)")
        #expect(try await server.call("PUT", "/v1/apps/shop/segments/english", secret: server.master, json: #"{"expression":"locale = en_US"}"#).status == 201)
        #expect(try await server.call("PUT", "/v1/apps/shop/segments/english", secret: server.master, json: #"{"expression":"locale in (en_US, en_GB)"}"#).status == 200)
        let saved = try await server.call("GET", "/v1/apps/shop/segments", secret: server.master)
        #expect(saved.body == #"{"segments":[{"expression":"locale in (en_US, en_GB)","name":"english"}]}"#, "\(saved.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/segments/nope", secret: server.master).status == 404)
        #expect(try await server.call("GET", "/v1/apps/shop/segments", secret: server.application).status == 403)

        // Stored templates: save, replace, read, list, remove; a bad one says which field; a
        // campaign naming one (or a saved segment) the app does not have is refused before it
        // reaches Kafka.
        let template = #"{"category":"SHOP_ACTIONS","thread_id":"shop","actions":[{"id":"open","params":{"tab":"sale"}}]}"#
        let put = try await server.call("PUT", "/v1/apps/shop/templates/sale", secret: server.master, json: template)
        #expect(put.status == 201 && put.body.contains(#""name":"sale""#) && put.body.contains(#""category":"SHOP_ACTIONS""#), "\(put.body)")
        #expect(try await server.call("PUT", "/v1/apps/shop/templates/sale", secret: server.master, json: template).status == 200)
        #expect(try await server.call("GET", "/v1/apps/shop/templates/sale", secret: server.master).body.contains(#""thread_id":"shop""#))
        #expect(try await server.call("GET", "/v1/apps/shop/templates", secret: server.master).body.hasPrefix(#"{"templates":[{"name":"sale","#))
        let badTemplate = try await server.call("PUT", "/v1/apps/shop/templates/bad", secret: server.master, json: #"{"interruption_level":"loud"}"#)
        #expect(badTemplate.status == 400 && badTemplate.body.contains(#""field":"interruption_level""#), "\(badTemplate.body)")
        let unknownTemplate = try await server.call(
            "POST", "/v1/apps/shop/campaigns", secret: server.master,
            json: #"{"v":1,"id":"shop-http-t","app":"shop","audience":{"segment":"locale = en_US"},"notification":{"template":"nope","content":{"default":{"body":"Hi"}}}}"#)
        #expect(unknownTemplate.status == 422 && unknownTemplate.body.contains(#""code":"unknown_template""#), "\(unknownTemplate.body)")
        let unknownSegment = try await server.call(
            "POST", "/v1/apps/shop/campaigns", secret: server.master,
            json: #"{"v":1,"id":"shop-http-s","app":"shop","audience":{"named":"nope"},"notification":{"content":{"default":{"body":"Hi"}}}}"#)
        #expect(unknownSegment.status == 422 && unknownSegment.body.contains(#""code":"unknown_segment""#)
            && unknownSegment.body.contains(#""field":"audience.named""#), "\(unknownSegment.body)")
        #expect(try await server.call("DELETE", "/v1/apps/shop/templates/sale", secret: server.master).status == 204)
        #expect(try await server.call("GET", "/v1/apps/shop/templates/sale", secret: server.master).status == 404)
        #expect(try await server.call("GET", "/v1/apps/shop/templates", secret: server.application).status == 403)

        let status = try await server.call("GET", "/v1/apps/shop/campaigns/shop-http-1", secret: server.master)
        #expect(status.status == 200 && status.body.contains(#""status":"completed""#) && status.body.contains(#""delivered":30"#), "\(status.body)")
        let list = try await server.call("GET", "/v1/apps/shop/campaigns?limit=5", secret: server.master)
        #expect(list.status == 200 && list.body.contains(#""id":"shop-http-1""#), "\(list.body)")
        // A second campaign, parked an hour ahead: filters and pages.
        let later = Pipeline.campaign("shop-http-later", app: "shop", options: #"{"send_at":\#(Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000)}"#)
        #expect(try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: later).status == 202)
        var parked = ""
        for _ in 0..<100 where !parked.contains(#""status":"scheduled""#) {
            parked = try await server.call("GET", "/v1/apps/shop/campaigns/shop-http-later", secret: server.master).body
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(parked.contains(#""status":"scheduled""#) && parked.contains(#""send_at""#), "\(parked)")
        let first = try await server.call("GET", "/v1/apps/shop/campaigns?limit=1", secret: server.master)
        #expect(first.body.contains(#""id":"shop-http-later""#) && first.body.contains(#""next":"/v1/apps/shop/campaigns?limit=1&after=shop-http-later""#), "\(first.body)")
        let second = try await server.call("GET", "/v1/apps/shop/campaigns?limit=1&after=shop-http-later", secret: server.master)
        #expect(second.body.contains(#""id":"shop-http-1""#) && !second.body.contains("next"), "\(second.body)")
        let scheduled = try await server.call("GET", "/v1/apps/shop/campaigns?status=scheduled", secret: server.master)
        #expect(scheduled.body.contains("shop-http-later") && !scheduled.body.contains("shop-http-1"), "\(scheduled.body)")
        let bogus = try await server.call("GET", "/v1/apps/shop/campaigns?status=bogus", secret: server.master)
        #expect(bogus.status == 400 && bogus.body.contains(#""field":"status""#))
        let cancelled = try await server.call("POST", "/v1/apps/shop/campaigns/shop-http-later/cancel", secret: server.master)
        #expect(cancelled.status == 200 && cancelled.body.contains(#""from":"scheduled""#) && cancelled.body.contains(#""status":"cancelled""#), "\(cancelled.body)")
        let twice = try await server.call("POST", "/v1/apps/shop/campaigns/shop-http-later/cancel", secret: server.master)
        #expect(twice.status == 200 && twice.body.contains(#""changed":false"#))

        let late = try await server.call("POST", "/v1/apps/shop/campaigns/shop-http-1/cancel", secret: server.master)
        #expect(late.status == 409 && late.body.contains("has completed"), "\(late.body)")
        let unknown = try await server.call("POST", "/v1/apps/shop/campaigns/nope/pause", secret: server.master)
        #expect(unknown.status == 404)
        let badAction = try await server.call("POST", "/v1/apps/shop/campaigns/shop-http-1/explode", secret: server.master)
        #expect(badAction.status == 404)
    }

    @Test("Idempotency-Key: two identical submissions at the same moment make one campaign and get one answer; the key with another body is refused")
    func idempotencyKey() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        let campaign = Pipeline.campaign("shop-once-1", app: "shop")
        async let first = server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign, headers: ["Idempotency-Key: order-77"])
        async let second = server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign, headers: ["Idempotency-Key: order-77"])
        let (a, b) = try await (first, second)
        #expect(a.status == 202 && b.status == 202 && a.body == b.body && a.headers["location"] == b.headers["location"], "\(a.body) / \(b.body)")
        let later = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign, headers: ["Idempotency-Key: order-77"])
        #expect(later.status == 202 && later.body == a.body)
        let other = try await server.call(
            "POST", "/v1/apps/shop/campaigns", secret: server.master, json: Pipeline.campaign("shop-once-2", app: "shop"), headers: ["Idempotency-Key: order-77"])
        #expect(other.status == 409 && other.body.contains(#""code":"idempotency_key_reused""#), "\(other.body)")
        let bad = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: campaign, headers: ["Idempotency-Key: " + String(repeating: "k", count: 300)])
        #expect(bad.status == 400 && bad.body.contains(#""field":"Idempotency-Key""#))
        // One record on the campaigns topic, whatever the retries.
        let records = try await pipeline.readTopic(TopicNames.defaultCampaigns, timeout: .seconds(5), into: 0) { count, record in
            if record.keyString == "shop/shop-once-1" { count += 1 }
            return false
        }
        #expect(records == 1, "\(records) records of shop-once-1 on the campaigns topic")
    }

    @Test("a rotated secret: the new one works at once, the old one through its grace period and then not; apps list, show and set-rate")
    func secretRotationAndAppCommands() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        let rotated = try await pipeline.run(["apps", "rotate-secret", "--app", "shop", "--which", "application", "--grace", "2", "--database", pipeline.database]).output
        let fresh = try #require(rotated.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        #expect(fresh.count == 64 && fresh != server.application, "\(rotated)")
        let body = #"{"token":"\#(Self.token(5))"}"#
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/r1", secret: fresh, json: body).status == 201)
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/r1", secret: server.application, json: body).status == 200, "the old secret within its grace")
        try await Task.sleep(for: .seconds(2.5))
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/r1", secret: server.application, json: body).status == 401, "the old secret after its grace")
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/r1", secret: fresh, json: body).status == 200)
        #expect(try await server.call("GET", "/v1/apps/shop/devices/r1", secret: fresh).status == 403, "still an application secret")

        try await pipeline.run(["apps", "set-rate", "--app", "shop", "--rate", "750", "--database", pipeline.database])
        let list = try await pipeline.run(["apps", "list", "--database", pipeline.database]).output
        #expect(list.contains("shop") && list.contains("com.example.shop") && list.contains("    750"), "\(list)")
        let show = try await pipeline.run(["apps", "show", "--app", "shop", "--database", pipeline.database]).output
        #expect(show.contains("token auth: team TEAM000001, key KEY0000001") && show.contains("750/s") && !show.contains(fresh), "\(show)")
        let missing = try await CommandLineTool.run(TestBinaries.pushfan, ["apps", "show", "--app", "nope", "--database", pipeline.database])
        #expect(missing.status == 1 && missing.error.contains("no app nope"))
    }

    @Test("Notificare's SDK call sequence (application info, a temporary device, events, permission, a tag, the APNs token with oldDeviceID, tags, user data, do-not-disturb, an update, unregister) leaves the device in the store as expected", arguments: [false, true])
    func notificareSDKSequence(postgres: Bool) async throws {
        let pipeline = try await Pipeline(postgres: postgres)
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        let sdk = ["X-Notificare-SDK-Version: 2.7.2", "X-Notificare-App-Version: 1.4.0"]
        func call(_ method: String, _ path: String, _ json: String? = nil) async throws -> (status: Int, headers: [String: String], body: String) {
            try await server.call(method, path, secret: server.application, json: json, headers: sdk)
        }
        let temporary = "5f0c2b6e1a9d4c3e8b7a6f5e4d3c2b1a"
        let token = Self.token(42)
        let info = try await call("GET", "/application/info")
        #expect(info.status == 200 && info.body.contains(#""_id":"shop""#) && info.body.contains(#""userDataFields":[]"#), "\(info.body)")
        let device = #""language":"de","region":"DE","platform":"iOS","osVersion":"14.4","sdkVersion":"2.7.2","appVersion":"1.4.0","deviceString":"iPhone12,1","timeZoneOffset":1,"backgroundAppRefresh":true"#
        #expect(try await call("POST", "/device", #"{"deviceID":"\#(temporary)","transport":"Notificare",\#(device)}"#).status == 200)
        #expect(try await call("POST", "/event", #"{"type":"re.notifica.event.application.Install","deviceID":"\#(temporary)","timestamp":1773993600000}"#).status == 202)
        #expect(try await call("PUT", "/device/\(temporary)", #"{"allowedUI":true}"#).body == #"{"message":"device updated"}"#)
        #expect(try await call("PUT", "/device/\(temporary)/addtag", #"{"tag":"early"}"#).status == 200)
        // A temporary device has no token: campaigns cannot reach it.
        #expect(try await server.call("GET", "/v1/apps/shop/devices/\(temporary)", secret: server.master).status == 404)

        let registered = try await call("POST", "/device", #"{"deviceID":"\#(token)","oldDeviceID":"\#(temporary)","transport":"APNS","userID":"user-7",\#(device)}"#)
        #expect(registered.status == 200 && registered.body == #"{"message":"device registered"}"#)
        #expect(try await call("GET", "/device/\(temporary)/tags").status == 404, "the temporary id is gone")
        #expect(try await call("PUT", "/device/\(token)/addtags", #"{"tags":["sports","news"]}"#).status == 200)
        #expect(try await call("PUT", "/device/\(token)/removetag", #"{"tag":"news"}"#).status == 200)
        #expect(try await call("GET", "/device/\(token)/tags").body == #"{"tags":["early","sports"]}"#)
        #expect(try await call("PUT", "/device/\(token)/userdata", #"{"firstName":"Ada","plan":"pro"}"#).status == 200)
        #expect(try await call("GET", "/device/\(token)/userdata").body == #"{"userData":{"firstName":"Ada","plan":"pro"}}"#)
        #expect(try await call("PUT", "/device/\(token)/dnd", #"{"start":"23:00","end":"07:00"}"#).status == 200)
        #expect(try await call("GET", "/device/\(token)/dnd").body == #"{"dnd":{"end":"07:00","start":"23:00"}}"#)

        let stored = try await server.call("GET", "/v1/apps/shop/devices/\(token)", secret: server.master)
        for part in [#""locale":"de_DE""#, #""timezone":"Etc/GMT-1""#, #""tags":["early","sports"]"#, #""quiet_hours":{"end":"07:00","start":"23:00"}"#,
                     #""userdata.firstName":"Ada""#, #""user_id":"user-7""#, #""allowed_ui":true"#, #""device_model":"iPhone12,1""#, #""os_version":"14.4""#, #""status":"active""#] {
            #expect(stored.body.contains(part), "\(part) not in \(stored.body)")
        }
        // Half an hour off UTC has no fixed IANA zone: the offset is kept, the zone cleared.
        #expect(try await call("PUT", "/device/\(token)", #"{"timeZoneOffset":5.5,"language":"en","region":"GB"}"#).status == 200)
        let moved = try await server.call("GET", "/v1/apps/shop/devices/\(token)", secret: server.master).body
        #expect(moved.contains(#""locale":"en_GB""#) && moved.contains(#""timezone":null"#) && moved.contains(#""time_zone_offset":5.5"#), "\(moved)")
        #expect(try await call("PUT", "/device/\(token)/cleardnd").status == 200)
        #expect(try await call("GET", "/device/\(token)/dnd").body == #"{"dnd":null}"#)

        // Refusals the SDK could provoke.
        let badToken = try await call("POST", "/device", #"{"deviceID":"not-hex","transport":"APNS"}"#)
        #expect(badToken.status == 400 && badToken.body.contains(#""field":"deviceID""#), "\(badToken.body)")
        #expect(try await call("PUT", "/device/unknown", #"{"allowedUI":true}"#).status == 404)
        #expect(try await call("PUT", "/device/\(token)/dnd", #"{"start":"23:00"}"#).status == 400)
        #expect(try await call("PUT", "/device/\(token)/userdata", #"{"first name":"Ada"}"#).status == 400)
        #expect(try await server.call("GET", "/device/\(token)/tags", secret: "wrong").status == 401)
        // A token another device holds (registered through the native calls) is not taken
        // with the application secret, which ships in the app; the master secret may move it.
        let native = Self.token(43)
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/phone-1", secret: server.application, json: #"{"token":"\#(native)"}"#).status == 201)
        let taken = try await call("POST", "/device", #"{"deviceID":"\#(native)","transport":"APNS","userID":"intruder"}"#)
        #expect(taken.status == 409 && taken.body.contains("token_registered_elsewhere") && taken.body.contains(#""field":"deviceID""#), "\(taken.status) \(taken.body)")
        #expect(try await server.call("GET", "/v1/apps/shop/devices/phone-1", secret: server.master).status == 200, "phone-1 keeps its token")
        #expect(try await call("GET", "/device/\(native)/tags").status == 404, "nothing of the refused registration is kept")
        #expect(try await server.call("POST", "/device", secret: server.master, json: #"{"deviceID":"\#(native)","transport":"APNS"}"#, headers: sdk).status == 200)
        #expect(try await server.call("GET", "/v1/apps/shop/devices/phone-1", secret: server.master).status == 404, "the master secret moved it")

        #expect(try await call("DELETE", "/device/\(token)").body == #"{"message":"device deactivated"}"#)
        let gone = try await server.call("GET", "/v1/apps/shop/devices/\(token)", secret: server.master).body
        #expect(gone.contains(#""status":"unregistered""#), "\(gone)")
    }

    @Test("app management with the admin token (its file read through a link, as Kubernetes mounts it): create (credentials checked), list, read, change rate and credentials, rotate; without the token nothing")
    func adminRoutes() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let tokenFile = pipeline.directory + "/admin-token"
        try "an-admin-token-of-some-length\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        // Readable by anyone on the machine: refused, with the fix in the message.
        let open = try await CommandLineTool.run(TestBinaries.pushfan, ["api", "--port", "0", "--database", pipeline.database, "--admin-token-file", tokenFile])
        #expect(open.status == 2 && open.error.contains("may be read by every user (mode 644); chmod o-rwx it (600 or 640)"), "\(open.status) \(open.error)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: tokenFile)
        // Mounted as Kubernetes mounts a Secret's file: a link (itself mode 777) to the file.
        let link = pipeline.directory + "/admin-token-link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: tokenFile)
        let server = try await Self.start(pipeline, extra: ["--admin-token-file", link])
        defer { server.process.signal(SIGTERM) }
        let admin = ["Authorization: Bearer an-admin-token-of-some-length"]
        func call(_ method: String, _ path: String, _ json: String? = nil, headers: [String] = admin) async throws -> (status: Int, headers: [String: String], body: String) {
            try await server.call(method, path, json: json, headers: headers)
        }
        let denied = try await call("GET", "/v1/admin/apps", headers: ["Authorization: Bearer wrong-token-wrong-token"])
        #expect(denied.status == 401 && denied.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
        #expect(try await call("GET", "/v1/admin/apps", headers: []).status == 401)
        #expect(try await server.call("GET", "/v1/admin/apps", secret: server.master).status == 401, "an app's secret is not the admin token")

        let created = try await call("POST", "/v1/admin/apps", #"{"app":"news","topic":"com.example.news","team_id":"TEAM000002","key_id":"KEY0000002","key_file":"\#(pipeline.keyFile)","rate":300,"time_zone":"Europe/Berlin"}"#)
        #expect(created.status == 201 && created.body.contains(#""master_secret":""#) && created.headers["location"] == "/v1/admin/apps/news", "\(created.body)")
        let secret = try #require(try JSONSerialization.jsonObject(with: Data(created.body.utf8)) as? [String: Any])["application_secret"] as? String
        #expect(try await server.call("PUT", "/v1/apps/news/devices/n1", secret: secret, app: "news", json: #"{"token":"\#(Self.token(8))"}"#).status == 201)
        let refused = try await call("POST", "/v1/admin/apps", #"{"app":"bad","topic":"com.example.bad","team_id":"TEAM000002","key_id":"KEY0000002","key_file":"/nonexistent.p8"}"#)
        #expect(refused.status == 422 && refused.body.contains(#""code":"invalid_credentials""#), "\(refused.body)")
        #expect(try await call("POST", "/v1/admin/apps", #"{"app":"news","topic":"com.example.news","cert":"/x.pem"}"#).status == 422)
        let again = try await call("POST", "/v1/admin/apps", #"{"app":"news","topic":"com.example.news","team_id":"TEAM000002","key_id":"KEY0000002","key_file":"\#(pipeline.keyFile)"}"#)
        #expect(again.status == 409, "\(again.body)")

        let list = try await call("GET", "/v1/admin/apps")
        #expect(list.status == 200 && list.body.contains(#""app":"news""#) && list.body.contains(#""app":"shop""#) && !list.body.contains("secret"), "\(list.body)")
        #expect(try await call("PUT", "/v1/admin/apps/news/rate", #"{"rate":450}"#).status == 200)
        let shown = try await call("GET", "/v1/admin/apps/news")
        #expect(shown.body.contains(#""rate":450"#) && shown.body.contains(#""time_zone":"Europe/Berlin""#), "\(shown.body)")
        #expect(shown.body.contains(#""default_category":null"#))
        let category = try await call("PUT", "/v1/admin/apps/news/default_category", #"{"category":"NEWS_ACTIONS"}"#)
        #expect(category.status == 200 && category.body.contains(#""default_category":"NEWS_ACTIONS""#), "\(category.body)")
        #expect(try await call("GET", "/v1/admin/apps/news").body.contains(#""default_category":"NEWS_ACTIONS""#))
        let badCategory = try await call("PUT", "/v1/admin/apps/news/default_category", #"{"category":"tab\tinside"}"#)
        #expect(badCategory.status == 400 && badCategory.body.contains("printable ASCII"), "\(badCategory.body)")
        #expect(try await call("PUT", "/v1/admin/apps/news/default_category", #"{}"#).status == 400)
        #expect(try await call("PUT", "/v1/admin/apps/nope/default_category", #"{"category":"X"}"#).status == 404)
        #expect(try await call("PUT", "/v1/admin/apps/news/default_category", #"{"category":null}"#).body.contains(#""default_category":null"#))
        #expect(shown.body.contains(#""frequency_caps":[]"#), "\(shown.body)")
        let caps = try await call("PUT", "/v1/admin/apps/news/frequency_caps", #"{"caps":["3/1d","1/1h"]}"#)
        #expect(caps.status == 200 && caps.body.contains(#""frequency_caps":["3/1d","1/1h"]"#), "\(caps.body)")
        #expect(try await call("GET", "/v1/admin/apps/news").body.contains(#""frequency_caps":["3/1d","1/1h"]"#))
        let badCaps = try await call("PUT", "/v1/admin/apps/news/frequency_caps", #"{"caps":["2/31d"]}"#)
        #expect(badCaps.status == 400 && badCaps.body.contains("caps: a window is at most 30 days"), "\(badCaps.body)")
        #expect(try await call("PUT", "/v1/admin/apps/news/frequency_caps", #"{"caps":"2/1d"}"#).status == 400)
        #expect(try await call("PUT", "/v1/admin/apps/nope/frequency_caps", #"{"caps":[]}"#).status == 404)
        #expect(try await call("PUT", "/v1/admin/apps/news/frequency_caps", #"{"caps":[]}"#).body.contains(#""frequency_caps":[]"#))
        #expect(try await call("PUT", "/v1/admin/apps/news/credentials", #"{"team_id":"TEAM000003","key_id":"KEY0000003","key_file":"\#(pipeline.keyFile)"}"#).status == 200)
        #expect(try await call("GET", "/v1/admin/apps/news").body.contains(#""team_id":"TEAM000003""#))
        let rotated = try await call("POST", "/v1/admin/apps/news/secrets/application/rotate", #"{"grace_s":0}"#)
        #expect(rotated.status == 200 && rotated.body.contains(#""which":"application""#), "\(rotated.body)")
        #expect(try await server.call("PUT", "/v1/apps/news/devices/n1", secret: secret, app: "news", json: #"{"token":"\#(Self.token(8))"}"#).status == 401, "no grace")
        #expect(try await call("GET", "/v1/admin/apps/nope").status == 404)
        #expect(try await call("POST", "/v1/admin/apps/news/secrets/other/rotate").status == 404)
    }

    @Test("with --credentials-dir, the admin API names key files only inside it: outside, through .. or a symlink, missing or a directory are one refusal; inside, relative or absolute, works")
    func credentialsDirectory() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let keys = pipeline.directory + "/keys"
        try FileManager.default.createDirectory(atPath: keys + "/sub", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: pipeline.keyFile, toPath: keys + "/AuthKey.p8")
        try FileManager.default.createSymbolicLink(atPath: keys + "/outside.p8", withDestinationPath: pipeline.keyFile)
        let missing = try await CommandLineTool.run(TestBinaries.pushfan, ["api", "--port", "0", "--database", pipeline.database, "--credentials-dir", keys + "/nope"])
        #expect(missing.status == 2 && missing.error.contains("--credentials-dir: \(keys)/nope is not a directory"), "\(missing.status) \(missing.error)")
        let server = try await Self.start(pipeline, adminToken: "an-admin-token-of-some-length", extra: ["--credentials-dir", keys])
        defer { server.process.signal(SIGTERM) }
        func create(_ app: String, keyFile: String) async throws -> (status: Int, headers: [String: String], body: String) {
            try await server.call(
                "POST", "/v1/admin/apps", json: #"{"app":"\#(app)","topic":"com.example.\#(app)","team_id":"TEAM000002","key_id":"KEY0000002","key_file":"\#(keyFile)"}"#,
                headers: ["Authorization: Bearer an-admin-token-of-some-length"])
        }
        // A real key outside, the same key through a symlink or .., a file that does not
        // exist, the directory itself: the same answer, so nothing is learnt about the paths.
        for path in [pipeline.keyFile, keys + "/outside.p8", keys + "/../key.p8", "../key.p8", "/etc/passwd", keys + "/none.p8", "sub", keys] {
            let refused = try await create("probe", keyFile: path)
            #expect(refused.status == 422 && refused.body.contains(#""code":"invalid_credentials""#) && refused.body.contains(#""field":"key_file""#)
                && refused.body.contains("not a file in the API's credentials directory"), "\(path): \(refused.status) \(refused.body)")
        }
        let cert = try await server.call("PUT", "/v1/admin/apps/shop/credentials", json: #"{"cert":"/etc/ssl/certs/ca-certificates.crt"}"#, headers: ["Authorization: Bearer an-admin-token-of-some-length"])
        #expect(cert.status == 422 && cert.body.contains(#""field":"cert""#), "\(cert.body)")
        let relative = try await create("news", keyFile: "AuthKey.p8")
        #expect(relative.status == 201, "\(relative.body)")
        let shown = try await server.call("GET", "/v1/admin/apps/news", headers: ["Authorization: Bearer an-admin-token-of-some-length"])
        let resolvedKeys = try #require(URL(fileURLWithPath: keys).resolvingSymlinksInPath().path as String?)
        #expect(shown.body.contains(#""key_file":"\#(resolvedKeys)/AuthKey.p8""#), "stored resolved: \(shown.body)")
        #expect(try await create("blog", keyFile: keys + "/sub/../AuthKey.p8").status == 201)
    }

    @Test("connection limits: headers beyond the connection's memory get 431, a silent client is closed after the idle timeout, keep-alive serves several requests on one connection")
    func connectionLimits() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, extra: ["--idle-timeout", "2"])
        defer { server.process.signal(SIGTERM) }
        let huge = try await server.call("GET", "/healthz", headers: ["X-Padding: " + String(repeating: "p", count: 70_000)])
        #expect(huge.status == 431, "\(huge.status)")
        let port = try #require(server.url.split(separator: ":").last.map(String.init))
        // A client that connects and says nothing: the server hangs up after the timeout.
        let silent = try await CommandLineTool.run("python3", ["-c", """
            import socket, time
            s = socket.create_connection(("127.0.0.1", \(port)))
            start = time.time()
            s.settimeout(10)
            data = s.recv(100)
            print(round(time.time() - start, 1), len(data))
            """])
        let seconds = Double(silent.output.split(separator: " ").first ?? "") ?? -1
        #expect((1.5...6).contains(seconds), "closed after \(silent.output) \(silent.error)")
        // Two requests, one connection.
        let reused = try await CommandLineTool.run("curl", ["-s", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects}\n", server.url + "/healthz", server.url + "/healthz"])
        #expect(reused.output.split(separator: "\n") == ["1", "0"], "\(reused.output)")
        // SIGTERM: it stops accepting, finishes what runs, and exits cleanly.
        server.process.signal(SIGTERM)
        let code = await server.process.waitForExit(timeout: .seconds(20))
        #expect(code == 0, "exit \(code.map(String.init) ?? "none"): \(server.process.standardError.suffix(300))")
    }

    @Test("with Kafka unreachable a submission answers 503 with Retry-After and /readyz says not ready, while /healthz and devices still answer")
    func kafkaDownAnswers503() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let (dead, held) = try FreePort.held()
        defer { close(held) }
        let server = try await Self.start(pipeline, brokers: ["--brokers", "127.0.0.1:\(dead)"], extra: ["--kafka-timeout", "2"])
        defer { server.process.signal(SIGTERM) }
        let submitted = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: Pipeline.campaign("shop-down-1", app: "shop"))
        #expect(submitted.status == 503 && submitted.body.contains(#""code":"kafka_unavailable""#) && submitted.headers["retry-after"] == "1", "\(submitted.status) \(submitted.body)")
        // The key is given back: the client's retry with it is tried again, not refused.
        for _ in 0..<2 {
            let keyed = try await server.call(
                "POST", "/v1/apps/shop/campaigns", secret: server.master, json: Pipeline.campaign("shop-down-2", app: "shop"), headers: ["Idempotency-Key: retry-me"])
            #expect(keyed.status == 503 && keyed.body.contains(#""code":"kafka_unavailable""#), "\(keyed.status) \(keyed.body)")
        }
        let ready = try await server.call("GET", "/readyz")
        #expect(ready.status == 503 && ready.body == #"{"checks":{"kafka":"unavailable","store":"ok"},"status":"not_ready"}"#, "what failed, not its error: \(ready.body)")
        #expect(try await server.call("GET", "/healthz").status == 200)
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/d1", secret: server.application, json: #"{"token":"\#(Self.token(1))"}"#).status == 201)
    }
}
