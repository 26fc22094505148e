import Foundation
import PushfanAPI
import Testing

/// The HTTP server's pure parts as tables: head scanning and parsing, chunked bodies fed in
/// every split, the client address behind trusted proxies, and connection counting.
struct RequestHeadTests {
    static func scan(_ text: String, from offset: Int = 0, limit: Int = 1024) -> Result<RequestHeadParser.Scan, HeadError> {
        Array(text.utf8).withUnsafeBytes { bytes in
            do throws(HeadError) { return .success(try RequestHeadParser.scan(bytes, from: offset, limit: limit)) } catch { return .failure(error) }
        }
    }

    static func parse(_ text: String) -> Result<RequestHead, HeadError> {
        Array(text.utf8).withUnsafeBytes { bytes in
            do throws(HeadError) { return .success(try RequestHeadParser.parse(bytes)) } catch { return .failure(error) }
        }
    }

    @Test func scanFindsTheEndAndRefusesBareLineEndsAtOnce() {
        #expect(Self.scan("GET / HTTP/1.1\r\nHost: a\r\n\r\nrest") == .success(.complete(end: 27)))
        #expect(Self.scan("GET / HTTP/1.1\r\nHost: a\r\n") == .success(.incomplete(resumeAt: 25)))
        // Resumed after a CR that waited for its LF.
        #expect(Self.scan("GET / HTTP/1.1\r\nHost: a\r\n\r\n", from: 26) == .success(.complete(end: 27)))
        #expect(Self.scan("GET / HTTP/1.1\r\nHost: a\r\n\rX", from: 26).failureStatus == 400)
        #expect(Self.scan("GET / HTTP/1.1\nHost: a").failureStatus == 400, "a bare LF, before any end")
        #expect(Self.scan("GET / HTTP/1.1\r\nHost: a\rb").failureStatus == 400, "a bare CR")
        #expect(Self.scan(String(repeating: "a", count: 2000)).failureStatus == 431)
        #expect(Self.scan("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 1100) + "\r\n\r\n").failureStatus == 431)
    }

    @Test func parsesARequestAndItsFraming() throws {
        let head = try Self.parse("PUT /v1/apps/a%2Fb/devices/d?x=1&name=J%C3%BCrgen+K HTTP/1.1\r\nHost: api\r\nContent-Length: 12\r\nX-List: a\r\nx-list: b\r\n\r\n").get()
        #expect(head.method == "PUT" && head.path == "/v1/apps/a%2Fb/devices/d" && head.version == .http11)
        #expect(head.query == ["x": "1", "name": "Jürgen K"])
        #expect(head.framing == .length(12) && head.keepAlive && !head.expectsContinue)
        #expect(head.headers["x-list"] == "a, b", "list headers on several lines are joined")
        #expect(try Self.parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\n\r\n").get().framing == .chunked)
        #expect(try Self.parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n").get().expectsContinue)
        #expect(try Self.parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n").get().keepAlive == false)
        #expect(try Self.parse("GET / HTTP/1.0\r\n\r\n").get().keepAlive == false)
        #expect(try Self.parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").get().keepAlive)
        #expect(try Self.parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").get().framing == RequestHead.Framing.none)
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 \r\n\r\n", 200),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost:\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: x\r\nAuthorization: y\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nX : a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\n: a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: a\u{1}b\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n", 417),
        ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400),
        ("GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        ("GET / http/1.1\r\nHost: a\r\n\r\n", 505),
    ])
    func refusesWhatTwoReadersCouldReadTwoWays(head: String, status: Int) {
        switch Self.parse(head) {
        case .success: #expect(status == 200, "accepted: \(head.debugDescription)")
        case .failure(let error): #expect(error.status == status, "\(head.debugDescription): \(error)")
        }
    }

    static func decode(_ text: String, splitEvery size: Int, limit: Int = 1000) -> (body: String, consumed: Int)? {
        var decoder = ChunkedBody(limit: limit)
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + size)
            let progress = bytes[offset..<end].withUnsafeBytes { part in try? decoder.feed(part) }
            switch progress {
            case nil: return nil
            case .complete(let consumed)?: return (String(decoding: decoder.body, as: UTF8.self), offset + consumed)
            case .needMore?: offset = end
            }
        }
        return ("<incomplete>", -1)
    }

    @Test func chunkedBodiesInEverySplit() {
        let text = "5\r\nhello\r\n7;name=value\r\n, world\r\n0\r\nTrailer: x\r\n\r\nNEXT"
        for size in 1...text.utf8.count {
            let decoded = Self.decode(text, splitEvery: size)
            #expect(decoded?.body == "hello, world" && decoded?.consumed == text.utf8.count - 4, "split every \(size): \(String(describing: decoded))")
        }
        #expect(Self.decode("A\r\n0123456789\r\n0\r\n\r\n", splitEvery: 3)?.body == "0123456789", "hex sizes in either case")
        for bad in ["\r\n", "x\r\n", "5 \r\nhello\r\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n", "5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n",
                    "0\r\nTrailer: x\n\r\n", "1234567890123456\r\n", "5;a b\r\nhello\r\n0\r\n\r\n",
                    // A bare LF ending the body is how a lenient proxy in front is made to see a
                    // second request the server would take as a trailer.
                    "0\r\n\nGET /admin HTTP/1.1\r\nHost: x\r\n\r\n", "0\r\nno colon here\r\n\r\n", "0\r\n: empty name\r\n\r\n",
                    "0\r\nX: a\u{1}b\r\n\r\n"] {
            #expect(Self.decode(bad, splitEvery: 2) == nil, "\(bad.debugDescription)")
        }
        #expect(Self.decode("400\r\n", splitEvery: 10, limit: 1000) == nil, "a chunk past the limit is refused before it is read")
        #expect(Self.decode("5\r\nhello\r\n", splitEvery: 10)?.consumed == -1, "no last chunk yet")
    }

    @Test func trailersAreReadAsStrictlyAsHeaders() {
        #expect(Self.decode("3\r\nabc\r\n0\r\nX-Checksum: 12\r\nX-More:\tz\r\n\r\n", splitEvery: 4)?.body == "abc")
    }

    @Test func theClientBehindTrustedProxiesOnly() {
        var policy = ConnectionPolicy()
        #expect(policy.clientAddress(peer: "198.51.100.1", headers: ["x-forwarded-for": "203.0.113.9"]) == "198.51.100.1", "no proxy trusted: the header is ignored")
        policy.trustedProxies = ["127.0.0.1", "10.0.0.2"]
        #expect(policy.clientAddress(peer: "198.51.100.1", headers: ["x-forwarded-for": "203.0.113.9"]) == "198.51.100.1", "an untrusted peer's header is ignored")
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["x-forwarded-for": "203.0.113.9"]) == "203.0.113.9")
        // The client may send its own X-Forwarded-For: only what the trusted hops added counts.
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["x-forwarded-for": "1.1.1.1, 203.0.113.9, 10.0.0.2"]) == "203.0.113.9")
        // Only the configured header is read: a proxy appending to X-Forwarded-For passes a
        // client's own Forwarded through untouched.
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["forwarded": "for=203.0.113.66", "x-forwarded-for": "198.51.100.7"]) == "198.51.100.7")
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["forwarded": "for=203.0.113.66"]) == "127.0.0.1")
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["x-forwarded-for": "unknown"]) == "127.0.0.1", "not an address: the proxy's")
        policy.forwardedHeader = .forwarded
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["forwarded": #"for=1.1.1.1, for="[2001:db8::1]:4711";proto=https"#]) == "2001:db8::1")
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["forwarded": "for=192.0.2.4:80"]) == "192.0.2.4")
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["forwarded": "for=_hidden", "x-forwarded-for": "198.51.100.7"]) == "127.0.0.1")
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: [:]) == "127.0.0.1", "no header: the proxy itself")
        #expect(policy.clientAddress(peer: "127.0.0.1", headers: ["x-forwarded-for": "10.0.0.2"]) == "127.0.0.1")
    }

    @Test func connectionsCountedInTotalAndPerAddress() {
        var policy = ConnectionPolicy()
        (policy.maxConnections, policy.maxConnectionsPerAddress, policy.maxRefusing) = (3, 2, 1)
        policy.trustedProxies = ["10.0.0.2"]
        var counts = ConnectionCounts()
        #expect(counts.opened(peer: "a", policy: policy) == .serve)
        #expect(counts.opened(peer: "a", policy: policy) == .serve)
        guard case .refuse(let code, _) = counts.opened(peer: "a", policy: policy) else { return #expect(Bool(false)) }
        #expect(code == "too_many_connections")
        #expect(counts.opened(peer: "a", policy: policy) == .drop, "refusals at their own limit")
        counts.closed(peer: "a", wasServed: false)
        #expect(counts.opened(peer: "10.0.0.2", policy: policy) == .serve, "a trusted proxy has no per-address limit")
        guard case .refuse(let busy, _) = counts.opened(peer: "b", policy: policy) else { return #expect(Bool(false)) }
        #expect(busy == "server_busy" && counts.total == 3)
        counts.closed(peer: "b", wasServed: false)
        counts.closed(peer: "a", wasServed: true)
        #expect(counts.count(from: "a") == 1 && counts.opened(peer: "b", policy: policy) == .serve)
    }
}

extension Result where Failure == HeadError {
    var failureStatus: Int? { if case .failure(let error) = self { error.status } else { nil } }
}
