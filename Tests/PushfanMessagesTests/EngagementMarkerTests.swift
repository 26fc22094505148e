import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport

@Suite("Engagement marker")
struct EngagementMarkerTests {
    static func campaign(_ json: JSONValue) throws -> Campaign {
        try MessageCodec.decode(Campaign.self, from: Array(json.jsonText.utf8))
    }

    static func object(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("each device's payload carries the campaign, its variant and its own send id; nothing else differs")
    func stampedPerDevice() throws {
        let campaign = try Self.campaign(CampaignTests.base.setting("variants", [["id": "short", "weight": 1]]))
        let prepared = try APNsPreparedPayload(campaign: campaign.applying(variant: 0), locale: "de", marker: EngagementMarker(campaign: campaign.id, variant: "short"))
        let first = EngagementMarker.sendID(campaign: campaign.key, device: "device-1")
        let second = EngagementMarker.sendID(campaign: campaign.key, device: "device-2")
        #expect(first != second && EngagementMarker.isSendID(first) && EngagementMarker.isSendID(second))
        let one = try Self.object(prepared.stamped(sendID: first).bytes)
        let two = try Self.object(prepared.stamped(sendID: second).bytes)
        #expect(one["pushfan"] as? [String: String] == ["campaign": "spring-sale-2026", "variant": "short", "send_id": first])
        #expect((two["pushfan"] as? [String: String])?["send_id"] == second)
        #expect(one["deeplink"] as? String == "shop://sale" && (one["aps"] as? [String: Any])?["badge"] as? Int == 1)
        // Only the send id's 16 bytes differ between two devices' payloads.
        let a = prepared.stamped(sendID: first).bytes, b = prepared.stamped(sendID: second).bytes
        #expect(a.count == b.count && zip(a, b).filter { $0 != $1 }.count <= EngagementMarker.sendIDLength)
        // Without variants the marker has no variant.
        let plain = try APNsPreparedPayload(campaign: campaign, locale: nil, marker: EngagementMarker(campaign: campaign.id, variant: nil))
        #expect(try Self.object(plain.stamped(sendID: first).bytes)["pushfan"] as? [String: String] == ["campaign": "spring-sale-2026", "send_id": first])
    }

    @Test("send ids keep their definition (pushes already sent carry them): FNV-1a of the campaign and of campaign and device, spread, as 8 + 8 hex digits, leading zeros kept")
    func sendIDsKeepTheirDefinition() {
        // Worked out apart from this code (a few lines of Python on the definition).
        let pinned: [(String, String, String, String)] = [
            ("shop", "sale", "d1", "5c6c450b0549fc12"),
            ("shop", "sale", "device-ünïcode-42", "5c6c450b10baabb8"),
            ("news", "spring-sale-2026", "A1B2C3D4-0000-4000-8000-000000000001", "5fac4eaef49a6a92"),
        ]
        for (app, id, device, expected) in pinned {
            let key = CampaignKey(app: app, id: id)
            #expect(EngagementMarker.sendID(campaign: key, device: device) == expected)
            #expect(EngagementMarker.SendIDs(key).sendID(device: device) == expected)
        }
        // Hashing in parts is hashing the whole, which is what lets a part be hashed once.
        for (head, tail) in [("", ""), ("send\nshop/sale\n", "d1"), ("spring/", "ünïcode"), ("a", "")] {
            #expect(FNV1a.hash(tail, after: FNV1a.hash(head)) == FNV1a.hash(head + tail))
        }
    }

    @Test("a send id is the same for every attempt to one device and differs by campaign and app")
    func sendIDIsStable() {
        let id = EngagementMarker.sendID(campaign: CampaignKey(app: "shop", id: "sale"), device: "d1")
        #expect(id == EngagementMarker.sendID(campaign: CampaignKey(app: "shop", id: "sale"), device: "d1"))
        #expect(id != EngagementMarker.sendID(campaign: CampaignKey(app: "news", id: "sale"), device: "d1"))
        #expect(id != EngagementMarker.sendID(campaign: CampaignKey(app: "shop", id: "sale2"), device: "d1"))
        // The first half names the campaign: the same for each of its devices.
        let sale = CampaignKey(app: "shop", id: "sale")
        #expect(EngagementMarker.campaignTag(ofSendID: id) == EngagementMarker.campaignTag(sale))
        #expect(EngagementMarker.sendID(campaign: sale, device: "d2").prefix(8) == id.prefix(8))
        #expect(EngagementMarker.campaignTag(ofSendID: "not-a-send-id") == nil)
        #expect(!EngagementMarker.isSendID("0123") && !EngagementMarker.isSendID("0123456789ABCDEF") && EngagementMarker.isSendID("0123456789abcdef"))
    }

    @Test("the marker counts against the payload limit: a campaign that fits only without it is refused at submit, naming the field")
    func markerCountsAgainstTheLimit() throws {
        let fitting = try Self.campaign(CampaignTests.base)
        let without = try APNsPreparedPayload(campaign: fitting, locale: nil, marker: nil).bytes.count
        let with = try APNsPreparedPayload(campaign: fitting, locale: nil, marker: EngagementMarker(campaign: fitting.id, variant: nil)).bytes.count
        let markerBytes = with - without
        #expect(markerBytes == #","pushfan":{"campaign":"spring-sale-2026","send_id":"0000000000000000"}"#.utf8.count)
        // A body that takes the default payload to 4,096 bytes without the marker.
        let body = String(repeating: "x", count: 4_096 - without + "20% off".utf8.count)
        let json = CampaignTests.base.setting("notification.content.default.body", .string(body))
        do {
            _ = try Self.campaign(json)
            Issue.record("a payload over the limit with its marker was accepted")
        } catch let error as MessageDecodingError {
            #expect(error.code == "payload_too_large" && error.field == "notification" && error.description.contains("4096"), "\(error)")
        }
    }

    @Test("MDM pushes carry no marker: their body is Apple's")
    func mdmHasNone() throws {
        let campaign = try Self.campaign(CampaignTests.base.setting("notification", ["push_type": "mdm", "data": ["mdm": "magic-1"]]).setting("options.collapse_id", nil))
        let prepared = try APNsPreparedPayload(campaign: campaign, locale: nil, marker: EngagementMarker(campaign: campaign.id, variant: nil))
        #expect(prepared.stamped(sendID: "0123456789abcdef").bytes == Data(#"{"mdm":"magic-1"}"#.utf8))
    }
}

@Suite("Notificare marker")
struct NotificareMarkerTests {
    @Test("a push for Notificare's SDK carries its keys beside the marker, the notification id naming campaign and variant; the send id is still stamped per device")
    func keysBesideTheMarker() throws {
        let campaign = try EngagementMarkerTests.campaign(
            CampaignTests.base.setting("variants", [["id": "short", "weight": 1]]).setting("notification.data.media_url", "https://cdn.example.com/a/sale.PNG?v=2"))
        let notificare = NotificareMarker(application: "shop", campaign: campaign.id, variant: "short")
        let marker = EngagementMarker(campaign: campaign.id, variant: "short", notificare: notificare)
        let prepared = try APNsPreparedPayload(campaign: campaign.applying(variant: 0), locale: nil, marker: marker)
        let sendID = EngagementMarker.sendID(campaign: campaign.key, device: "device-1")
        let payload = try EngagementMarkerTests.object(prepared.stamped(sendID: sendID).bytes)
        #expect(payload["x-sender"] as? String == "notificare" && payload["x-application"] as? String == "shop")
        #expect(payload["id"] as? String == "spring-sale-2026~short" && payload["notificationId"] as? String == "spring-sale-2026~short")
        #expect(payload["notificationType"] as? String == "re.notifica.notification.Alert")
        #expect(payload["attachment"] as? [String: String] == ["mimeType": "image/png", "uri": "https://cdn.example.com/a/sale.PNG?v=2"])
        #expect((payload["pushfan"] as? [String: String])?["send_id"] == sendID && payload["deeplink"] as? String == "shop://sale")
        // Without rich media, no attachment.
        let plain = try APNsPreparedPayload(campaign: try EngagementMarkerTests.campaign(CampaignTests.base), locale: nil, marker: marker)
        #expect(try EngagementMarkerTests.object(plain.bytes)["attachment"] == nil)
    }

    @Test("a notification id reads back as its campaign and variant; anything else names none", arguments: [
        ("sale", "sale", nil), ("sale~b", "sale", "b"), ("spring.sale:2026~v-1", "spring.sale:2026", "v-1"),
        ("", nil, nil), ("sale~", nil, nil), ("~b", nil, nil), ("sale~b~c", nil, nil), ("two words", nil, nil), ("a/b", nil, nil),
    ] as [(String, String?, String?)])
    func notificationIDs(id: String, campaign: String?, variant: String?) {
        let parsed = NotificareMarker.campaign(ofNotificationID: id)
        #expect(parsed?.campaign == campaign && parsed?.variant == variant)
        if let campaign { #expect(NotificareMarker.notificationID(campaign: campaign, variant: variant) == id) }
    }

    @Test("the attachment's type comes from the URL's file extension; an unknown one is taken for a JPEG")
    func mimeTypes() {
        #expect(NotificareMarker.mimeType(of: "https://cdn.example.com/clip.mp4") == "video/mp4")
        #expect(NotificareMarker.mimeType(of: "https://cdn.example.com/x.gif?size=2") == "image/gif")
        #expect(NotificareMarker.mimeType(of: "https://cdn.example.com/photo") == "image/jpeg")
        #expect(NotificareMarker.mimeType(of: "https://cdn.example.com/v1.2/photo") == "image/jpeg")
    }
}
