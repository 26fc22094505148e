import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport
@testable import PushfanTemplates

/// A/B variants: who gets which, what each sends, and every way a campaign's variants are refused.
@Suite struct CampaignVariantTests {
    static let withVariants: JSONValue = CampaignTests.base
        .setting("variants", [
            ["id": "a", "weight": 50],
            ["id": "b", "weight": 30, "content": ["default": ["title": "Last chance", "body": "Ends tonight"]],
             "aps": ["sound": "chime.caf"], "data": ["deeplink": "shop://last-chance", "variant_note": "b"]],
        ])
        .setting("holdout", 20)

    static func campaign(_ json: JSONValue = withVariants) throws -> Campaign {
        try MessageCodec.decode(Campaign.self, from: Array(json.jsonText.utf8))
    }

    @Test("100,000 devices split within 1% of the weights, the same way every time")
    func splitFollowsTheWeights() throws {
        let campaign = try Self.campaign()
        var counts: [Campaign.Share: Int] = [:]
        let devices = 100_000
        for index in 0..<devices { counts[campaign.share(of: "device-\(index)"), default: 0] += 1 }
        let shares = counts.mapValues { Double($0) / Double(devices) }
        #expect(abs((shares[.variant(0)] ?? 0) - 0.5) < 0.01, "\(shares)")
        #expect(abs((shares[.variant(1)] ?? 0) - 0.3) < 0.01, "\(shares)")
        #expect(abs((shares[.holdout] ?? 0) - 0.2) < 0.01, "\(shares)")
        #expect(counts.values.reduce(0, +) == devices && counts[.base] == nil)

        // A function of the campaign id and the device id only: a decoded copy (another
        // worker, a re-plan) agrees on every device; another campaign splits independently.
        let again = try Self.campaign()
        #expect((0..<1_000).allSatisfy { campaign.share(of: "device-\($0)") == again.share(of: "device-\($0)") })
        var other = campaign
        other.id = "spring-sale-2027"
        let moved = (0..<1_000).filter { campaign.share(of: "device-\($0)") != other.share(of: "device-\($0)") }.count
        #expect(moved > 300, "another campaign's split is its own: \(moved) of 1000 differ")
        #expect(campaign.variantID(of: "device-1") == campaign.share(of: "device-1").variantIDIn(campaign))
    }

    @Test func aCampaignWithoutVariantsSendsItsNotificationToEveryone() throws {
        let plain = try Self.campaign(CampaignTests.base)
        #expect(plain.share(of: "device-1") == .base && plain.variantID(of: "device-1") == nil)
        // Written as before: no variants or holdout key.
        let text = String(decoding: MessageCodec.encode(plain), as: UTF8.self)
        #expect(!text.contains("variants") && !text.contains("holdout"))
    }

    @Test("a variant replaces the texts and sets its aps and data keys over the notification's")
    func applyingAVariant() throws {
        let campaign = try Self.campaign()
        let b = campaign.applying(variant: 1)
        #expect(b.notification.content?.text(forLocale: "de_DE")?.title == "Last chance", "its texts replace every locale's")
        #expect(b.notification.aps == ["sound": "chime.caf", "badge": 1])
        #expect(b.notification.data == ["deeplink": "shop://last-chance", "variant_note": "b"])
        #expect(b.variants.isEmpty && b.holdout == 0)
        let a = campaign.applying(variant: 0)
        #expect(a.notification == campaign.notification, "a variant with no overrides sends the notification as given")
        // Encoded and decoded, the campaign keeps its variants.
        #expect(try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign)) == campaign)
    }

    static let rejects: [RejectCase] = [
        RejectCase("nine variants", value: withVariants.setting("variants", .array((0..<9).map { ["id": .string("v\($0)"), "weight": 1] })),
                   code: "invalid_field", field: "variants", mentions: "at most 8"),
        RejectCase("a repeated variant id", value: withVariants.setting("variants", [["id": "a", "weight": 1], ["id": "a", "weight": 2]]),
                   code: "invalid_field", field: "variants[1].id", mentions: "repeats variants[0].id"),
        RejectCase("a variant id with a space", value: withVariants.setting("variants", [["id": "a b", "weight": 1]]),
                   code: "invalid_field", field: "variants[0].id", mentions: "A-Z a-z 0-9"),
        RejectCase("a variant named holdout", value: withVariants.setting("variants", [["id": "holdout", "weight": 1]]),
                   code: "invalid_field", field: "variants[0].id", mentions: "names the holdout"),
        RejectCase("a weight of 0", value: withVariants.setting("variants", [["id": "a", "weight": 0]]),
                   code: "invalid_field", field: "variants[0].weight", mentions: "from 1 to 10000, got 0"),
        RejectCase("a variant without a weight", value: withVariants.setting("variants", [["id": "a"]]),
                   code: "wrong_schema", field: "variants[0].weight", mentions: "required field is missing"),
        RejectCase("a negative holdout", value: withVariants.setting("holdout", -1),
                   code: "invalid_field", field: "holdout", mentions: "from 0 to 10000"),
        RejectCase("a holdout without variants", value: CampaignTests.base.setting("holdout", 10),
                   code: "invalid_field", field: "holdout", mentions: "needs variants"),
        RejectCase("a variant's bad aps key", value: withVariants.setting("variants", [["id": "a", "weight": 1], ["id": "b", "weight": 1, "aps": ["badge": "many"]]]),
                   code: "invalid_field", field: "variants[1].aps.badge", mentions: "badge"),
        RejectCase("a variant's empty default texts", value: withVariants.setting("variants", [["id": "a", "weight": 1, "content": ["default": [:]]]]),
                   code: "invalid_field", field: "variants[0].content.default", mentions: "needs a title"),
        RejectCase("a variant choosing another Live Activity type", value: withVariants.setting("variants", [["id": "a", "weight": 1], ["id": "b", "weight": 1, "aps": ["attributes-type": "RaceActivity"]]]),
                   code: "invalid_field", field: "variants[1].aps.attributes-type", mentions: "decides which token the push goes to"),
        RejectCase("a variant turning updates into starts", value: withVariants.setting("variants", [["id": "a", "weight": 1, "aps": ["event": "start"]]]),
                   code: "invalid_field", field: "variants[0].aps.event", mentions: "set it in notification.aps"),
        RejectCase("a variant's data with aps", value: withVariants.setting("variants", [["id": "a", "weight": 1, "data": ["aps": [:]]]]),
                   code: "invalid_field", field: "variants[0].data.aps", mentions: "must not contain"),
    ]

    @Test("refuses variants with a clear error at their own field", arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: Campaign.self)
    }

    /// The first JSON example under a heading of docs/messages.md, as text.
    static func documentedJSON(under heading: String) throws -> String {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/messages.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let section = try #require(text.range(of: heading))
        let block = try #require(text[section.upperBound...].range(of: "```json\n"))
        let end = try #require(text[block.upperBound...].range(of: "```"))
        return String(text[block.upperBound..<end.lowerBound])
    }

    static func documentedTemplate(under heading: String) throws -> NotificationTemplate {
        try NotificationTemplate.decode(Array(try documentedJSON(under: heading).utf8))
    }

    /// The first JSON example under a heading of docs/messages.md, decoded as a campaign.
    static func documentedCampaign(under heading: String) throws -> Campaign {
        try MessageCodec.decode(Campaign.self, from: Data(try documentedJSON(under: heading).utf8))
    }

    @Test("the examples of docs/messages.md are accepted as they are")
    func documentedExamplesAreAccepted() throws {
        let example = try Self.documentedCampaign(under: "### A/B variants and a holdout")
        #expect(example.variants.map(\.id) == ["control", "urgent"] && example.holdout == 10)
        #expect(example.applying(variant: 1).notification.aps?["interruption-level"] == "time-sensitive")
        let actions = try Self.documentedCampaign(under: "### Interactive actions with parameters")
        #expect(actions.notification.actions.map(\.id) == ["track", "rate"])
        #expect(actions.notification.custom["action_params"] == ["track": ["url": "shop://orders/77"], "rate": ["stars": 5]])
        let personalised = try Self.documentedCampaign(under: "### Personalised texts")
        #expect(personalised.isPersonalised)
        var cache = TemplateCache()
        let device = TemplateDevice(id: "d-9", locale: "en_GB", attributes: ["first_name": "ada", "points": 1200, "tier": "gold member plus"])
        let sent = personalised.notification.personalised(for: device, locale: "en_GB", templates: &cache)
        #expect(sent.content?.defaultText == Campaign.LocalizedText(title: "Hi Ada", body: "You have 1200 points. GOLD MEMBER…"))
        #expect(sent.data?["deeplink"] == "shop://points?device=d-9")
        let stored = try Self.documentedTemplate(under: "### Stored templates")
        let shipped = try Self.documentedCampaign(under: "`data.media_url` wins:")
        #expect(shipped.notification.template == "order-update")
        let resolved = try shipped.resolved(with: stored)
        #expect(resolved.notification.aps?["thread-id"] == "order-77" && resolved.notification.actions.map(\.id) == ["track", "rate"])
        let receipt = try Self.documentedCampaign(under: "### Frequency caps")
        #expect(receipt.options.ignoreFrequencyCaps && !receipt.countsTowardFrequencyCaps)
    }

    @Test("device results carry their variant, written and read in the canonical form")
    func resultsCarryTheVariant() throws {
        let result = DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: "d", outcome: .delivered, status: 200, attempts: 1, at: 5, variant: "b")
        #expect(result.encodedJSON() == Array(MessageCodec.encodeGenerically(ResultRecord.device(result))))
        #expect(String(decoding: result.encodedJSON(), as: UTF8.self).hasSuffix(#","v":1,"variant":"b"}"#))
        #expect(result.encodedJSON().withUnsafeBytes { DeviceResult(canonicalJSON: $0) } == result)
        #expect(try MessageCodec.decodeGenerically(ResultRecord.self, from: Data(result.encodedJSON())) == .device(result))
        // Found by the records fuzzer: a 19-digit number (any Int64 the writer prints) was
        // refused by the fast reader, which sent such results down the slow path.
        let late = DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: "d", outcome: .delivered, attempts: 0, at: 1_773_993_177_399_612_345)
        #expect(late.encodedJSON().withUnsafeBytes { DeviceResult(canonicalJSON: $0) } == late)
        let tooLarge = Array(#"{"apns_id":null,"at":9223372036854775808,"#.utf8)
        #expect(tooLarge.withUnsafeBytes { DeviceResult(canonicalJSON: $0) } == nil, "past Int64: left to the decoder")
    }
}

extension Campaign.Share {
    func variantIDIn(_ campaign: Campaign) -> String? {
        if case .variant(let index) = self { return campaign.variants[index].id }
        return nil
    }
}

/// Interactive notifications: actions with parameters, carried under `action_params`.
@Suite struct CampaignActionTests {
    static let withActions: JSONValue = CampaignTests.base
        .setting("notification.aps", ["sound": "default", "category": "SALE_ACTIONS"])
        .setting("notification.actions", [
            ["id": "buy", "params": ["sku": "A-123", "coupon": "SPRING20"]],
            ["id": "remind_later", "params": ["hours": 4]],
            ["id": "dismiss"],
        ])

    @Test("each action's parameters go under action_params, keyed by its identifier, beside the data")
    func actionsInThePayload() throws {
        let campaign = try MessageCodec.decode(Campaign.self, from: Array(Self.withActions.jsonText.utf8))
        let payload = try APNsPreparedPayload(campaign: campaign, locale: "en_US", marker: nil)
        let sent = try #require(try JSONSerialization.jsonObject(with: payload.bytes) as? [String: Any])
        let params = try #require(sent["action_params"] as? [String: [String: Any]])
        #expect(Set(params.keys) == ["buy", "remind_later", "dismiss"])
        #expect(params["buy"]?["sku"] as? String == "A-123" && params["remind_later"]?["hours"] as? Int == 4 && params["dismiss"]?.isEmpty == true)
        #expect(sent["deeplink"] as? String == "shop://sale")
        #expect((sent["aps"] as? [String: Any])?["category"] as? String == "SALE_ACTIONS")
        #expect(try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign)) == campaign)
    }

    @Test("an app's default category fills in for alert campaigns that name none, and only those")
    func defaultCategory() throws {
        let plain = try MessageCodec.decode(Campaign.self, from: Array(CampaignTests.base.jsonText.utf8))
        #expect(plain.applyingDefaultCategory("SHOP").notification.aps?["category"] == "SHOP")
        #expect(plain.applyingDefaultCategory(nil) == plain)
        let named = try MessageCodec.decode(Campaign.self, from: Array(Self.withActions.jsonText.utf8))
        #expect(named.applyingDefaultCategory("SHOP").notification.aps?["category"] == "SALE_ACTIONS", "its own category wins")
        let background = try MessageCodec.decode(Campaign.self, from: Array(CampaignTests.background.jsonText.utf8))
        #expect(background.applyingDefaultCategory("SHOP") == background, "a background push shows nothing to categorise")
        // A variant that sets its own category keeps it over the default.
        var variants = try CampaignVariantTests.campaign()
        variants.variants[1].aps = ["category": "LAST_CHANCE"]
        let applied = variants.applyingDefaultCategory("SHOP")
        #expect(applied.applying(variant: 0).notification.aps?["category"] == "SHOP")
        #expect(applied.applying(variant: 1).notification.aps?["category"] == "LAST_CHANCE")
    }

    static let rejects: [RejectCase] = [
        RejectCase("actions without a category", value: withActions.setting("notification.aps", ["sound": "default"]),
                   code: "invalid_field", field: "notification.actions", mentions: "needs notification.aps.category"),
        RejectCase("eleven actions", value: withActions.setting("notification.actions", .array((0..<11).map { ["id": .string("a\($0)")] })),
                   code: "invalid_field", field: "notification.actions", mentions: "at most 10"),
        RejectCase("a repeated action", value: withActions.setting("notification.actions", [["id": "buy"], ["id": "buy"]]),
                   code: "invalid_field", field: "notification.actions[1].id", mentions: "repeats notification.actions[0].id"),
        RejectCase("an action id with a space", value: withActions.setting("notification.actions", [["id": "buy now"]]),
                   code: "invalid_field", field: "notification.actions[0].id", mentions: "A-Z a-z 0-9"),
        RejectCase("params that are not an object", value: withActions.setting("notification.actions", [["id": "buy", "params": [1, 2]]]),
                   code: "wrong_schema", field: "notification.actions[0].params", mentions: "expected an object"),
        RejectCase("data that takes the actions' key", value: withActions.setting("notification.data", ["action_params": [:]]),
                   code: "invalid_field", field: "notification.data.action_params", mentions: "remove it from data"),
        RejectCase("actions on a background push", value: CampaignTests.background.setting("notification.actions", [["id": "buy"]]),
                   code: "invalid_field", field: "notification.actions", mentions: "only alert pushes"),
        RejectCase("parameters too large for APNs", value: withActions.setting("notification.actions", [["id": "buy", "params": ["blob": .string(String(repeating: "x", count: 4_100))]]]),
                   code: "payload_too_large", field: "notification", mentions: "4096"),
    ]

    @Test("refuses actions with a clear error", arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: Campaign.self)
    }
}
