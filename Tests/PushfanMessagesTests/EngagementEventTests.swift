import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

@Suite("Engagement events and campaign stats")
struct EngagementEventTests {
    static let sendID = EngagementMarker.sendID(campaign: CampaignKey(app: "shop", id: "sale"), device: "d1")
    static let base: JSONValue = [
        "v": 1, "id": "e-1", "app": "shop", "kind": "opened", "device": "d1", "campaign": "sale", "send_id": .string(sendID), "at": 1_790_000_000_000,
    ]

    @Test("the canonical reader reads back every event the writer writes, with each optional field present or not, and leaves any other spelling to the decoder")
    func canonicalReader() throws {
        let sendID = Self.sendID
        let events = [
            EngagementEvent(id: "e-1", app: "shop", kind: .opened, device: "d1", campaign: "sale", variant: "b", sendID: sendID, at: 1_790_000_000_000,
                            action: nil, name: nil, value: nil, currency: nil, receivedAt: 1_790_000_000_500),
            EngagementEvent(id: "e-2", app: "shop", kind: .action, device: "d1", campaign: "sale", variant: nil, sendID: sendID, at: 1_790_000_000_000,
                            action: "buy", name: nil, value: nil, currency: nil, receivedAt: nil),
            EngagementEvent(id: "e-3", app: "shop", kind: .converted, device: "d1", campaign: nil, variant: nil, sendID: nil, at: 1_790_000_000_000,
                            action: nil, name: nil, value: 9.99, currency: "EUR", receivedAt: 1_790_000_000_001),
            EngagementEvent(id: "e-4", app: "shop", kind: .converted, device: "d1", campaign: nil, variant: nil, sendID: nil, at: 1_790_000_000_000,
                            action: nil, name: nil, value: .leastNonzeroMagnitude, currency: nil, receivedAt: nil),
            EngagementEvent(id: "e-5", app: "shop", kind: .custom, device: "d1", campaign: nil, variant: nil, sendID: nil, at: 1_790_000_000_000,
                            action: nil, name: "wishlist", value: nil, currency: nil, receivedAt: nil),
        ]
        for event in events {
            let written = MessageCodec.encode(event)
            #expect(written.withUnsafeBytes { EngagementEvent(canonicalJSON: $0) } == event, "\(String(decoding: written, as: UTF8.self))")
        }
        let written = String(decoding: MessageCodec.encode(events[0]), as: UTF8.self)
        for other in [
            written.replacingOccurrences(of: ",", with: ", "),  // whitespace
            written.replacingOccurrences(of: #""v":1"#, with: #""v":2"#),  // another version
            written.replacingOccurrences(of: #""d1""#, with: #""d\u0031""#),  // an escape
            written.replacingOccurrences(of: #""kind":"opened""#, with: #""kind":"clicked""#),  // a kind the decoder refuses too
            written + " ", "{}", "",
        ] {
            #expect(Data(other.utf8).withUnsafeBytes { EngagementEvent(canonicalJSON: $0) } == nil, "\(other)")
        }
        // The escaped spelling is still an event: the decoder reads it.
        let escaped = written.replacingOccurrences(of: #""d1""#, with: #""d\u0031""#)
        #expect(try MessageCodec.decode(EngagementEvent.self, from: Data(escaped.utf8)) == events[0])
    }

    static let rejects: [RejectCase] = [
        RejectCase("an unknown kind", value: base.setting("kind", "clicked"), code: "invalid_field", field: "kind", mentions: "received, opened, action"),
        RejectCase("an open without its send id", value: base.setting("send_id", nil), code: "invalid_field", field: "send_id", mentions: "about one push"),
        RejectCase("a send id in capitals", value: base.setting("send_id", .string(sendID.uppercased())), code: "invalid_field", field: "send_id", mentions: "16 lowercase hex"),
        RejectCase("a send id without its campaign", value: base.setting("campaign", nil), code: "invalid_field", field: "campaign", mentions: "comes with its campaign"),
        RejectCase("an action without its id", value: base.setting("kind", "action"), code: "invalid_field", field: "action", mentions: "names the action"),
        RejectCase("an action on an open", value: base.setting("action", "track"), code: "invalid_field", field: "action", mentions: "only action events"),
        RejectCase("a custom event without a name", value: base.setting("kind", "custom").setting("send_id", nil).setting("campaign", nil), code: "invalid_field",
                   field: "name", mentions: "has a name"),
        RejectCase("a value on an open", value: base.setting("value", 3), code: "invalid_field", field: "value", mentions: "only converted"),
        RejectCase("a negative value", value: base.setting("kind", "converted").setting("value", -1), code: "invalid_field", field: "value", mentions: "from 0"),
        RejectCase("a currency without a value", value: base.setting("kind", "converted").setting("currency", "EUR"), code: "invalid_field",
                   field: "currency", mentions: "comes with a value"),
        RejectCase("a lowercase currency", value: base.setting("kind", "converted").setting("value", 3).setting("currency", "eur"), code: "invalid_field",
                   field: "currency", mentions: "ISO 4217"),
        RejectCase("a time in seconds", value: base.setting("at", 1_790_000_000), code: "invalid_field", field: "at", mentions: "milliseconds"),
        RejectCase("a device id with a slash", value: base.setting("device", "d/1"), code: "invalid_field", field: "device", mentions: "characters of"),
    ]

    @Test("bad events are refused naming the field", arguments: rejects)
    func refused(_ reject: RejectCase) {
        reject.check(as: EngagementEvent.self)
    }

    @Test("an event reads and writes back the same; a conversion without a campaign is valid; the derived id depends on every field")
    func roundTrip() throws {
        let event = try MessageCodec.decode(EngagementEvent.self, from: Array(Self.base.jsonText.utf8))
        #expect(try MessageCodec.decode(EngagementEvent.self, from: MessageCodec.encode(event)) == event)
        #expect(event.kafkaKey == "shop/d1" && event.campaignKey == CampaignKey(app: "shop", id: "sale"))
        let conversion = Self.base.setting("kind", "converted").setting("campaign", nil).setting("send_id", nil).setting("value", 9.5).setting("currency", "EUR")
        #expect(try MessageCodec.decode(EngagementEvent.self, from: Array(conversion.jsonText.utf8)).value == 9.5)
        let id = EngagementEvent.derivedID(kind: .opened, device: "d1", sendID: Self.sendID, campaign: "sale", at: 1, action: nil, name: nil, value: nil, currency: nil)
        #expect(id == EngagementEvent.derivedID(kind: .opened, device: "d1", sendID: Self.sendID, campaign: "sale", at: 1, action: nil, name: nil, value: nil, currency: nil))
        #expect(id != EngagementEvent.derivedID(kind: .opened, device: "d1", sendID: Self.sendID, campaign: "sale", at: 2, action: nil, name: nil, value: nil, currency: nil))
        #expect(id != EngagementEvent.derivedID(kind: .received, device: "d1", sendID: Self.sendID, campaign: "sale", at: 1, action: nil, name: nil, value: nil, currency: nil))
        #expect(id.hasPrefix("e-") && id.count == 18)
    }

    @Test("stats: rates per delivered device, the holdout's over the devices it held out (not those a cancel ended first), and the lift with its 95 % interval")
    func statsArithmetic() throws {
        let stats = CampaignStats(
            outcomes: ["a": ["delivered": 400, "skipped": 40], "b": ["delivered": 300, "invalid_token": 100], "holdout": ["skipped": 200, "cancelled": 40]],
            engagement: [
                EngagementCount(variant: "a", kind: .opened, detail: "", events: 130, devices: 120, value: 0),
                EngagementCount(variant: "a", kind: .converted, detail: "EUR", events: 60, devices: 60, value: 600),
                EngagementCount(variant: "b", kind: .opened, detail: "", events: 30, devices: 30, value: 0),
                EngagementCount(variant: "b", kind: .converted, detail: "", events: 15, devices: 15, value: 0),
                EngagementCount(variant: "holdout", kind: .converted, detail: "", events: 10, devices: 10, value: 0),
            ])
        guard case .object(let answer) = stats.jsonValue, case .object(let variants)? = answer["variants"],
              case .object(let a)? = variants["a"], case .object(let b)? = variants["b"], case .object(let holdout)? = variants["holdout"]
        else { Issue.record("unexpected shape: \(stats.jsonValue)"); return }
        #expect(a["open_rate"] == .number(0.3) && a["conversion_rate"] == .number(0.15))
        #expect(b["open_rate"] == .number(0.1) && b["conversion_rate"] == .number(0.05))
        #expect(holdout["conversion_rate"] == .number(0.05))
        #expect(a["conversions"] == ["events": 60, "devices": 60, "value": ["EUR": .number(600)]])
        let lift = try #require(stats.holdoutLift)
        // Variants pooled: 75 of the 800 a request went to (100 of b's tokens refused; a's 40
        // skipped before a request are not); holdout 10 of 200.
        #expect(abs(lift.treatedRate - 75.0 / 800) < 1e-12 && abs(lift.holdoutRate - 0.05) < 1e-12)
        // Newcombe's interval from Wilson's: Wilson of 75/800 is 0.0754479-0.1159351, of
        // 10/200 0.0273823-0.0895791 (computed apart from this code).
        let d = 75.0 / 800 - 0.05
        let (l1, u1, l2, u2) = (0.0754479, 0.1159351, 0.0273823, 0.0895791)
        #expect(abs(lift.low - (d - ((75.0 / 800 - l1) * (75.0 / 800 - l1) + (u2 - 0.05) * (u2 - 0.05)).squareRoot())) < 1e-6)
        #expect(abs(lift.high - (d + ((u1 - 75.0 / 800) * (u1 - 75.0 / 800) + (0.05 - l2) * (0.05 - l2)).squareRoot())) < 1e-6)
        #expect(lift.low < d && d < lift.high && lift.low > -0.02 && lift.high < 0.09)
        #expect(CampaignStats(outcomes: ["": ["delivered": 5]], engagement: []).holdoutLift == nil)
        // No conversions anywhere: still an interval around 0, not a point.
        let none = try #require(CampaignStats(outcomes: ["a": ["delivered": 50], "holdout": ["skipped": 50]], engagement: []).holdoutLift)
        #expect(none.absolute == 0 && none.low < -0.05 && none.high > 0.05)
    }
}
