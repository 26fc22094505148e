import Testing

@testable import PushfanAPI

/// The API's pure pieces: routing by method and path with parameters, Basic credentials,
/// and the failed-authentication throttle.
@Suite struct RoutingTests {
    @Test func routesByMethodAndPathWithParameters() {
        var router = Router<String>()
        router.add("PUT", "/v1/apps/{app}/devices/{device}", "register")
        router.add("GET", "/v1/apps/{app}/devices/{device}", "read")
        router.add("GET", "/healthz", "health")
        guard case .found(let handler, let parameters, let pattern) = router.match(method: "PUT", path: "/v1/apps/shop/devices/d%3A1") else {
            Issue.record("no match")
            return
        }
        #expect(handler == "register" && parameters == ["app": "shop", "device": "d:1"] && pattern == "/v1/apps/{app}/devices/{device}")
        // A segment that starts with an emoji modifier or a combining mark is still its own
        // segment (a path arrives decoded; `/🏻` is one character): it routes, and the
        // handler refuses the app, as for any unknown one.
        guard case .found(_, let odd, _) = router.match(method: "GET", path: "/v1/apps/🏻/devices/\u{301}x") else {
            Issue.record("a segment starting with a modifier did not route")
            return
        }
        #expect(odd == ["app": "🏻", "device": "\u{301}x"])
        if case .methodNotAllowed(let allowed) = router.match(method: "DELETE", path: "/v1/apps/shop/devices/d1") {
            #expect(allowed == ["PUT", "GET"])
        } else {
            Issue.record("DELETE should be 405")
        }
        // A literal segment beats a parameter in its place.
        router.add("POST", "/v1/apps/{app}/segments/count", "count")
        router.add("GET", "/v1/apps/{app}/segments/{name}", "segment")
        if case .methodNotAllowed(let allowed) = router.match(method: "GET", path: "/v1/apps/shop/segments/count") {
            #expect(allowed == ["POST"])
        } else {
            Issue.record("GET /segments/count should be 405 with POST only")
        }
        guard case .found("segment", _, _) = router.match(method: "GET", path: "/v1/apps/shop/segments/english") else {
            Issue.record("a named segment")
            return
        }
        // An id holding a control character names nothing, and is said to.
        for (path, parameter) in [("/v1/apps/shop/devices/d1%00", "device"), ("/v1/apps/shop%0A/devices/d1", "app"), ("/v1/apps/shop/devices/d%7F", "device")] {
            guard case .controlCharacter(parameter) = router.match(method: "GET", path: path) else {
                Issue.record("\(path) was not refused for its \(parameter)")
                continue
            }
        }
        // An empty id never names anything.
        for path in ["/v1/apps/shop/devices", "/v1/apps/shop/devices/d1/extra", "/nothing", "/v1/apps//devices/d1"] {
            guard case .notFound = router.match(method: "GET", path: path) else {
                Issue.record("\(path) matched")
                continue
            }
        }
        guard case .found("health", _, _) = router.match(method: "GET", path: "/healthz/") else {
            Issue.record("a trailing slash is the same path")
            return
        }
    }

    @Test func parametersArePercentDecodedAndMalformedEscapesKeptAsSent() {
        #expect(Router<String>.percentDecoded("plain-id") == "plain-id")
        #expect(Router<String>.percentDecoded("d%3A1%2f%C3%A9") == "d:1/é")
        // A broken escape or bytes that are not UTF-8: the segment as it came.
        for kept in ["100%", "a%4", "%zz", "%C3"] { #expect(Router<String>.percentDecoded(Substring(kept)) == kept) }
    }

    @Test func basicCredentials() {
        #expect(APIService.basicCredentials("Basic c2hvcDpzM2NyZXQ6eA==").map { [$0.0, $0.1] } == ["shop", "s3cret:x"])
        #expect(APIService.basicCredentials("basic \tc2hvcDpzM2NyZXQ6eA==  ").map { [$0.0, $0.1] } == ["shop", "s3cret:x"])
        #expect(HTTPRequest.trimmingSpaces(" \t ") == "" && HTTPRequest.trimmingSpaces(" application/json ") == "application/json")
        // `shop\0x:s3cret` and `shop\nx:s3cret`: a key holding a control character is malformed.
        for bad in [nil, "Bearer abc", "Basic !!!", "Basic c2hvcA==", "Basic", "Basic c2hvcAB4OnMzY3JldA==", "Basic c2hvcAp4OnMzY3JldA=="] as [String?] {
            #expect(APIService.basicCredentials(bad) == nil, "\(bad ?? "nil")")
        }
    }

    @Test func bearerSchemeInAnyCase() {
        #expect(APIService.bearerToken("Bearer abc") == "abc")
        #expect(APIService.bearerToken("bearer  abc ") == "abc")
        #expect(APIService.bearerToken("BEARER abc") == "abc")
        for bad in [nil, "Bearer", "Bearer ", "Bearerabc", "Basic abc", "Token abc"] as [String?] {
            #expect(APIService.bearerToken(bad) == nil, "\(bad ?? "nil")")
        }
    }

    @Test func throttleStartsAfterTenFailuresAndLifts() {
        var throttle = AuthThrottle(limit: 10, window: .seconds(60))
        let start = ContinuousClock.now
        let (shop, client) = ("app:shop", "10.0.0.1")
        for second in 0..<9 { throttle.failed(credential: shop, client: client, now: start + .seconds(second)) }
        #expect(throttle.retryAfter(credential: shop, client: client, now: start + .seconds(9)) == nil)
        throttle.failed(credential: shop, client: client, now: start + .seconds(9))
        #expect(throttle.retryAfter(credential: shop, client: client, now: start + .seconds(10)) == 50)
        #expect(throttle.retryAfter(credential: shop, client: "10.0.0.2", now: start + .seconds(10)) == nil, "another client is not blocked")
        #expect(throttle.retryAfter(credential: "app:news", client: client, now: start + .seconds(10)) == nil, "another app is not blocked")
        #expect(throttle.retryAfter(credential: "admin", client: client, now: start + .seconds(10)) == nil, "nor the admin token")
        #expect(throttle.retryAfter(credential: shop, client: client, now: start + .seconds(61)) == nil)
        // A new failure after the window starts counting again.
        throttle.failed(credential: shop, client: client, now: start + .seconds(61))
        #expect(throttle.retryAfter(credential: shop, client: client, now: start + .seconds(62)) == nil)
        throttle.succeeded(credential: shop, client: client)
        #expect(throttle.retryAfter(credential: shop, client: client, now: start + .seconds(62)) == nil)
    }

    @Test("a flood of made-up credentials keeps the throttle within its capacity; a blocked pair stays blocked through it and a guesser's count is not reset by it")
    func throttleStaysBoundedUnderAFlood() {
        var throttle = AuthThrottle(limit: 3, window: .seconds(60), capacity: 100)
        let start = ContinuousClock.now
        for _ in 0..<3 { throttle.failed(credential: "app:shop", client: "10.0.0.1", now: start) }
        for _ in 0..<2 { throttle.failed(credential: "app:news", client: "10.0.0.9", now: start) }
        let long = String(repeating: "k", count: 20_000)
        for index in 0..<1_000 {
            throttle.failed(credential: "app:\(index)" + long, client: "10.0.0.2", now: start + .milliseconds(index))
            #expect(throttle.tracked <= 100)
        }
        #expect(throttle.retryAfter(credential: "app:shop", client: "10.0.0.1", now: start + .seconds(1)) == 59)
        // Two guesses before the flood, one after: blocked, as without the flood.
        throttle.failed(credential: "app:news", client: "10.0.0.9", now: start + .seconds(1))
        #expect(throttle.retryAfter(credential: "app:news", client: "10.0.0.9", now: start + .seconds(1)) == 59)
        // Long made-up keys count under their first bytes: all these are one pair.
        for second in 0..<3 { throttle.failed(credential: "app:x" + long + "\(second)", client: "10.0.0.3", now: start + .seconds(2)) }
        #expect(throttle.retryAfter(credential: "app:x" + long + "other", client: "10.0.0.3", now: start + .seconds(2)) == 60)
    }
}
