import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// The API's edge probed as an attacker would, over raw sockets (Python's, so that nothing
/// between the test and the server tidies the bytes): ambiguous framing, uploads before
/// authentication, crowds of connections, lockouts through a proxy.
extension APITests {
    /// Sends each raw request on a fresh connection and reads until the server closes (or
    /// 5 s pass): per request the statuses answered, whether the first answer's body is the
    /// API's JSON error shape, whether the connection was closed, and how long it took.
    static let rawProbe = #"""
        import json, socket, sys, time
        port, cases = int(sys.argv[1]), json.load(sys.stdin)
        out = []
        for case in cases:
            s = socket.create_connection(("127.0.0.1", port))
            s.settimeout(5)
            start = time.time()
            for part in case["parts"]:
                s.sendall(part.encode("latin-1"))
                if case.get("pause"): time.sleep(case["pause"])
            data, closed = b"", False
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        closed = True
                        break
                    data += chunk
                    if case.get("until") and data.count(b"HTTP/1.1 ") >= case["until"]: break
            except (socket.timeout, ConnectionResetError):
                pass
            text = data.decode("latin-1")
            # Answers one after another: a head, then Content-Length bytes of body.
            statuses, bodies, rest = [], [], text
            while "\r\n\r\n" in rest:
                head, rest = rest.split("\r\n\r\n", 1)
                status = int(head.split(" ")[1])
                length = next((int(line.split(":")[1]) for line in head.split("\r\n") if line.lower().startswith("content-length:")), 0)
                if status != 100:
                    statuses.append(status)
                    bodies.append(rest[:length])
                rest = rest[length:]
            try:
                shaped = "code" in json.loads(bodies[0])["error"]
            except Exception:
                shaped = False
            out.append({"statuses": statuses, "error_shape": shaped, "closed": closed, "continue": "100 Continue" in text,
                        "seconds": round(time.time() - start, 2), "text": text[:300]})
            s.close()
        print(json.dumps(out))
        """#

    struct ProbeAnswer: Decodable {
        let statuses: [Int]
        let error_shape: Bool
        let closed: Bool
        let `continue`: Bool
        let seconds: Double
        let text: String
    }

    static func probe(_ server: Server, _ cases: [[String: Any]]) async throws -> [ProbeAnswer] {
        let port = try #require(server.url.split(separator: ":").last.map(String.init))
        let input = String(decoding: try JSONSerialization.data(withJSONObject: cases), as: UTF8.self)
        let run = try await CommandLineTool.run("python3", ["-c", rawProbe, port], input: Data(input.utf8))
        return try JSONDecoder().decode([ProbeAnswer].self, from: Data(run.output.utf8))
    }

    static func basic(_ app: String, _ secret: String) -> String { "Authorization: Basic " + Data("\(app):\(secret)".utf8).base64EncodedString() }

    @Test("ambiguous framing is refused: two Content-Lengths, Content-Length with chunked, bare LF, folding, no Host, malformed lengths and chunks each get 400 with the JSON error and a closed connection; one request hidden in another is never answered")
    func ambiguousFramingRefused() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, brokers: ["--brokers", "127.0.0.1:9"])
        defer { server.process.signal(SIGTERM) }
        let auth = Self.basic("shop", server.application)
        let put = "PUT /v1/apps/shop/devices/d1 HTTP/1.1\r\nHost: api\r\n\(auth)\r\nContent-Type: application/json\r\n"
        let body = #"{"token":"\#(Self.token(1))"}"#
        let refused: [(String, String, Int)] = [
            ("two different Content-Lengths", put + "Content-Length: 3\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body, 400),
            ("two equal Content-Lengths", put + "Content-Length: \(body.utf8.count)\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body, 400),
            ("Content-Length and chunked", put + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
            ("bare LF", "GET /healthz HTTP/1.1\nHost: api\n\n", 400),
            ("bare LF after CRLF lines", "GET /healthz HTTP/1.1\r\nHost: api\n\r\n", 400),
            ("bare CR", "GET /healthz HTTP/1.1\r\nHost: api\rX: y\r\n\r\n", 400),
            ("obsolete folding", "GET /healthz HTTP/1.1\r\nHost: api\r\nX-Note: a\r\n b\r\n\r\n", 400),
            ("HTTP/1.1 without Host", "GET /healthz HTTP/1.1\r\n\r\n", 400),
            ("two Hosts", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("two Authorizations", "GET /v1/apps/shop/devices/d1 HTTP/1.1\r\nHost: api\r\n\(Self.basic("shop", server.master))\r\n\(Self.basic("shop", "guess"))\r\n\r\n", 400),
            ("Content-Length with letters", put + "Content-Length: 4x\r\n\r\nabcd", 400),
            ("negative Content-Length", put + "Content-Length: -1\r\n\r\n", 400),
            ("Content-Length list", put + "Content-Length: 4, 4\r\n\r\nabcd", 400),
            ("space before the colon", "GET /healthz HTTP/1.1\r\nHost : api\r\n\r\n", 400),
            ("a request line with two spaces", "GET  /healthz HTTP/1.1\r\nHost: api\r\n\r\n", 400),
            ("an absolute target", "GET http://api/healthz HTTP/1.1\r\nHost: api\r\n\r\n", 400),
            ("a chunk size that is not hex", put + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n", 400),
            ("chunk data longer than its size", put + "Transfer-Encoding: chunked\r\n\r\n2\r\n" + body + "\r\n0\r\n\r\n", 400),
            ("a transfer coding other than chunked", put + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
            ("HTTP/2 on the HTTP/1.1 port", "GET /healthz HTTP/2.0\r\nHost: api\r\n\r\n", 505),
        ]
        let answers = try await Self.probe(server, refused.map { ["parts": [$0.1]] })
        for ((name, _, status), answer) in zip(refused, answers) {
            #expect(answer.statuses == [status] && answer.error_shape && answer.closed, "\(name): \(answer.statuses) closed \(answer.closed): \(answer.text)")
        }
        // A second request hidden in the first one's body (how a proxy that reads
        // Content-Length and a server that reads chunked are made to disagree): one answer,
        // then the connection is closed, so the hidden request is never served.
        let smuggled = put + "Content-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: api\r\n\r\n"
        let hidden = try await Self.probe(server, [["parts": [smuggled]]])[0]
        #expect(hidden.statuses == [400] && hidden.closed, "\(hidden.statuses): \(hidden.text)")
        // What is well formed still works: a chunked body, a pipelined pair, HTTP/1.0, and
        // empty lines before a request.
        let good = try await Self.probe(server, [
            ["parts": [put + "Transfer-Encoding: chunked\r\n\r\n5\r\n" + String(body.prefix(5)) + "\r\n\(String(body.utf8.count - 5, radix: 16));ext=1\r\n" + String(body.dropFirst(5)) + "\r\n0\r\n\r\n"], "until": 1],
            ["parts": ["GET /healthz HTTP/1.1\r\nHost: api\r\n\r\nGET /healthz HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n"]],
            ["parts": ["GET /healthz HTTP/1.0\r\n\r\n"]],
            ["parts": ["\r\n\r\nGET /healthz HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n"]],
            ["parts": [String(repeating: "\r\n", count: 5) + "GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n"]],
            ["parts": ["GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n\r", "\nGET /healthz HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n"], "pause": 0.2],
        ])
        #expect(good[0].statuses == [201], "chunked registration: \(good[0].text)")
        #expect(good[1].statuses == [200, 200] && good[1].closed, "pipelined: \(good[1].text)")
        #expect(good[2].statuses == [200] && good[2].closed, "HTTP/1.0: \(good[2].text)")
        #expect(good[3].statuses == [200], "leading empty lines: \(good[3].text)")
        #expect(good[4].statuses == [400] && good[4].closed, "more than 4 empty lines: \(good[4].text)")
        #expect(good[5].statuses == [200, 200], "an empty line split across two reads: \(good[5].text)")
        // Paths are routed as sent: %2F inside a segment is part of an id, never a separator.
        let encoded = try await server.call("GET", "/v1/apps/shop%2Fdevices/d1", secret: server.master)
        #expect(encoded.status == 404 && encoded.body.contains("no route"), "\(encoded.status) \(encoded.body)")
        let inSegment = try await server.call("GET", "/v1/apps/shop/devices/d%2F1", secret: server.master)
        #expect(inSegment.status == 404 && !inSegment.body.contains("no route"), "the device route answers: \(inSegment.body)")
        let stored = try await server.call("GET", "/v1/apps/shop/devices/d1", secret: server.master)
        #expect(stored.status == 200 && stored.body.contains(Self.token(1)), "the chunked registration was stored whole: \(stored.body)")
    }

    @Test("a request is admitted before its body is read: wrong credentials with a large body announced get 401 at once, without 100 Continue, and the connection closes; right ones get 100 Continue and their answer")
    func authenticationBeforeTheBody() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, brokers: ["--brokers", "127.0.0.1:9"])
        defer { server.process.signal(SIGTERM) }
        let head = { (auth: String, length: Int) in
            "PUT /v1/apps/shop/devices/d2 HTTP/1.1\r\nHost: api\r\n\(auth.isEmpty ? "" : auth + "\r\n")Content-Type: application/json\r\nContent-Length: \(length)\r\nExpect: 100-continue\r\n\r\n"
        }
        let body = #"{"token":"\#(Self.token(2))"}"#
        let answers = try await Self.probe(server, [
            // Only the head is sent: the answer must come without the body.
            ["parts": [head(Self.basic("shop", "guess"), 1_000_000)]],
            ["parts": [head("", 1_000_000)]],
            ["parts": [head(Self.basic("shop", server.application), body.utf8.count), body], "pause": 0.3, "until": 1],
            // Over the limit: 413 before anything is read, whoever asks.
            ["parts": [head(Self.basic("shop", server.application), 5_000_000)]],
        ])
        #expect(answers[0].statuses == [401] && !answers[0].continue && answers[0].closed && answers[0].seconds < 4, "\(answers[0].text)")
        #expect(answers[1].statuses == [401] && !answers[1].continue && answers[1].closed, "\(answers[1].text)")
        #expect(answers[2].statuses == [201] && answers[2].continue, "\(answers[2].text)")
        #expect(answers[3].statuses == [413] && answers[3].error_shape && answers[3].closed, "\(answers[3].text)")
    }

    @Test("connections are bounded: past --max-connections a new one gets 503 with Retry-After, past the per-address limit too, and a connection that never finishes its headers gets 408 at the head deadline however slowly it trickles")
    func connectionBounds() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(
            pipeline, brokers: ["--brokers", "127.0.0.1:9"], extra: ["--max-connections", "30", "--max-connections-per-address", "20", "--head-timeout", "2"])
        defer { server.process.signal(SIGTERM) }
        let port = try #require(server.url.split(separator: ":").last.map(String.init))
        let crowd = try await CommandLineTool.run("python3", ["-c", #"""
            import json, socket, sys, time
            port = int(sys.argv[1])
            def answer(s):
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n")
                s.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = s.recv(4096)
                        if not chunk: break
                        data += chunk
                except socket.timeout:
                    pass
                return data.decode("latin-1")
            def open_from(address, count):
                out = []
                for _ in range(count):
                    s = socket.socket()
                    s.bind((address, 0))
                    s.connect(("127.0.0.1", port))
                    out.append(s)
                time.sleep(0.3)
                return out
            held = open_from("127.0.0.2", 20)
            over_address = answer(open_from("127.0.0.2", 1)[0])
            other = answer(open_from("127.0.0.3", 1)[0])
            more = open_from("127.0.0.4", 10)
            over_total = answer(open_from("127.0.0.5", 1)[0])
            # A trickle: one byte every 0.5 s never completes a head; the deadline closes it.
            s = socket.create_connection(("127.0.0.1", port))
            start = time.time()
            trickle = ""
            for byte in b"GET /healthz HTTP/1.1\r\nHost: api\r\nX-Slow: " + b"a" * 40:
                try:
                    s.send(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.5)
                s.setblocking(False)
                try:
                    chunk = s.recv(4096)
                    trickle += chunk.decode("latin-1")
                    if chunk == b"" or "\r\n\r\n" in trickle: break
                except BlockingIOError:
                    pass
                s.setblocking(True)
            print(json.dumps({"over_address": over_address, "other": other, "over_total": over_total, "trickle": trickle, "trickle_s": round(time.time() - start, 1)}))
            """#, port])
        let result = try #require(try JSONSerialization.jsonObject(with: Data(crowd.output.utf8)) as? [String: Any], "\(crowd.output) \(crowd.error)")
        let overAddress = result["over_address"] as? String ?? ""
        #expect(overAddress.hasPrefix("HTTP/1.1 503") && overAddress.contains("Retry-After: 1"), "the 21st from one address: \(overAddress)")
        #expect((result["other"] as? String ?? "").hasPrefix("HTTP/1.1 200"), "another address still served: \(result["other"] ?? "")")
        let overTotal = result["over_total"] as? String ?? ""
        #expect(overTotal.hasPrefix("HTTP/1.1 503") && overTotal.contains("Retry-After: 1"), "past 30 in all: \(overTotal)")
        let trickle = result["trickle"] as? String ?? ""
        let seconds = result["trickle_s"] as? Double ?? 0
        #expect(trickle.hasPrefix("HTTP/1.1 408") && (1.5...6).contains(seconds), "a trickling head: \(trickle) after \(seconds) s")
    }

    @Test("behind a trusted proxy the lockout is per credential and client: eleven bad tries with one app's key lock that pair only; another app, another phone and the admin routes still work; calls without credentials never count; without trust the forwarded header is ignored")
    func lockoutFitsAProxy() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, brokers: ["--brokers", "127.0.0.1:9"], extra: ["--trusted-proxy", "127.0.0.1"])
        defer { server.process.signal(SIGTERM) }
        let added = try await pipeline.run([
            "apps", "add", "--database", pipeline.database, "--app", "news", "--topic", "com.example.news", "--team-id", "TEAM000001",
            "--key-id", "KEY0000001", "--key-file", pipeline.keyFile,
        ]).output
        let news = try #require(added.split(separator: "\n").first { $0.hasPrefix("master secret: ") }.map { String($0.dropFirst("master secret: ".count)) })
        let attacker = ["X-Forwarded-For: 203.0.113.7"]
        // Calls without credentials are refused but are not failed tries.
        for _ in 0..<25 { #expect(try await server.call("GET", "/v1/apps/shop/devices/d", headers: attacker).status == 401) }
        for attempt in 0..<11 {
            let status = try await server.call("GET", "/v1/apps/shop/devices/d", secret: "guess-\(attempt)", headers: attacker).status
            #expect(status == (attempt < 10 ? 401 : 429), "attempt \(attempt): \(status)")
        }
        #expect(try await server.call("GET", "/v1/apps/shop/devices/d", secret: server.master, headers: attacker).status == 429, "the pair is locked, even with the right secret")
        #expect(try await server.call("GET", "/v1/apps/news/devices/d", secret: news, app: "news", headers: attacker).status == 404, "another app's key from the same client")
        let phone = ["X-Forwarded-For: 198.51.100.20, 127.0.0.1"]
        let registered = try await server.call("PUT", "/v1/apps/shop/devices/p1", secret: server.application, json: #"{"token":"\#(Self.token(3))"}"#, headers: phone)
        #expect(registered.status == 201, "another phone of the same app: \(registered.status) \(registered.body)")
        let sdk = try await server.call("POST", "/device", secret: server.application, json: #"{"deviceID":"\#(Self.token(4))","transport":"APNS","language":"en"}"#, headers: ["X-Forwarded-For: 198.51.100.21"])
        #expect(sdk.status == 200, "an SDK registration through the proxy: \(sdk.status) \(sdk.body)")
        // Bad admin tokens from the attacker lock the admin credential, not device registration.
        for _ in 0..<11 { _ = try await server.call("GET", "/v1/admin/apps", headers: attacker + ["Authorization: bearer not-the-token-at-all"]) }
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/p2", secret: server.application, json: #"{"token":"\#(Self.token(5))"}"#).status == 201)

        // Without a trusted proxy the header is ignored: changing it does not escape the lockout.
        let plain = try await Self.start(pipeline, app: nil, brokers: ["--brokers", "127.0.0.1:9"])
        defer { plain.process.signal(SIGTERM) }
        for attempt in 0..<11 {
            let status = try await plain.call("GET", "/v1/apps/shop/devices/d", secret: "guess-\(attempt)", headers: ["X-Forwarded-For: 192.0.2.\(attempt)"]).status
            #expect(status == (attempt < 10 ? 401 : 429), "attempt \(attempt) with a new forwarded address: \(status)")
        }
    }

    @Test("a NUL or another control character names nothing: `shop\\0…` as the app key with shop's own master secret gets 401 and counts towards the malformed lockout, never as shop; an id like `p1%00` or `p1%1F` in a path gets 404 naming it on read, change and erase, and p1 stays as it was")
    func controlCharactersNameNothing() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await Self.start(pipeline, brokers: ["--brokers", "127.0.0.1:9"])
        defer { server.process.signal(SIGTERM) }
        #expect(try await server.call("PUT", "/v1/apps/shop/devices/p1", secret: server.application, json: #"{"token":"\#(Self.token(3))"}"#).status == 201)
        let attacker = "Authorization: Basic "
        for attempt in 0..<11 {
            let header = attacker + Data("shop\u{0}\(attempt):\(server.master)".utf8).base64EncodedString()
            let answer = try await server.call("GET", "/v1/apps/shop/devices/p1", headers: [header])
            #expect(answer.status == (attempt < 10 ? 401 : 429), "attempt \(attempt): \(answer.status) \(answer.body)")
        }
        for (path, field) in [("/v1/apps/shop/devices/p1%00", "device"), ("/v1/apps/shop/devices/p1%00x", "device"), ("/v1/apps/shop/devices/p1%1F", "device"), ("/v1/apps/shop%00/devices/p1", "app")] {
            let read = try await server.call("GET", path, secret: server.master)
            #expect(read.status == 404 && read.body.contains(#""code":"not_found""#) && read.body.contains(#""field":"\#(field)""#), "GET \(path): \(read.status) \(read.body)")
            let change = try await server.call("PATCH", path + "/attributes", secret: server.master, json: #"{"plan":"gold"}"#)
            #expect(change.status == 404, "PATCH \(path): \(change.status) \(change.body)")
            let erase = try await server.call("POST", path + "/erase", secret: server.master)
            #expect(erase.status == 404, "erase \(path): \(erase.status) \(erase.body)")
        }
        let kept = try await server.call("GET", "/v1/apps/shop/devices/p1", secret: server.master)
        #expect(kept.status == 200 && kept.body.contains(Self.token(3)) && !kept.body.contains("gold"), "\(kept.status) \(kept.body)")
    }
}

extension RealTimeTests {
    /// In the real-time namespace, alone: its promise is a time (answers within 1 s).
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct SlowClientTests {
    @Test("1,100 slow clients from one address, each trickling a byte every 5 s: a normal client's health check and device registration are answered within 1 s throughout, and the head deadline closes every slow connection")
    func slowClientsDoNotStarveOthers() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await APITests.start(pipeline, brokers: ["--brokers", "127.0.0.1:9"])
        defer { server.process.signal(SIGTERM) }
        let port = try #require(server.url.split(separator: ":").last.map(String.init))
        let tool = TestBinaries.packageRoot.appendingPathComponent("scripts/bench/slow_clients.py").path
        let run = try await CommandLineTool.run("python3", [
            tool, port, "--count", "1100", "--source", "127.0.0.2", "--interval", "5", "--duration", "14", "--probe", "/healthz",
            "--probe-put", "/v1/apps/shop/devices/probe-N", "--auth", APITests.basic("shop", server.application).dropFirst("Authorization: ".count).description,
            "--body", #"{"token":"00000000N"}"#,
        ])
        let result = try #require(try JSONSerialization.jsonObject(with: Data((run.output.split(separator: "\n").last ?? "").utf8)) as? [String: Any], "\(run.output) \(run.error)")
        let milliseconds = result["probe_ms"] as? [Double] ?? []
        let statuses = result["probe_statuses"] as? [Int] ?? []
        #expect(milliseconds.count >= 20, "a probe each second: \(result)")
        #expect(milliseconds.allSatisfy { $0 < 1_000 }, "every probe within 1 s: \(milliseconds)")
        #expect(statuses.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? 200 : 201) }, "health 200, registration 201: \(statuses)")
        // Past the 10 s head deadline nothing the slow clients opened is still served: each was
        // answered 408, refused (503) or dropped, and opened again.
        let closed = result["closed_by_server"] as? Int ?? 0
        #expect(closed >= 1_100, "the server closed them: \(result)")
    }
}
}
