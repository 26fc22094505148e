import Foundation
import PushfanTestSupport
import Testing

/// The real `pushfan apns-sim` binary, driven by curl and nghttp as a sender would drive APNs.
@Suite("apns-sim process", .timeLimit(.minutes(5)))
struct SimulatorProcessTests {
    static let topic = "com.example.app"

    /// Every APNs rejection a request can provoke, over TLS with the generated CA, with real
    /// ES256 keys, a rules file and per-key topics.
    @Test("every request, credential and device reason, as curl sees it")
    func reasons() async throws {
        let key = TestKey()
        let stranger = TestKey(keyID: "KEY0000009")
        let rulesDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-rules-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: rulesDirectory, withIntermediateDirectories: true)
        let unregistered = "dd" + String(repeating: "0", count: 62)
        let otherApp = "ee" + String(repeating: "0", count: 62)
        try """
            {"tokens": {"\(otherApp)": {"topic": "com.example.other"}},
             "unregistered": {"\(unregistered)": 1700000000123},
             "prefixes": {"0bad": "BadDeviceToken", "0e": "ExpiredToken"}}
            """.write(toFile: rulesDirectory + "/rules.json", atomically: true, encoding: .utf8)
        let sim = try await SimulatorProcess(try keysArguments([key], topics: [Self.topic, "com.example.other"]) + ["--rules", rulesDirectory + "/rules.json"])
        defer { sim.stop() }
        let jwt = try key.jwt(issuedAt: nowSeconds() - 10)
        let auth = "authorization: bearer " + jwt
        let base = [auth, "apns-topic: \(Self.topic)", "apns-push-type: alert"]
        let token = Clients.token

        struct Case {
            let what: String
            var path = "/3/device/" + Clients.token
            var method = "POST"
            var headers: [String]
            var body: String? = Clients.alertBody
            let status: Int
            let reason: String
        }
        let cases: [Case] = [
            Case(what: "GET", method: "GET", headers: base, body: nil, status: 405, reason: "MethodNotAllowed"),
            Case(what: "bad path", path: "/3/devices/" + token, headers: base, status: 404, reason: "BadPath"),
            Case(what: "no token", path: "/3/device/", headers: base, status: 400, reason: "MissingDeviceToken"),
            Case(what: "bad token", path: "/3/device/xyz", headers: base, status: 400, reason: "BadDeviceToken"),
            Case(what: "duplicate topic", headers: base + ["apns-topic: \(Self.topic)"], status: 400, reason: "DuplicateHeaders"),
            Case(what: "no authorization", headers: ["apns-topic: \(Self.topic)"], status: 403, reason: "MissingProviderToken"),
            Case(what: "unknown key", headers: ["authorization: bearer " + (try stranger.jwt(issuedAt: nowSeconds())), "apns-topic: \(Self.topic)"],
                 status: 403, reason: "InvalidProviderToken"),
            Case(what: "forged signature", headers: ["authorization: bearer " + (try stranger.jwt(issuedAt: nowSeconds(), keyID: key.keyID)), "apns-topic: \(Self.topic)"],
                 status: 403, reason: "InvalidProviderToken"),
            Case(what: "old token", headers: ["authorization: bearer " + (try key.jwt(issuedAt: nowSeconds() - 3700)), "apns-topic: \(Self.topic)"],
                 status: 403, reason: "ExpiredProviderToken"),
            Case(what: "no topic", headers: [auth], status: 400, reason: "MissingTopic"),
            Case(what: "topic of another app", headers: [auth, "apns-topic: com.example.stranger"], status: 400, reason: "TopicDisallowed"),
            Case(what: "bad push type", headers: [auth, "apns-topic: \(Self.topic)", "apns-push-type: banner"], status: 400, reason: "InvalidPushType"),
            Case(what: "bad priority", headers: base + ["apns-priority: 7"], status: 400, reason: "BadPriority"),
            Case(what: "bad expiration", headers: base + ["apns-expiration: soon"], status: 400, reason: "BadExpirationDate"),
            Case(what: "long collapse id", headers: base + ["apns-collapse-id: " + String(repeating: "c", count: 65)], status: 400, reason: "BadCollapseId"),
            Case(what: "bad apns-id", headers: base + ["apns-id: 42"], status: 400, reason: "BadMessageId"),
            Case(what: "empty payload", headers: base, body: "", status: 400, reason: "PayloadEmpty"),
            Case(what: "too large", headers: base, body: #"{"aps":{},"x":""# + String(repeating: "x", count: 4100) + #""}"#, status: 413, reason: "PayloadTooLarge"),
            Case(what: "not JSON", headers: base, body: "hello", status: 400, reason: "BadPayload"),
            Case(what: "rule: bad token", path: "/3/device/0bad" + String(repeating: "1", count: 60), headers: base, status: 400, reason: "BadDeviceToken"),
            Case(what: "rule: other app's token", path: "/3/device/" + otherApp, headers: base, status: 400, reason: "DeviceTokenNotForTopic"),
            Case(what: "rule: unregistered", path: "/3/device/" + unregistered, headers: base, status: 410, reason: "Unregistered"),
            Case(what: "rule: expired token", path: "/3/device/0e" + String(repeating: "1", count: 62), headers: base, status: 410, reason: "ExpiredToken"),
        ]
        for item in cases {
            let response = try await Clients.curl(sim, path: item.path, method: item.method, headers: item.headers, body: item.body)
            #expect(response.status == item.status, "\(item.what): \(response)")
            if item.status != 200 {
                #expect(response.reason == item.reason, "\(item.what): \(response)")
                #expect(response.headers["apns-id"]?.count == 36, "\(item.what): every answer carries an apns-id")
            }
        }
        // 410 carries the rule's timestamp; the other app's token works for its own topic.
        let gone = try await Clients.curl(sim, path: "/3/device/" + unregistered, headers: base)
        #expect(Clients.int(gone.json?["timestamp"]) == 1_700_000_000_123)
        let own = try await Clients.curl(sim, path: "/3/device/" + otherApp, headers: [auth, "apns-topic: com.example.other"])
        #expect(own.status == 200)

        let stats = try await sim.stats()
        let reasons = try #require(stats["reason"] as? [String: Int])
        #expect(reasons["Unregistered"] == 2)
        #expect(reasons["InvalidProviderToken"] == 2)
        #expect(Clients.int(stats["accepted"]) == 1)
        #expect(Clients.int(stats["requests"]) == cases.count + 2)
    }

    @Test("acceptance: 200 with the echoed apns-id and an apns-unique-id, HEADERS only; production mode has no unique id")
    func acceptance() async throws {
        let sim = try await SimulatorProcess(["--accept-any-key"])
        defer { sim.stop() }
        let jwt = try TestKey().jwt(issuedAt: nowSeconds())
        let id = "4b6b1e0c-3f6a-4c1e-9a53-0d2f1f6c2a11"
        let response = try await Clients.curl(sim, headers: ["authorization: bearer " + jwt, "apns-topic: com.example.app", "apns-id: " + id.uppercased()])
        #expect(response.status == 200)
        #expect(response.headers["apns-id"] == id)
        #expect(response.headers["apns-unique-id"]?.count == 36)
        #expect(response.body.isEmpty)
        #expect(response.headers["content-length"] == nil)

        let production = try await SimulatorProcess(["--no-auth", "--production"])
        defer { production.stop() }
        let plain = try await Clients.curl(production)
        #expect(plain.status == 200)
        #expect(plain.headers["apns-unique-id"] == nil)
        #expect(plain.headers["apns-id"]?.count == 36)
    }

    @Test("h2c with prior knowledge")
    func cleartext() async throws {
        let sim = try await SimulatorProcess(["--h2c", "--no-auth"])
        defer { sim.stop() }
        #expect(sim.url.hasPrefix("http://127.0.0.1:"))
        #expect(sim.caFile == nil)
        let accepted = try await Clients.curl(sim)
        #expect(accepted.status == 200)
        let rejected = try await Clients.curl(sim, headers: ["apns-push-type: alert"])
        #expect(rejected.status == 400)
        #expect(rejected.reason == "MissingTopic")
        #expect(Clients.int(try await sim.stats()["requests"]) == 2)
    }

    @Test("TLS with a given certificate and key")
    func givenCertificate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-cert-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let made = try await CommandLineTool.run("openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem",
        ])
        try #require(made.status == 0, "\(made.error)")
        let sim = try await SimulatorProcess(["--no-auth", "--tls-cert", directory + "/cert.pem", "--tls-key", directory + "/key.pem"])
        defer { sim.stop() }
        #expect(sim.caFile == nil)
        let result = try await CommandLineTool.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", "--http2", "--cacert", directory + "/cert.pem",
            "-H", "apns-topic: a.b", "--data-binary", Clients.alertBody, sim.url + "/3/device/" + Clients.token])
        #expect(result.output == "200 2")
    }

    @Test("certificate auth: a verified client certificate pushes to its topic without a JWT")
    func certificateAuth() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-mtls-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func openssl(_ arguments: [String]) async throws {
            let result = try await CommandLineTool.run("openssl", arguments)
            try #require(result.status == 0, "openssl \(arguments.first ?? ""): \(result.error)")
        }
        // A provider CA, a certificate it signs for com.example.app, and one signed by a stranger.
        for name in ["ca", "stranger"] {
            try await openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                               "-subj", "/CN=\(name)", "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem"])
        }
        for (name, signer) in [("client", "ca"), ("forged", "stranger")] {
            try await openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
                               "/UID=com.example.app/CN=Apple Push Services: com.example.app",
                               "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).csr"])
            try await openssl(["x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", "\(directory)/\(signer).pem", "-CAkey",
                               "\(directory)/\(signer).key", "-CAcreateserial", "-days", "1", "-out", "\(directory)/\(name).pem"])
        }
        let sim = try await SimulatorProcess(["--client-ca", directory + "/ca.pem", "--accept-any-key"])
        defer { sim.stop() }
        let client = ["--cert", directory + "/client.pem", "--key", directory + "/client.key"]
        func send(_ extra: [String], headers: [String]) async throws -> (status: String, body: String) {
            var arguments = ["-s", "-w", "\n%{http_code}"] + sim.curlOptions + extra
            for header in headers { arguments += ["-H", header] }
            arguments += ["--data-binary", Clients.alertBody, sim.url + "/3/device/" + Clients.token]
            let result = try await CommandLineTool.run("curl", arguments)
            let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
        }
        // No topic needed: it defaults to the certificate's; the type's suffix is allowed.
        #expect(try await send(client, headers: []).status == "200")
        #expect(try await send(client, headers: ["apns-push-type: voip", "apns-topic: com.example.app.voip"]).status == "200")
        let other = try await send(client, headers: ["apns-topic: com.example.other"])
        #expect(other == ("400", #"{"reason":"TopicDisallowed"}"#))
        // Without a certificate the connection needs a JWT.
        let anonymous = try await send([], headers: ["apns-topic: com.example.app"])
        #expect(anonymous == ("403", #"{"reason":"MissingProviderToken"}"#))
        let withToken = try await send([], headers: ["apns-topic: com.example.app", "authorization: bearer " + (try TestKey().jwt(issuedAt: nowSeconds()))])
        #expect(withToken.status == "200")
        // A certificate from another CA fails the TLS handshake: no HTTP answer at all.
        let forged = try await send(["--cert", directory + "/forged.pem", "--key", directory + "/forged.key"], headers: [])
        #expect(forged.status == "000")
        #expect(Clients.int((try await sim.stats())["accepted"]) == 3)
    }

    @Test("nghttp: a token-auth connection starts at 1 stream and opens up after the first accepted push")
    func nghttpAndStreamLimit() async throws {
        let key = TestKey()
        let sim = try await SimulatorProcess(try keysArguments([key]))
        defer { sim.stop() }
        let body = try Clients.file(sim, "body.json", Clients.alertBody)
        let jwt = try key.jwt(issuedAt: nowSeconds())
        let log = try await Clients.nghttp(sim, paths: Clients.distinctPaths(3),
                                           headers: ["authorization: bearer " + jwt, "apns-topic: com.example.app"], bodyFile: body)
        // nghttp opens all three streams at once. Those it opened beyond the one allowed
        // before it read the server's SETTINGS are refused, unprocessed (REFUSED_STREAM);
        // how many depends on timing, but each stream gets exactly one of the two answers.
        let accepted = log.components(separatedBy: ":status: 200").count - 1
        let refused = log.components(separatedBy: "error_code=REFUSED_STREAM(0x07)").count - 1
        #expect(accepted >= 1, "\(log)")
        #expect(accepted + refused == 3, "\(log)")
        #expect(log.contains("apns-unique-id:"))
        #expect(Clients.receivedStreamLimits(log) == [1, 1000], "\(log)")
        let stats = try await sim.stats()
        #expect(Clients.int(stats["accepted"]) == accepted)
        #expect(Clients.int(stats["refused_streams"]) == 0, "nghttp2 refuses these before the simulator sees them")
    }

    @Test("max_concurrent_streams and the drop to 1 after a rejection")
    func dropToOne() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--max-concurrent-streams", "7", "--drop-to-one-after-rejection"])
        defer { sim.stop() }
        let body = try Clients.file(sim, "body.json", Clients.alertBody)
        // The first request is refused (no topic), so the limit drops to 1 and stays there.
        let log = try await Clients.nghttp(sim, paths: ["/3/device/" + Clients.token], headers: [], bodyFile: body)
        #expect(log.contains(":status: 400"), "\(log)")
        #expect((try await sim.stats())["reason"] as? [String: Int] == ["MissingTopic": 1])
        #expect(Clients.receivedStreamLimits(log) == [7, 1], "\(log)")
        try await sim.control(["max_concurrent_streams": 3, "drop_to_one_after_rejection": false])
        let second = try await Clients.nghttp(sim, paths: ["/3/device/" + Clients.token], headers: ["apns-topic: a.b"], bodyFile: body)
        #expect(Clients.receivedStreamLimits(second) == [3], "\(second)")
    }

    @Test("JWT clock rules under a shifted clock: 20-minute refresh per key, 60-minute expiry, old token still valid after a change")
    func clockRulesPerKey() async throws {
        let key = TestKey()
        let sim = try await SimulatorProcess(try keysArguments([key]) + ["--token-updates", "key"])
        defer { sim.stop() }
        let start = nowSeconds()
        let first = "authorization: bearer " + (try key.jwt(issuedAt: start))
        let second = "authorization: bearer " + (try key.jwt(issuedAt: start + 1))
        let headers = ["apns-topic: com.example.app"]
        #expect(try await Clients.curl(sim, headers: headers + [first]).status == 200)
        // Another connection (another process) with a newer token: too soon for this key.
        let tooSoon = try await Clients.curl(sim, headers: headers + [second])
        #expect(tooSoon.status == 429)
        #expect(tooSoon.reason == "TooManyProviderTokenUpdates")

        try await sim.control(["clock_offset_s": 21 * 60])
        #expect(try await Clients.curl(sim, headers: headers + [second]).status == 200)
        #expect(try await Clients.curl(sim, headers: headers + [first]).status == 200)
        try await sim.control(["clock_offset_s": 61 * 60])
        let expired = try await Clients.curl(sim, headers: headers + [first])
        #expect(expired.status == 403)
        #expect(expired.reason == "ExpiredProviderToken")
        // 40 minutes after the second token took over, a fresh one is a welcome refresh.
        let fresh = "authorization: bearer " + (try key.jwt(issuedAt: start + 61 * 60))
        #expect(try await Clients.curl(sim, headers: headers + [fresh]).status == 200)
        let stats = try await sim.stats()
        #expect(stats["jwt_changes"] as? [String: Int] == ["TEAM000001.KEY0000001": 2])
        #expect(stats["reason"] as? [String: Int] == ["TooManyProviderTokenUpdates": 1, "ExpiredProviderToken": 1])
    }

    @Test("by default the 20-minute rule is per connection: separate senders may sign their own tokens")
    func clockRulesPerConnection() async throws {
        let key = TestKey()
        let sim = try await SimulatorProcess(try keysArguments([key]))
        defer { sim.stop() }
        let start = nowSeconds()
        let first = try key.jwt(issuedAt: start), second = try key.jwt(issuedAt: start + 1), third = try key.jwt(issuedAt: start + 2)
        let path = "/3/device/" + Clients.token
        let sameConnection = try await Clients.curlSequence(sim, [
            (["apns-topic: com.example.app", "authorization: bearer " + first], Clients.alertBody, path),
            (["apns-topic: com.example.app", "authorization: bearer " + second], Clients.alertBody, path),
            (["apns-topic: com.example.app", "authorization: bearer " + first], Clients.alertBody, path),
        ])
        #expect(sameConnection.map(\.status) == [200, 429, 200])
        #expect(sameConnection[1].reason == "TooManyProviderTokenUpdates")
        // Another connection (another sender process) signs its own, newer token: accepted.
        #expect(try await Clients.curl(sim, headers: ["apns-topic: com.example.app", "authorization: bearer " + third]).status == 200)
        // The key's newest token changed twice (first → second → third), whichever connections
        // used them. (That a connection may refresh after 20 minutes is in ConnectionTokenClock's tests.)
        let stats = try await sim.stats()
        #expect(stats["jwt_changes"] as? [String: Int] == ["TEAM000001.KEY0000001": 2])
    }

    @Test("a second key on a connection is UnrelatedKeyIdInToken")
    func unrelatedKey() async throws {
        let first = TestKey(), second = TestKey(keyID: "KEY0000002")
        let sim = try await SimulatorProcess(try keysArguments([first, second]))
        defer { sim.stop() }
        let path = "/3/device/" + Clients.token
        let secondToken = try second.jwt(issuedAt: nowSeconds())
        let responses = try await Clients.curlSequence(sim, [
            (["authorization: bearer " + (try first.jwt(issuedAt: nowSeconds())), "apns-topic: com.example.app"], Clients.alertBody, path),
            (["authorization: bearer " + secondToken, "apns-topic: com.example.app"], Clients.alertBody, path),
        ])
        #expect(responses.map(\.status) == [200, 403])
        #expect(responses.last?.reason == "UnrelatedKeyIdInToken")
        // On a connection of its own the second key works.
        let alone = try await Clients.curl(sim, headers: ["authorization: bearer " + secondToken, "apns-topic: com.example.app"])
        #expect(alone.status == 200)
    }

    @Test("server errors and throttling from flags and from control")
    func serverErrors() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--p500", "1"])
        defer { sim.stop() }
        let serverError = try await Clients.curl(sim)
        #expect(serverError.status == 500)
        #expect(serverError.reason == "InternalServerError")
        try await sim.control(["p500": 0, "p503": 1])
        let unavailable = try await Clients.curl(sim)
        #expect(unavailable.status == 503)
        #expect(unavailable.reason == "ServiceUnavailable")
        let throttled = "cc" + String(repeating: "0", count: 62)
        try await sim.control(["p503": 0, "throttle_tokens": [throttled]])
        let tooMany = try await Clients.curl(sim, path: "/3/device/" + throttled)
        #expect(tooMany.status == 429)
        #expect(tooMany.reason == "TooManyRequests")
        #expect(try await Clients.curl(sim).status == 200)
        try await sim.control(["throttle_tokens": [] as [String], "p429": 1])
        #expect(try await Clients.curl(sim).reason == "TooManyRequests")
        let stats = try await sim.stats()
        #expect(stats["status"] as? [String: Int] == ["500": 1, "503": 1, "429": 2, "200": 1])
    }

    @Test("latency delays the answer by at least the configured time")
    func latency() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--latency", "300"])
        defer { sim.stop() }
        let result = try await CommandLineTool.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total} %{time_pretransfer}"] + sim.curlOptions
            + ["-H", "apns-topic: a.b", "--data-binary", Clients.alertBody, sim.url + "/3/device/" + Clients.token])
        let parts = result.output.split(separator: " ")
        #expect(parts.first == "200")
        let waited = (Double(parts[1]) ?? 0) - (Double(parts[2]) ?? 0)
        #expect(waited >= 0.29, "the answer came \(waited) s after the request")
        // The simulator's own endpoints are never delayed (no threshold asserted, only that they answer).
        #expect((try await sim.control(["latency": "exp:50"]))["latency"] as? String == "exp:50")
    }

    @Test("one connection serves 1,100 requests from curl, which resets each stream after its answer")
    func longConnection() async throws {
        // libcurl 7.88 sends RST_STREAM(STREAM_CLOSED) after every answer; nghttp2's
        // rapid-reset limit would close the connection after 1,000 of them.
        let sim = try await SimulatorProcess(["--no-auth"])
        defer { sim.stop() }
        let prefix = String(repeating: "ab", count: 30)
        let result = try await CommandLineTool.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}\n"] + sim.curlOptions
            + ["-H", "apns-topic: a.b", "--data-binary", #"{"aps":{}}"#, sim.url + "/3/device/" + prefix + "[1000-2099]"])
        let codes = result.output.split(separator: "\n")
        #expect(codes.count == 1100)
        #expect(codes.allSatisfy { $0 == "200" })
        let stats = try await sim.stats()
        #expect(Clients.int(stats["accepted"]) == 1100)
        #expect(Clients.int(stats["connections_accepted"]) == 2, "the requests' connection and this stats call's")
    }

    @Test("a client that leaves before its answer does not take the simulator down")
    func clientLeaves() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--latency", "400"])
        defer { sim.stop() }
        // curl gives up after 0.1 s; the answer is written 0.4 s in, to a closed socket.
        let gaveUp = try await CommandLineTool.run("curl", ["-s", "--max-time", "0.1"] + sim.curlOptions
            + ["-H", "apns-topic: a.b", "--data-binary", Clients.alertBody, sim.url + "/3/device/" + Clients.token])
        #expect(gaveUp.status == 28)
        try await Task.sleep(for: .milliseconds(600))
        #expect(sim.process.isRunning)
        try await sim.control(["latency": 0])
        #expect(try await Clients.curl(sim).status == 200)
    }

    @Test("GOAWAY after N requests carries the right last-stream-id; later streams are refused")
    func goaway() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--goaway-after", "2"])
        defer { sim.stop() }
        let body = try Clients.file(sim, "body.json", Clients.alertBody)
        let log = try await Clients.nghttp(sim, paths: Clients.distinctPaths(4), headers: ["apns-topic: a.b"], bodyFile: body)
        // The request streams, in the order nghttp opened them.
        let streams = log.split(separator: "\n").filter { $0.contains("send HEADERS frame") }.compactMap { line in
            line.range(of: "stream_id=").map { Int(line[$0.upperBound...].prefix { $0.isNumber }) ?? -1 }
        }
        try #require(streams.count == 4, "\(log)")
        #expect(log.contains("recv GOAWAY frame"), "\(log)")
        #expect(log.contains("last_stream_id=\(streams[1]), error_code=NO_ERROR(0x00)"), "\(log)")
        #expect(log.contains("\"reason\":\"Shutdown\""), "\(log)")
        // The first two streams were answered; the two above the last-stream-id were not.
        #expect(log.contains("recv (stream_id=\(streams[0])) :status: 200"))
        #expect(log.contains("recv (stream_id=\(streams[1])) :status: 200"))
        #expect(!log.contains("recv (stream_id=\(streams[2])) :status"))
        #expect(!log.contains("recv (stream_id=\(streams[3])) :status"))
        let stats = try await sim.stats()
        #expect(Clients.int(stats["goaways_sent"]) == 1)
        #expect(Clients.int(stats["accepted"]) == 2)
        #expect(Clients.int(stats["refused_streams"]) == 2)
    }

    @Test("REFUSED_STREAM for a fraction of streams")
    func refused() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--refuse-fraction", "1"])
        defer { sim.stop() }
        let body = try Clients.file(sim, "body.json", Clients.alertBody)
        let log = try await Clients.nghttp(sim, paths: ["/3/device/" + Clients.token], headers: ["apns-topic: a.b"], bodyFile: body)
        #expect(log.contains("recv RST_STREAM frame"), "\(log)")
        #expect(log.contains("error_code=REFUSED_STREAM(0x07)"), "\(log)")
        #expect(!log.contains(":status: 200"))
        try await sim.control(["refuse_fraction": 0])
        #expect(try await Clients.curl(sim).status == 200)
        let stats = try await sim.stats()
        #expect(Clients.int(stats["refused_streams"]) == 1)
        #expect(Clients.int(stats["accepted"]) == 1)
    }

    @Test("a dropped connection leaves the request without an answer")
    func dropConnection() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--drop-after", "1"])
        defer { sim.stop() }
        let dropped = try await Clients.curl(sim)
        #expect(dropped.status == nil)
        #expect(dropped.exitCode != 0)
        try await sim.control(["drop_after": 0])
        #expect(try await Clients.curl(sim).status == 200)
        let stats = try await sim.stats()
        #expect(Clients.int(stats["dropped_connections"]) == 1)
        #expect(Clients.int(stats["requests"]) == 1)
    }

    @Test("stats and log agree with what the client saw; reset clears the counts")
    func groundTruth() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-log-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let logFile = directory + "/sim.ndjson"
        let sim = try await SimulatorProcess(["--no-auth", "--log", logFile])
        defer { sim.stop() }
        let tokens = (1...3).map { String(format: "%02d", $0) + String(repeating: "f", count: 62) }
        var requests: [(headers: [String], body: String, path: String)] = []
        for token in tokens {
            requests.append((["apns-topic: com.example.app", "apns-collapse-id: promo", "apns-priority: 5"], Clients.alertBody, "/3/device/" + token))
        }
        // The first token twice with the same collapse id: one duplicate acceptance.
        requests.append((["apns-topic: com.example.app", "apns-collapse-id: promo"], Clients.alertBody, "/3/device/" + tokens[0]))
        requests.append((["apns-topic: com.example.app.voip", "apns-push-type: voip"], #"{"aps":{}}"#, "/3/device/" + tokens[1]))
        requests.append((["apns-push-type: alert"], Clients.alertBody, "/3/device/" + tokens[2]))  // MissingTopic
        let responses = try await Clients.curlSequence(sim, requests)
        #expect(responses.map(\.status) == [200, 200, 200, 200, 200, 400])

        let stats = try await sim.stats()
        #expect(Clients.int(stats["requests"]) == 6)
        #expect(Clients.int(stats["accepted"]) == 5)
        #expect(Clients.int(stats["distinct_tokens_accepted"]) == 3)
        #expect(Clients.int(stats["duplicate_acceptances"]) == 1)
        #expect(stats["topic"] as? [String: Int] == ["com.example.app": 4, "com.example.app.voip": 1])
        #expect(stats["push_type"] as? [String: Int] == ["alert": 4, "voip": 1])
        #expect(stats["reason"] as? [String: Int] == ["MissingTopic": 1])
        #expect(Clients.int(stats["connections_open"]) >= 0)

        let lines = sim.logLines()
        #expect(lines.count == 5)
        let seenIDs = Set(responses.prefix(5).compactMap { $0.headers["apns-id"] })
        #expect(Set(lines.compactMap { $0["apns_id"] as? String }) == seenIDs)
        #expect(lines.first?["token"] as? String == tokens[0])
        #expect(lines.first?["collapse_id"] as? String == "promo")
        #expect(Clients.int(lines.first?["priority"]) == 5)
        #expect(Clients.int(lines.first?["payload_bytes"]) == Clients.alertBody.utf8.count)
        #expect(lines.last?["push_type"] as? String == "voip")
        #expect(lines.last?["collapse_id"] is NSNull)
        #expect(Set(lines.map { Clients.int($0["connection"]) }).count == 1)

        try await sim.reset()
        let cleared = try await sim.stats()
        #expect(Clients.int(cleared["requests"]) == 0)
        #expect(Clients.int(cleared["distinct_tokens_accepted"]) == 0)
    }

    @Test("control endpoint errors are JSON the operator can read")
    func controlErrors() async throws {
        let sim = try await SimulatorProcess(["--no-auth"])
        defer { sim.stop() }
        let bad = try await Clients.curl(sim, path: "/_sim/control", headers: [], body: #"{"p500": 2}"#)
        #expect(bad.status == 400)
        #expect(bad.json?["error"] as? String == #""p500" must be a probability from 0 to 1"#)
        let notJSON = try await Clients.curl(sim, path: "/_sim/control", headers: [], body: "p500=1")
        #expect(notJSON.status == 400)
        #expect((notJSON.json?["error"] as? String)?.contains("JSON object") == true)
        let unknown = try await Clients.curl(sim, path: "/_sim/nothing", method: "GET", headers: [], body: nil)
        #expect(unknown.status == 404)
        let wrongMethod = try await Clients.curl(sim, path: "/_sim/stats", headers: [], body: "{}")
        #expect(wrongMethod.status == 405)
        let current = try await Clients.curl(sim, path: "/_sim/control", method: "GET", headers: [], body: nil)
        #expect(current.json?["max_concurrent_streams"] as? Int == 1000)
        // Nothing changed by the refused calls.
        #expect(try await Clients.curl(sim).status == 200)
    }
}

@Suite("apns-sim command line", .timeLimit(.minutes(2)))
struct SimulatorCommandLineTests {
    func run(_ arguments: [String]) async throws -> CommandLineTool.Result {
        try await CommandLineTool.run(TestBinaries.pushfan, ["apns-sim"] + arguments)
    }

    @Test("--help documents flags, files and control")
    func help() async throws {
        let result = try await run(["--help"])
        #expect(result.status == 0)
        for needle in ["--keys FILE", "--accept-any-key", "--rules FILE", "--log FILE", "--h2c", "--ca-out", "--threads", "--goaway-after",
                       "--refuse-fraction", "--drop-after", "--latency", "/_sim/control", "clock_offset_s", "TooManyProviderTokenUpdates"] {
            #expect(result.output.contains(needle), "\(needle)")
        }
    }

    @Test("usage mistakes exit 2 and say what to do", arguments: [
        ([] as [String], "choose how providers authenticate: --keys FILE, --accept-any-key or --no-auth (exactly one)"),
        (["--no-auth", "--accept-any-key"], "exactly one"),
        (["--no-auth", "--h2c", "--ca-out", "/tmp/x"], "--ca-out needs the generated certificate"),
        (["--no-auth", "--tls-cert", "a.pem"], "--tls-cert and --tls-key go together"),
        (["--no-auth", "--p500", "3"], #""p500" must be a probability from 0 to 1"#),
        (["--no-auth", "--latency", "soon"], "is not a number of milliseconds"),
        (["--keys", "/nonexistent/keys.json"], "cannot read the keys file /nonexistent/keys.json"),
        (["--no-auth", "--rules", "/nonexistent/rules.json"], "cannot read the rules file"),
        (["--no-auth", "--host", "example.com"], "--host must be an IPv4 or IPv6 address"),
        (["--accept-any-key", "--token-updates", "process"], "--token-updates must be connection or key, got 'process'"),
        (["--no-auth", "--client-ca", "ca.pem"], "--client-ca and --no-auth contradict each other"),
    ])
    func usage(_ arguments: [String], _ message: String) async throws {
        let result = try await run(["--port", "0"] + arguments)
        #expect(result.status == 2)
        #expect(result.error.contains(message), "\(result.error)")
    }

    @Test("SIGTERM stops it cleanly")
    func stops() async throws {
        let sim = try await SimulatorProcess(["--no-auth", "--threads", "3"])
        #expect(try await Clients.curl(sim).status == 200)
        sim.process.signal(SIGTERM)
        #expect(await sim.process.waitForExit(timeout: .seconds(10)) == 0)
    }
}

/// An independent APNs client (aioapns, from PyPI) against the simulator with real keys.
/// Runs when PUSHFAN_TEST_AIOAPNS names a Python with aioapns installed
/// (`PUSHFAN_TEST_AIOAPNS=$(scripts/bench/aioapns_env.sh)`), since installing it needs PyPI.
@Suite("aioapns against apns-sim", .timeLimit(.minutes(2)),
       .enabled(if: ProcessInfo.processInfo.environment["PUSHFAN_TEST_AIOAPNS"] != nil))
struct AioapnsTests {
    @Test("aioapns sends 300 notifications and all are accepted, as stats and log confirm")
    func sends() async throws {
        let python = try #require(ProcessInfo.processInfo.environment["PUSHFAN_TEST_AIOAPNS"])
        let key = TestKey()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-aioapns-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try key.privateKey.pkcs8PEM.write(toFile: directory + "/key.p8", atomically: true, encoding: .utf8)
        let sim = try await SimulatorProcess(try keysArguments([key], topics: ["com.example.app"]) + ["--log", directory + "/log.ndjson"])
        defer { sim.stop() }
        let script = TestBinaries.packageRoot.appendingPathComponent("scripts/bench/aioapns_send.py").path
        let result = try await CommandLineTool.run(python, [
            script, "--url", "https://localhost:\(sim.port)", "--ca", try #require(sim.caFile), "--key", directory + "/key.p8",
            "--team-id", key.teamID, "--key-id", key.keyID, "--topic", "com.example.app", "--count", "300",
        ])
        #expect(result.status == 0, "\(result.output) \(result.error)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        #expect(Clients.int(report["accepted"]) == 300)
        let stats = try await sim.stats()
        #expect(Clients.int(stats["accepted"]) == 300)
        #expect(sim.logLines().count == 300)
    }
}
