import Foundation
import PushfanAPNsSim
import PushfanMessages
import Testing

@Suite("Request rules")
struct RequestRulesTests {
    static let token = String(repeating: "ab", count: 32)

    static func request(_ change: (inout SimRequest) -> Void = { _ in }) -> SimRequest {
        var request = SimRequest()
        request.method = "POST"
        request.path = "/3/device/" + token
        request.topic = "com.example.app"
        request.pushType = "alert"
        request.body = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        change(&request)
        return request
    }

    static func judge(_ request: SimRequest) -> Result<CheckedRequest, SimRejection> {
        switch RequestRules.checkTarget(request) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let token): return RequestRules.checkHeadersAndPayload(request, token: token)
        }
    }

    struct Case: Sendable, CustomStringConvertible {
        let description: String
        let request: SimRequest
        let status: Int
        let reason: String
    }

    static let rejections: [Case] = [
        Case(description: "GET", request: request { $0.method = "GET" }, status: 405, reason: "MethodNotAllowed"),
        Case(description: "wrong path", request: request { $0.path = "/2/device/" + token }, status: 404, reason: "BadPath"),
        Case(description: "path with more segments", request: request { $0.path = "/3/device/" + token + "/x" }, status: 404, reason: "BadPath"),
        Case(description: "no token", request: request { $0.path = "/3/device/" }, status: 400, reason: "MissingDeviceToken"),
        Case(description: "odd-length token", request: request { $0.path = "/3/device/" + token + "a" }, status: 400, reason: "BadDeviceToken"),
        Case(description: "non-hex token", request: request { $0.path = "/3/device/" + String(repeating: "zz", count: 32) }, status: 400, reason: "BadDeviceToken"),
        Case(description: "short token", request: request { $0.path = "/3/device/abcd" }, status: 400, reason: "BadDeviceToken"),
        Case(description: "duplicate header", request: request { $0.duplicateHeader = "apns-topic" }, status: 400, reason: "DuplicateHeaders"),
        Case(description: "no topic", request: request { $0.topic = nil }, status: 400, reason: "MissingTopic"),
        Case(description: "topic with a space", request: request { $0.topic = "com.example app" }, status: 400, reason: "BadTopic"),
        Case(description: "unknown push type", request: request { $0.pushType = "banner" }, status: 400, reason: "InvalidPushType"),
        Case(description: "voip without .voip", request: request { $0.pushType = "voip" }, status: 400, reason: "InvalidPushType"),
        Case(description: "alert to a .voip topic", request: request { $0.topic = "com.example.app.voip" }, status: 400, reason: "InvalidPushType"),
        Case(description: "priority 7", request: request { $0.priority = "7" }, status: 400, reason: "BadPriority"),
        Case(description: "background with priority 10", request: request {
            $0.pushType = "background"; $0.priority = "10"; $0.body = Array(#"{"aps":{"content-available":1}}"#.utf8)
        }, status: 400, reason: "BadPriority"),
        Case(description: "expiration not a number", request: request { $0.expiration = "tomorrow" }, status: 400, reason: "BadExpirationDate"),
        Case(description: "negative expiration", request: request { $0.expiration = "-1" }, status: 400, reason: "BadExpirationDate"),
        Case(description: "collapse id of 65 bytes", request: request { $0.collapseID = String(repeating: "c", count: 65) }, status: 400, reason: "BadCollapseId"),
        Case(description: "apns-id not a UUID", request: request { $0.apnsID = "1234" }, status: 400, reason: "BadMessageId"),
        Case(description: "empty body", request: request { $0.body = [] }, status: 400, reason: "PayloadEmpty"),
        Case(description: "4,097 bytes", request: request { $0.body = Array((#"{"aps":{},"x":""# + String(repeating: "x", count: 4097 - 17) + #""}"#).utf8) }, status: 413, reason: "PayloadTooLarge"),
        Case(description: "not JSON", request: request { $0.body = Array("hello".utf8) }, status: 400, reason: "BadPayload"),
        Case(description: "JSON array", request: request { $0.body = Array("[1]".utf8) }, status: 400, reason: "BadPayload"),
        Case(description: "no aps", request: request { $0.body = Array(#"{"x":1}"#.utf8) }, status: 400, reason: "BadPayload"),
        Case(description: "aps not an object", request: request { $0.body = Array(#"{"aps":"hi"}"#.utf8) }, status: 400, reason: "BadPayload"),
        Case(description: "mdm without mdm", request: request { $0.pushType = "mdm"; $0.body = Array(#"{"aps":{}}"#.utf8) }, status: 400, reason: "BadPayload"),
    ]

    @Test("each request rule gives its reason and status", arguments: rejections)
    func rejection(_ testCase: Case) {
        guard case .failure(let rejection) = Self.judge(testCase.request) else {
            Issue.record("\(testCase.description) was accepted")
            return
        }
        #expect(rejection.reason.rawValue == testCase.reason)
        #expect(rejection.status == testCase.status)
        #expect(String(decoding: rejection.body, as: UTF8.self) == #"{"reason":"\#(testCase.reason)"}"#)
    }

    @Test("acceptable requests of every push type")
    func acceptable() throws {
        let cases: [(pushType: String?, topic: String, body: String, priority: String?, expectedPriority: Int, bundle: String)] = [
            (nil, "com.example.app", #"{"aps":{}}"#, nil, 10, "com.example.app"),
            ("alert", "com.example.app", #"{"aps":{"alert":{"title":"t"}},"deep":[1,2.5e3,true,null]}"#, "5", 5, "com.example.app"),
            ("background", "com.example.app", #"{"aps":{"content-available":1}}"#, nil, 5, "com.example.app"),
            ("voip", "com.example.app.voip", #"{"aps":{}}"#, nil, 10, "com.example.app"),
            ("liveactivity", "com.example.app.push-type.liveactivity", #"{"aps":{"event":"end","timestamp":1}}"#, "1", 1, "com.example.app"),
            ("mdm", "com.apple.mgmt.External.x", #"{"mdm":"magic"}"#, nil, 10, "com.apple.mgmt.External.x"),
            ("pushtotalk", "com.example.app.voip-ptt", #"{"aps":{}}"#, nil, 10, "com.example.app"),
        ]
        for item in cases {
            let request = Self.request {
                $0.pushType = item.pushType
                $0.topic = item.topic
                $0.body = Array(item.body.utf8)
                $0.priority = item.priority
                $0.apnsID = "123E4567-E89B-12D3-A456-426614174000"
                $0.collapseID = String(repeating: "c", count: 64)
                $0.expiration = "0"
            }
            let checked = try Self.judge(request).get()
            #expect(checked.bundleID == item.bundle)
            #expect(checked.priority == item.expectedPriority)
            #expect(checked.apnsID == "123e4567-e89b-12d3-a456-426614174000")
            #expect(checked.topic == item.topic)
        }
    }

    @Test("voip allows 5,120 bytes, other types 4,096")
    func sizeLimits() throws {
        func body(_ size: Int) -> [UInt8] {
            let prefix = #"{"aps":{},"x":""#
            return Array((prefix + String(repeating: "x", count: size - prefix.utf8.count - 2) + #""}"#).utf8)
        }
        #expect(body(4096).count == 4096)
        _ = try Self.judge(Self.request { $0.body = body(4096) }).get()
        _ = try Self.judge(Self.request { $0.pushType = "voip"; $0.topic = "a.voip"; $0.body = body(5120) }).get()
        #expect(throws: SimRejection(.payloadTooLarge)) { try Self.judge(Self.request { $0.pushType = "voip"; $0.topic = "a.voip"; $0.body = body(5121) }).get() }
        var huge = Self.request()
        huge.bodyOverflow = 100_000
        #expect(throws: SimRejection(.payloadTooLarge)) { try Self.judge(huge).get() }
    }

    @Test("tokens are matched in lowercase")
    func uppercaseToken() throws {
        let token = try RequestRules.checkTarget(Self.request { $0.path = "/3/device/" + Self.token.uppercased() }).get()
        #expect(token == Self.token)
    }

    @Test("410 bodies carry the timestamp")
    func unregisteredBody() {
        let rejection = SimRejection(.unregistered, timestampMillis: 1_700_000_000_123)
        #expect(rejection.status == 410)
        #expect(String(decoding: rejection.body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1700000000123}"#)
    }
}

@Suite("Payload check")
struct PayloadCheckTests {
    @Test("valid JSON objects with aps", arguments: [
        #"{"aps":{}}"#, #" { "aps" : { "alert" : "h\u00e9\n" } } "#, #"{"a":[],"aps":{"b":[1,-2,3.5,1e-3,0,true,false,null,{}]}}"#,
        #"{"x":"\"aps\"","aps":{}}"#,
    ])
    func valid(_ text: String) {
        #expect(PayloadCheck.isAcceptable(Array(text.utf8), requiring: .apsObject))
    }

    @Test("malformed or without aps", arguments: [
        "", "{", "{}", #"{"aps":{}"#, #"{"aps":{}}x"#, #"{"aps":{},}"#, #"{"aps":01}"#, #"{"aps":{"a":tru}}"#,
        #"{"aps":{"a":"\x"}}"#, #"{'aps':{}}"#, #"{"aps":[]}"#, "{\"aps\":{\"a\":\"\u{01}\"}}",
        String(repeating: "[", count: 100),
    ])
    func invalid(_ text: String) {
        #expect(!PayloadCheck.isAcceptable(Array(text.utf8), requiring: .apsObject))
    }

    @Test("mdm needs a string mdm")
    func mdm() {
        #expect(PayloadCheck.isAcceptable(Array(#"{"mdm":"x"}"#.utf8), requiring: .mdmString))
        #expect(!PayloadCheck.isAcceptable(Array(#"{"mdm":1}"#.utf8), requiring: .mdmString))
    }
}
