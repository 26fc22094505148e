import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport

/// Broadcast channels in the model: ids as APNs makes them, the campaigns that may address
/// one, the broadcast request, and the one result that stands for the channel.
@Suite("Broadcast channels")
struct BroadcastChannelModelTests {
    static let id = "dHN0LXNyY3gtY2hhbm5lbC0xMjM="

    @Test("channel ids: base64 as APNs makes them", arguments: [
        ("dHN0LXNyY3gtY2hhbm5lbC0xMjM=", true), ("ab+/cd==", true), ("AAAA", true),
        ("", false), ("abc", false), ("abcde", false), ("ab=c", false), ("a===", false), ("not base64!!", false),
        (String(repeating: "A", count: 260), false),
    ])
    func ids(_ id: String, _ valid: Bool) {
        #expect((BroadcastChannel.problem(withID: id) == nil) == valid, "\(id): \(BroadcastChannel.problem(withID: id) ?? "valid")")
    }

    static func campaign(_ audience: String, notification: String? = nil, extra: String = "") -> String {
        let update = #"{"push_type":"liveactivity","aps":{"event":"update","timestamp":1790000000,"content-state":{"score":1}}}"#
        return #"{"v":1,"id":"c","app":"shop","audience":\#(audience),"notification":\#(notification ?? update)\#(extra)}"#
    }

    @Test("a Live Activity update or end may address a channel of the app; nothing else may")
    func campaigns() throws {
        let campaign = try Campaign.decodeRecord(Array(Self.campaign(#"{"channel":"\#(Self.id)"}"#).utf8))
        #expect(campaign.audience == .channel(Self.id) && !campaign.audience.readsTheAppsDevices)
        #expect(try Campaign.decodeRecord(Array(MessageCodec.encode(campaign))) == campaign)
        let refused: [(String, String)] = [
            (Self.campaign(#"{"channel":"\#(Self.id)"}"#, notification: #"{"push_type":"alert","content":{"default":{"body":"Goal"}}}"#), "carries Live Activity updates only"),
            (Self.campaign(#"{"channel":"\#(Self.id)"}"#, notification: #"{"push_type":"liveactivity","aps":{"event":"start","timestamp":1790000000,"content-state":{},"attributes-type":"Match","attributes":{}}}"#), "carries Live Activity updates only"),
            (Self.campaign(#"{"channel":"not base64!!"}"#), "is not base64"),
            (Self.campaign(#"{"channel":"\#(Self.id)"}"#, extra: #","holdout":10"#), "no variants or holdout"),
            (Self.campaign(#"{"channel":"\#(Self.id)","activity":"m-1"}"#), "found \"activity\" and \"channel\""),
        ]
        for (text, reason) in refused {
            do {
                _ = try Campaign.decodeRecord(Array(text.utf8))
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.description.contains(reason), "\(error.description)")
            }
        }
    }

    @Test("the broadcast request: the bundle id in the path, the channel in a header, no topic or collapse id, expiration 0 unless given")
    func request() throws {
        let payload = try APNsPreparedPayload(
            APNsPayload(json: ["aps": .object(["event": .string("end"), "timestamp": .int(1_790_000_000), "content-state": .object([:])])]),
            pushType: .liveactivity, priority: .powerConsiderate)
        let broadcast = try APNsNotification(channel: Self.id, bundleID: "com.example.shop", prepared: payload)
        #expect(broadcast.path == "/4/broadcasts/apps/com.example.shop" && broadcast.token == nil && broadcast.destination == .channel(Self.id))
        let headers = Dictionary(uniqueKeysWithValues: broadcast.headers)
        #expect(headers["apns-channel-id"] == Self.id && headers["apns-topic"] == nil && headers["apns-collapse-id"] == nil)
        #expect(headers["apns-expiration"] == "0" && headers["apns-push-type"] == "liveactivity" && headers["apns-priority"] == "5")
        let stored = try APNsNotification(channel: Self.id, bundleID: "com.example.shop", prepared: payload, expiration: .at(epochSeconds: 1_790_003_600))
        #expect(Dictionary(uniqueKeysWithValues: stored.headers)["apns-expiration"] == "1790003600")
        let alert = try APNsPreparedPayload(APNsPayload(json: ["aps": .object(["alert": .string("hi")])]), pushType: .alert)
        #expect(throws: APNsRequestError.self) { try APNsNotification(channel: Self.id, bundleID: "com.example.shop", prepared: alert) }
        #expect((try? APNsNotification(channel: "a b", bundleID: "com.example.shop", prepared: payload)) == nil)
    }

    @Test("a broadcast's one result: the channel as its device, broadcast true, in both JSON forms")
    func result() throws {
        let result = DeviceResult(
            campaign: CampaignKey(app: "shop", id: "score-1"), device: Self.id, outcome: .delivered, status: 200, attempts: 1, at: 1_790_000_000_000,
            broadcast: true)
        let json = result.encodedJSON()
        #expect(json == Array(MessageCodec.encodeGenerically(ResultRecord.device(result))))
        #expect(String(decoding: json, as: UTF8.self).contains(#""attempts":1,"broadcast":true,"campaign""#))
        #expect(json.withUnsafeBytes { DeviceResult(canonicalJSON: $0) } == result)
        #expect(try MessageCodec.decodeGenerically(ResultRecord.self, from: Data(json)) == .device(result))
        var device = result
        device.broadcast = false
        #expect(throws: MessageDecodingError.self) { try device.validate() }
    }
}
