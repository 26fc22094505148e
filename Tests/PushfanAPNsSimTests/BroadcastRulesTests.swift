import Foundation
import PushfanAPNsModel
import PushfanAPNsSim
import PushfanMessages
import Testing

/// The simulator's channel rules as APNs documents them, judged whole (credentials off):
/// management requests and broadcasts, each fault with its status and reason.
@Suite("Broadcast channel rules")
struct BroadcastRulesTests {
    static let bundle = "com.example.app"

    static func judge(_ request: SimRequest, _ channels: SimChannels) -> Judgement {
        var credentials = ConnectionCredentials()
        var random = FastRandom(seed: UInt64.random(in: 1...UInt64.max))
        let context = JudgeContext(
            authority: nil, verify: { _, _, _ in .failure(SimRejection(.missingProviderToken)) }, allowedTopics: { _, _ in nil },
            faults: FaultSettings(), deviceRules: nil, channels: channels)
        return RequestJudge.judge(request, credentials: &credentials, context: context, random: &random, nowMillis: 1_790_000_000_000)
    }

    static func request(_ method: String, _ path: String, channel: String? = nil, body: String = "") -> SimRequest {
        var request = SimRequest()
        request.method = method
        request.path = path
        request.channelID = channel
        request.body = Array(body.utf8)
        return request
    }

    static func broadcast(_ channel: String?, _ change: (inout SimRequest) -> Void = { _ in }) -> SimRequest {
        var request = Self.request(
            "POST", "/4/broadcasts/apps/\(bundle)", channel: channel, body: #"{"aps":{"event":"update","timestamp":1790000000,"content-state":{"score":1}}}"#)
        request.pushType = "liveactivity"
        request.priority = "10"
        request.expiration = "0"
        change(&request)
        return request
    }

    static func create(_ channels: SimChannels, policy: Int) throws -> String {
        let judgement = judge(request("POST", "/1/apps/\(bundle)/channels", body: #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#), channels)
        guard case .answered(let answer) = judgement, answer.status == 201, let id = answer.channelID else {
            throw SimRejection(.badRequestPayload)
        }
        return id
    }

    static func reason(_ judgement: Judgement) -> String? {
        if case .rejected(let rejection) = judgement { return "\(rejection.status) \(rejection.reason.rawValue)" }
        return nil
    }

    @Test("management: create, read, list, delete, and each malformed request's answer")
    func management() throws {
        let channels = SimChannels()
        let id = try Self.create(channels, policy: 1)
        #expect(BroadcastChannel.problem(withID: id) == nil)
        guard case .answered(let read) = Self.judge(Self.request("GET", "/1/apps/\(Self.bundle)/channels", channel: id), channels) else {
            Issue.record("read was not answered")
            return
        }
        #expect(read.status == 200 && String(decoding: read.body ?? [], as: UTF8.self) == #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
        guard case .answered(let list) = Self.judge(Self.request("GET", "/1/apps/\(Self.bundle)/all-channels"), channels) else {
            Issue.record("list was not answered")
            return
        }
        #expect(String(decoding: list.body ?? [], as: UTF8.self) == #"{"channels":["\#(id.replacingOccurrences(of: "/", with: "\\/"))"]}"#)
        let path = "/1/apps/\(Self.bundle)/channels"
        let cases: [(SimRequest, String)] = [
            (Self.request("POST", path, body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#), "400 BadRequestPayload"),
            (Self.request("POST", path, body: #"{"message-storage-policy":0,"push-type":"alert"}"#), "400 BadRequestPayload"),
            (Self.request("POST", path, body: #"{"message-storage-policy":0}"#), "400 BadRequestPayload"),
            (Self.request("GET", path), "400 MissingChannelId"),
            (Self.request("GET", path, channel: "not base64!"), "400 BadChannelId"),
            (Self.request("DELETE", path, channel: "AAAAAAAAAAAAAAAAAAAAAA=="), "400 ChannelNotRegistered"),
            (Self.request("GET", "/1/apps/com.example.other/channels", channel: id), "400 ChannelNotRegistered"),
            (Self.request("PUT", path, channel: id), "405 MethodNotAllowed"),
            (Self.request("POST", "/1/apps/\(Self.bundle)/all-channels"), "405 MethodNotAllowed"),
            (Self.request("GET", "/1/apps/\(Self.bundle)/other"), "404 BadPath"),
            (Self.request("GET", "/1/apps//channels"), "404 BadPath"),
        ]
        for (request, expected) in cases {
            #expect(Self.reason(Self.judge(request, channels)) == expected, "\(request.method ?? "") \(request.path ?? "")")
        }
        guard case .answered(let deleted) = Self.judge(Self.request("DELETE", path, channel: id), channels) else {
            Issue.record("delete was not answered")
            return
        }
        #expect(deleted.status == 204 && channels.list(bundle: Self.bundle).isEmpty)
        #expect(Self.reason(Self.judge(Self.request("GET", path, channel: id), channels)) == "400 ChannelNotRegistered")
    }

    @Test("broadcast: accepted as one request to the channel; every rule APNs states refused with its reason")
    func broadcastRules() throws {
        let channels = SimChannels()
        let none = try Self.create(channels, policy: 0)
        let stored = try Self.create(channels, policy: 1)
        guard case .accepted(let checked, let token) = Self.judge(Self.broadcast(none), channels) else {
            Issue.record("a good broadcast was not accepted")
            return
        }
        #expect(token == none && checked.pushType == .liveactivity && checked.bundleID == Self.bundle && checked.priority == 10)
        #expect(Self.reason(Self.judge(Self.broadcast(stored) { $0.expiration = "1790003600" }, channels)) == nil)
        let cases: [(SimRequest, String)] = [
            (Self.broadcast(nil), "400 MissingChannelId"),
            (Self.broadcast("%%%%"), "400 BadChannelId"),
            (Self.broadcast("AAAAAAAAAAAAAAAAAAAAAA=="), "400 ChannelNotRegistered"),
            (Self.broadcast(none) { $0.method = "GET" }, "405 MethodNotAllowed"),
            (Self.broadcast(none) { $0.path = "/4/broadcasts/apps/" }, "404 BadPath"),
            (Self.broadcast(none) { $0.topic = Self.bundle + ".push-type.liveactivity" }, "400 TopicDisallowed"),
            (Self.broadcast(none) { $0.pushType = nil }, "400 MissingPushType"),
            (Self.broadcast(none) { $0.pushType = "alert" }, "400 InvalidPushType"),
            (Self.broadcast(none) { $0.priority = nil }, "400 BadPriority"),
            (Self.broadcast(none) { $0.priority = "7" }, "400 BadPriority"),
            (Self.broadcast(none) { $0.expiration = nil }, "400 BadExpirationDate"),
            (Self.broadcast(none) { $0.expiration = "1790003600" }, "400 BadExpirationDate"),
            (Self.broadcast(none) { $0.apnsID = "nope" }, "400 BadMessageId"),
            (Self.broadcast(none) { $0.body = [] }, "400 PayloadEmpty"),
            (Self.broadcast(none) { $0.bodyOverflow = 5_121 }, "413 PayloadTooLarge"),
            (Self.broadcast(none) { $0.body = Array(#"{"aps":{"event":"start","timestamp":1}}"#.utf8) }, "400 BadRequestPayload"),
            (Self.broadcast(none) { $0.body = Array(#"{"aps":{"event":"update"}}"#.utf8) }, "400 BadRequestPayload"),
            (Self.broadcast(none) { $0.duplicateHeader = "apns-channel-id" }, "400 DuplicateHeaders"),
        ]
        for (request, expected) in cases {
            #expect(Self.reason(Self.judge(request, channels)) == expected, "expected \(expected)")
        }
    }
}
