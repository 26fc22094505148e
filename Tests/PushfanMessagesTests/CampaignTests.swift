import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport

@Suite("Campaign")
struct CampaignTests {
    /// A valid alert campaign that each reject case breaks in one place.
    static let base: JSONValue = [
        "v": 1,
        "id": "spring-sale-2026",
        "app": "shop-ios",
        "audience": ["segment": "tag:sports and locale in (de_DE, de_AT)"],
        "notification": [
            "push_type": "alert",
            "content": [
                "default": ["title": "Spring sale", "subtitle": "Today only", "body": "20% off"],
                "locales": ["de": ["title": "Frühlingsverkauf", "body": "20 % Rabatt"]],
            ],
            "aps": ["sound": "default", "badge": 1],
            "data": ["deeplink": "shop://sale"],
        ],
        "options": ["priority": 10, "collapse_id": "spring-sale-2026", "rate": 200, "dry_run": false],
        "submitted_at": 1_764_489_600_000,
    ]

    /// A valid background campaign.
    static let background: JSONValue = base
        .setting("notification", ["push_type": "background", "aps": ["content-available": 1]])
        .setting("options.priority", 5)

    /// A valid Live Activity update to the devices following one activity.
    static let liveUpdate: JSONValue = base
        .setting("audience", ["activity": "match-1"])
        .setting("notification", ["push_type": "liveactivity", "aps": ["event": "update", "timestamp": 1_796_000_000, "content-state": ["home": 1]]])

    static let baseText = base.jsonText

    static let rejects: [RejectCase] = [
        // identity
        RejectCase("missing id", value: base.setting("id", nil), code: "wrong_schema", field: "id", mentions: "required field is missing"),
        RejectCase("id is a number", value: base.setting("id", 7), code: "wrong_schema", field: "id", mentions: "expected a string, found a number"),
        RejectCase("id with a space", value: base.setting("id", "spring sale"), code: "invalid_field", field: "id", mentions: "A-Z a-z 0-9 . _ : -"),
        RejectCase("id with a slash", value: base.setting("id", "spring/sale"), code: "invalid_field", field: "id", mentions: "\"spring/sale\""),
        RejectCase("id with NUL", value: base.setting("id", "a\u{0}b"), code: "invalid_field", field: "id", mentions: "characters of"),
        RejectCase("id too long", value: base.setting("id", .string(String(repeating: "x", count: 129))), code: "invalid_field", field: "id", mentions: "1 to 128"),
        RejectCase("empty app", value: base.setting("app", ""), code: "invalid_field", field: "app", mentions: "must not be empty"),
        RejectCase("missing app", value: base.setting("app", nil), code: "wrong_schema", field: "app", mentions: "missing"),

        // audience
        RejectCase("missing audience", value: base.setting("audience", nil), code: "wrong_schema", field: "audience", mentions: "missing"),
        RejectCase("audience is a string", value: base.setting("audience", "everyone"), code: "wrong_schema", field: "audience", mentions: "expected an object, found a string"),
        RejectCase("two audience forms", value: base.setting("audience.devices", ["d1"]), code: "invalid_field", field: "audience",
                   mentions: "exactly one of \"segment\", \"named\", \"devices\", \"activity\", \"activities\" or \"channel\", found \"segment\" and \"devices\""),
        RejectCase("no audience form", value: base.setting("audience", [:]), code: "invalid_field", field: "audience", mentions: "found none"),
        RejectCase("only null audience forms", value: base.setting("audience", ["segment": nil]), code: "invalid_field", field: "audience", mentions: "found none"),
        RejectCase("empty segment", value: base.setting("audience.segment", "  "), code: "invalid_field", field: "audience.segment", mentions: "must not be empty"),
        // A Live Activity update goes to the devices following one activity, and only it can.
        RejectCase("activity audience for an alert", value: base.setting("audience", ["activity": "match-1"]), code: "invalid_field", field: "audience.activity",
                   mentions: "only for push_type liveactivity"),
        RejectCase("activity id with a slash", value: liveUpdate.setting("audience.activity", "a/b"), code: "invalid_field", field: "audience.activity", mentions: "characters of"),
        RejectCase("activities audience for an alert", value: base.setting("audience", ["activities": ["attributes_type": "MatchActivity"]]), code: "invalid_field",
                   field: "audience.activities", mentions: "only for push_type liveactivity"),
        RejectCase("activities without a type", value: liveUpdate.setting("audience", ["activities": ["attributes": ["match": "1"]]]), code: "wrong_schema",
                   field: "audience.activities.attributes_type", mentions: "missing"),
        RejectCase("activities with a bad attribute name", value: liveUpdate.setting("audience", ["activities": ["attributes_type": "MatchActivity", "attributes": ["match id": "1"]]]),
                   code: "invalid_field", field: "audience.activities.attributes.match id", mentions: "characters of"),
        RejectCase("activities with a number value", value: liveUpdate.setting("audience", ["activities": ["attributes_type": "MatchActivity", "attributes": ["match": 1234]]]),
                   code: "wrong_schema", field: "audience.activities.attributes.match", mentions: "expected a string"),
        RejectCase("activities with nine attributes", value: liveUpdate.setting("audience", ["activities": ["attributes_type": "MatchActivity", "attributes": .object(Dictionary(uniqueKeysWithValues: (0..<9).map { ("k\($0)", .string("v")) }))]]),
                   code: "invalid_field", field: "audience.activities.attributes", mentions: "at most 8"),
        RejectCase("a Live Activity update to a segment", value: liveUpdate.setting("audience", ["segment": "tag:x"]), code: "invalid_field", field: "audience",
                   mentions: "give audience.activity"),
        RejectCase("segment too long", value: base.setting("audience.segment", .string(String(repeating: "tag:a or ", count: 456))),
                   code: "invalid_field", field: "audience.segment", mentions: "at most 4096"),
        RejectCase("segment is an array", value: base.setting("audience.segment", ["tag:a"]), code: "wrong_schema", field: "audience.segment", mentions: "expected a string, found an array"),
        RejectCase("bad saved segment name", value: base.setting("audience", ["named": "sports fans"]), code: "invalid_field", field: "audience.named", mentions: "characters of"),
        RejectCase("empty device list", value: base.setting("audience", ["devices": []]), code: "invalid_field", field: "audience.devices", mentions: "at least one"),
        RejectCase("too many devices", value: base.setting("audience", ["devices": .array((0...10_000).map { .string("d\($0)") })]),
                   code: "invalid_field", field: "audience.devices", mentions: "lists 10001 devices, at most 10000"),
        RejectCase("repeated device", value: base.setting("audience", ["devices": ["d1", "d2", "d1"]]), code: "invalid_field", field: "audience.devices[2]", mentions: "repeats audience.devices[0]"),
        RejectCase("bad device id", value: base.setting("audience", ["devices": ["d1", ""]]), code: "invalid_field", field: "audience.devices[1]", mentions: "must not be empty"),
        RejectCase("device id is a number", value: base.setting("audience", ["devices": ["d1", 2]]), code: "wrong_schema", field: "audience.devices[1]", mentions: "expected a string"),

        // notification
        RejectCase("missing notification", value: base.setting("notification", nil), code: "wrong_schema", field: "notification", mentions: "missing"),
        RejectCase("unknown push type", value: base.setting("notification.push_type", "banner"), code: "invalid_field", field: "notification.push_type",
                   mentions: "unknown push type \"banner\"; expected one of: alert, background, voip"),
        RejectCase("title is a number", value: base.setting("notification.content.default.title", 3), code: "wrong_schema",
                   field: "notification.content.default.title", mentions: "expected a string"),
        RejectCase("empty default texts", value: base.setting("notification.content.default", ["title": ""]), code: "invalid_field",
                   field: "notification.content.default", mentions: "needs a title, subtitle or body"),
        RejectCase("locale id with a space", value: base.setting("notification.content.locales", ["de DE": ["title": "x"]]), code: "invalid_field",
                   field: "notification.content.locales[\"de DE\"]", mentions: "not a locale id"),
        RejectCase("locale id of one letter", value: base.setting("notification.content.locales", ["d": ["title": "x"]]), code: "invalid_field",
                   field: "notification.content.locales.d", mentions: "not a locale id"),
        RejectCase("same locale twice", value: base.setting("notification.content.locales", ["de_DE": ["title": "x"], "de-DE": ["title": "y"]]),
                   code: "invalid_field", field: "notification.content.locales.de_DE", mentions: "same locale as \"de-DE\""),
        RejectCase("empty locale texts", value: base.setting("notification.content.locales", ["fr": [:]]), code: "invalid_field",
                   field: "notification.content.locales.fr", mentions: "needs a title"),
        RejectCase("alert without default or aps.alert", value: base.setting("notification.content.default", nil), code: "invalid_field",
                   field: "notification.content.default", mentions: "alert push needs default texts"),
        RejectCase("aps is an array", value: base.setting("notification.aps", ["sound"]), code: "wrong_schema", field: "notification.aps",
                   mentions: "expected an object, found an array"),
        RejectCase("aps is a string", value: base.setting("notification.aps", "sound"), code: "wrong_schema", field: "notification.aps",
                   mentions: "expected an object, found a string"),
        RejectCase("aps.alert is a number", value: base.setting("notification.aps.alert", 1), code: "invalid_field", field: "notification.aps.alert",
                   mentions: "string or an object"),
        RejectCase("badge as a string", value: base.setting("notification.aps.badge", "1"), code: "invalid_field", field: "notification.aps.badge",
                   mentions: "integer of 0 or more"),
        RejectCase("negative badge", value: base.setting("notification.aps.badge", -1), code: "invalid_field", field: "notification.aps.badge", mentions: "found -1"),
        RejectCase("fractional badge", value: base.setting("notification.aps.badge", 1.5), code: "invalid_field", field: "notification.aps.badge", mentions: "found 1.5"),
        RejectCase("sound is a number", value: base.setting("notification.aps.sound", 1), code: "invalid_field", field: "notification.aps.sound", mentions: "sound file name"),
        RejectCase("category is a number", value: base.setting("notification.aps.category", 1), code: "invalid_field", field: "notification.aps.category", mentions: "must be a string"),
        RejectCase("mutable-content 2", value: base.setting("notification.aps.mutable-content", 2), code: "invalid_field",
                   field: "notification.aps.mutable-content", mentions: "must be 1 (or 0), found 2"),
        RejectCase("a locale whose payload is over 4,096 bytes", value: base.setting("notification.content.locales.fr", ["body": .string(String(repeating: "x", count: 4_100))]),
                   code: "payload_too_large", field: "notification.content.locales.fr", mentions: "APNs allows at most 4096 for alert pushes"),
        RejectCase("live activity update without content-state", value: base.setting("notification", ["push_type": "liveactivity", "aps": ["event": "update", "timestamp": 1_764_489_600]]),
                   code: "invalid_field", field: "notification.aps.content-state", mentions: "with event update needs aps.content-state"),
        RejectCase("mdm without its PushMagic", value: base.setting("notification", ["push_type": "mdm"]), code: "invalid_field",
                   field: "notification.data.mdm", mentions: "needs a string \"mdm\""),
        RejectCase("bad interruption level", value: base.setting("notification.aps.interruption-level", "urgent"), code: "invalid_field",
                   field: "notification.aps.interruption-level", mentions: "passive, active, time-sensitive, critical"),
        RejectCase("relevance score above 1", value: base.setting("notification.aps.relevance-score", 2), code: "invalid_field",
                   field: "notification.aps.relevance-score", mentions: "from 0 to 1"),
        RejectCase("aps inside data", value: base.setting("notification.data.aps", ["badge": 1]), code: "invalid_field", field: "notification.data.aps",
                   mentions: "must not contain \"aps\""),
        RejectCase("data is a list", value: base.setting("notification.data", ["a"]), code: "wrong_schema", field: "notification.data", mentions: "expected an object"),
        RejectCase("data under the engagement marker's key", value: base.setting("notification.data.pushfan", ["campaign": "x"]), code: "invalid_field",
                   field: "notification.data.pushfan", mentions: "Pushfan's engagement marker"),
        RejectCase("number too large in data", json: baseText.replacingOccurrences(of: "\"deeplink\":\"shop://sale\"", with: "\"big\":1e400"),
                   code: "wrong_schema", field: "notification.data.big", mentions: "too large"),
        RejectCase("data key with a dot is quoted", json: baseText.replacingOccurrences(of: "\"deeplink\":\"shop://sale\"", with: "\"a.b\":1e999"),
                   code: "wrong_schema", field: "notification.data[\"a.b\"]", mentions: "too large"),

        // background
        RejectCase("background with content", value: background.setting("notification.content", ["default": ["title": "x"]]), code: "invalid_field",
                   field: "notification.content", mentions: "background push cannot show texts"),
        RejectCase("background with alert", value: background.setting("notification.aps.alert", "Hello"), code: "invalid_field",
                   field: "notification.aps.alert", mentions: "background push cannot have aps.alert"),
        RejectCase("background with sound", value: background.setting("notification.aps.sound", "default"), code: "invalid_field",
                   field: "notification.aps.sound", mentions: "cannot have aps.sound"),
        RejectCase("background with badge", value: background.setting("notification.aps.badge", 3), code: "invalid_field",
                   field: "notification.aps.badge", mentions: "cannot have aps.badge"),
        RejectCase("background with priority 10", value: background.setting("options.priority", 10), code: "invalid_field",
                   field: "options.priority", mentions: "must have apns-priority 5"),
        RejectCase("background without content-available", value: background.setting("notification.aps", nil), code: "invalid_field",
                   field: "notification.aps.content-available", mentions: "needs aps.content-available: 1"),

        // options
        RejectCase("priority 7", value: base.setting("options.priority", 7), code: "invalid_field", field: "options.priority", mentions: "must be 10, 5 or 1; found 7"),
        RejectCase("priority as a string", value: base.setting("options.priority", "10"), code: "wrong_schema", field: "options.priority",
                   mentions: "expected an integer, found a string"),
        RejectCase("fractional priority", value: base.setting("options.priority", 10.5), code: "wrong_schema", field: "options.priority", mentions: "expected an integer"),
        RejectCase("negative expiration", value: base.setting("options.expiration", -5), code: "invalid_field", field: "options.expiration", mentions: "seconds since the epoch"),
        RejectCase("expiration in milliseconds", value: base.setting("options.expiration", 1_767_225_600_000), code: "invalid_field",
                   field: "options.expiration", mentions: "looks like milliseconds"),
        RejectCase("collapse id of 65 bytes", value: base.setting("options.collapse_id", .string(String(repeating: "c", count: 65))), code: "invalid_field",
                   field: "options.collapse_id", mentions: "is 65 bytes, APNs allows at most 64"),
        RejectCase("collapse id of 33 two-byte characters", value: base.setting("options.collapse_id", .string(String(repeating: "é", count: 33))),
                   code: "invalid_field", field: "options.collapse_id", mentions: "is 66 bytes"),
        RejectCase("empty collapse id", value: base.setting("options.collapse_id", ""), code: "invalid_field", field: "options.collapse_id", mentions: "must not be empty"),
        RejectCase("rate 0", value: base.setting("options.rate", 0), code: "invalid_field", field: "options.rate", mentions: "more than 0"),
        RejectCase("attribution window of 59 s", value: base.setting("options.attribution_window_s", 59), code: "invalid_field", field: "options.attribution_window_s", mentions: "60 to 2592000 seconds"),
        RejectCase("attribution window over 30 days", value: base.setting("options.attribution_window_s", 2_592_001), code: "invalid_field", field: "options.attribution_window_s", mentions: "got 2592001"),
        RejectCase("dry_run as a string", value: base.setting("options.dry_run", "no"), code: "wrong_schema", field: "options.dry_run",
                   mentions: "expected true or false"),
        RejectCase("options is a number", value: base.setting("options", 1), code: "wrong_schema", field: "options", mentions: "expected an object"),
        RejectCase("submitted_at in seconds", value: base.setting("submitted_at", 1_764_489_600), code: "invalid_field", field: "submitted_at",
                   mentions: "looks like seconds"),
        RejectCase("submitted_at beyond Int64", json: baseText.replacingOccurrences(of: "\"submitted_at\":1764489600000", with: "\"submitted_at\":9223372036854775808"),
                   code: "wrong_schema", field: "submitted_at", mentions: "expected an integer"),
    ]

    @Test("refuses with a clear error", arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: Campaign.self)
    }

    @Test func baseCasesAreValid() throws {
        #expect(decodeOrRecord(Campaign.self, Array(Self.baseText.utf8)) != nil)
        #expect(decodeOrRecord(Campaign.self, Array(Self.background.jsonText.utf8)) != nil)
    }

    @Test func exactlyTheDeviceLimitIsAccepted() throws {
        let devices = JSONValue.array((0..<Campaign.maxExplicitDevices).map { .string("device-\($0)") })
        let campaign = try #require(decodeOrRecord(Campaign.self, Array(Self.base.setting("audience", ["devices": devices]).jsonText.utf8)))
        guard case .devices(let ids) = campaign.audience else {
            Issue.record("audience is \(campaign.audience)")
            return
        }
        #expect(ids.count == 10_000)
    }

    @Test func segmentOfExactly4096BytesIsAccepted() {
        let segment = String(repeating: "ä", count: 2_048)
        #expect(segment.utf8.count == 4_096)
        #expect(decodeOrRecord(Campaign.self, Array(Self.base.setting("audience.segment", .string(segment)).jsonText.utf8)) != nil)
    }

    @Test func alertMayUseApsAlertInsteadOfContent() {
        let json = Self.base.setting("notification.content", nil)
            .setting("notification.aps.alert", ["loc-key": "SALE_BODY", "loc-args": ["20"]])
        #expect(decodeOrRecord(Campaign.self, Array(json.jsonText.utf8)) != nil)
    }

    @Test func nonAlertPushTypesNeedNoTexts() {
        let json = Self.base.setting("audience", ["activity": "match-1"]).setting("notification", [
            "push_type": "liveactivity", "aps": ["event": "update", "timestamp": 1_764_489_600, "content-state": ["score": 2]],
        ])
        #expect(decodeOrRecord(Campaign.self, Array(json.jsonText.utf8))?.notification.pushType == .liveactivity)
    }

    @Test("the APNs model decides what aps may hold: mutable-content true is sent as 1")
    func flagAsBoolean() throws {
        let json = Self.base.setting("notification.aps.mutable-content", true)
        let campaign = try #require(decodeOrRecord(Campaign.self, Array(json.jsonText.utf8)))
        let payload = try APNsPreparedPayload(campaign: campaign, locale: nil, marker: nil)
        #expect(String(decoding: payload.bytes, as: UTF8.self).contains(#""mutable-content":1"#))
    }

    @Test func defaultsWhenOptionalPartsAreLeftOut() throws {
        let json: JSONValue = [
            "v": 1, "id": "c1", "app": "a",
            "audience": ["named": "everyone"],
            "notification": ["aps": ["alert": "Hello"]],
        ]
        let campaign = try #require(decodeOrRecord(Campaign.self, Array(json.jsonText.utf8)))
        #expect(campaign.notification.pushType == .alert)
        #expect(campaign.options == Campaign.Options(priority: nil, expiration: nil, collapseID: nil, rate: nil, dryRun: false))
        #expect(campaign.effectiveCollapseID == "c1")
        #expect(campaign.effectivePriority == 10)
        #expect(campaign.submittedAt == nil)
    }

    // MARK: The shipped example

    @Test("a Live Activity update addressed to an activity reads, validates and writes back the same")
    func liveActivityUpdateRoundTrip() throws {
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(Self.liveUpdate.jsonText.utf8))
        #expect(campaign.audience == .activity("match-1") && campaign.notification.tokenKind == .liveActivityUpdate)
        #expect(try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign)) == campaign)
    }

    @Test("a Live Activity update addressed to activities by attributes reads, validates and writes back the same")
    func liveActivityFilterRoundTrip() throws {
        let text = Self.liveUpdate.setting("audience", ["activities": ["attributes_type": "MatchActivity", "attributes": ["match": "1234"]]]).jsonText
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(text.utf8))
        #expect(campaign.audience == .activities(ActivityFilter(attributesType: "MatchActivity", attributes: ["match": "1234"])))
        #expect(try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign)) == campaign)
    }

    @Test func exampleFileDecodesAndValidates() throws {
        let data = try Data(contentsOf: MessageCodecTests.exampleURL)
        let campaign = try MessageCodec.decode(Campaign.self, from: data)
        #expect(campaign.id == "spring-sale-2026")
        #expect(campaign.kafkaKey == "shop-ios/spring-sale-2026")
        #expect(campaign.app == "shop-ios")
        #expect(campaign.notification.pushType == .alert)
        #expect(campaign.notification.aps?["mutable-content"] == .int(1))
        #expect(campaign.notification.aps?["category"] != nil)
        #expect(campaign.notification.data?["deeplink"] != nil)
        #expect(Set(campaign.notification.content?.locales.keys.map { $0 } ?? []) == ["de", "fr"])
        #expect(campaign.notification.content?.text(forLocale: "de_AT")?.title?.hasPrefix("Frühling") == true)
        #expect(campaign.notification.content?.text(forLocale: "en_US")?.title?.hasPrefix("Spring") == true)
    }

    @Test func exampleFileIsOneKafkaRecordForKcat() throws {
        let text = try String(contentsOf: MessageCodecTests.exampleURL, encoding: .utf8)
        // kcat -l splits on newlines: one line, one record.
        #expect(text.split(separator: "\n").count == 1)
        #expect(!text.contains("\r"))
    }

    // MARK: Locale fallback

    static let content = Campaign.Content(
        defaultText: .init(title: "default"),
        locales: [
            "de": .init(title: "de"),
            "fr_FR": .init(title: "fr_FR"),
            "fr": .init(title: "fr"),
            "pt-BR": .init(title: "pt-BR"),
            "zh_Hant": .init(title: "zh_Hant"),
        ])

    @Test(arguments: [
        ("de", "de"), ("de_DE", "de"), ("de-AT", "de"), ("DE_ch", "de"), ("de_DE.UTF-8", "de"), ("de_DE@euro", "de"),
        ("fr_FR", "fr_FR"), ("fr-fr", "fr_FR"), ("fr_CA", "fr"), ("fr", "fr"),
        ("pt_BR", "pt-BR"), ("pt_PT", "default"), ("pt", "default"),
        ("zh_Hant_TW", "zh_Hant"), ("zh-Hant-HK", "zh_Hant"), ("zh_Hans_CN", "default"),
        ("en_US", "default"), ("ja", "default"), ("", "default"), ("_", "default"),
    ])
    func localeFallback(_ locale: String, _ expected: String) {
        #expect(Self.content.text(forLocale: locale)?.title == expected)
    }

    @Test func unknownLocaleUsesDefault() {
        #expect(Self.content.text(forLocale: nil)?.title == "default")
    }

    @Test func noDefaultAndNoMatchGivesNil() {
        let content = Campaign.Content(defaultText: nil, locales: ["de": .init(title: "de")])
        #expect(content.text(forLocale: "fr_FR") == nil)
        #expect(content.text(forLocale: nil) == nil)
        #expect(content.text(forLocale: "de_DE")?.title == "de")
    }

    @Test func changingLocalesUpdatesLookup() {
        var content = Self.content
        content.locales["ja"] = .init(title: "ja")
        #expect(content.text(forLocale: "ja_JP")?.title == "ja")
        content.locales["de"] = nil
        #expect(content.text(forLocale: "de_DE")?.title == "default")
    }

    // MARK: Payload

    @Test func payloadPutsLocalizedTextsIntoApsAndDataBesideIt() throws {
        let campaign = try MessageCodecTests.exampleCampaign()
        let payload = campaign.notification.payload(forLocale: "de_AT")
        let aps = try #require(payload["aps"]?.objectValue)
        #expect(aps["alert"]?["title"]?.stringValue?.hasPrefix("Frühlingsaktion") == true)
        #expect(aps["alert"]?["subtitle"] == "Nur heute")
        #expect(aps["badge"] == .int(1))
        #expect(aps["mutable-content"] == .int(1))
        #expect(payload["deeplink"] == "shop://sale/spring-2026")
        let english = campaign.notification.payload(forLocale: nil)
        #expect(english["aps"]?["alert"]?["title"] == "Spring Sale: 20% off")
        let bytes = try JSONEncoder().encode(JSONValue.object(payload))
        #expect(bytes.count <= campaign.notification.pushType.maxPayloadBytes)
    }

    @Test func payloadKeepsOtherAlertKeysAndReplacesAStringAlert() {
        var notification = Campaign.Notification(
            content: .init(defaultText: .init(title: "T", body: "")),
            aps: ["alert": ["loc-key": "SALE_BODY", "loc-args": ["20"]]])
        #expect(notification.aps(forLocale: "en")["alert"] == ["loc-key": "SALE_BODY", "loc-args": ["20"], "title": "T"])
        notification.aps = ["alert": "plain", "sound": "default"]
        #expect(notification.aps(forLocale: "en") == ["alert": ["title": "T"], "sound": "default"])
        notification.content = nil
        #expect(notification.aps(forLocale: "en") == ["alert": "plain", "sound": "default"])
    }

    @Test func backgroundPayloadHasNoAlert() {
        let notification = Campaign.Notification(pushType: .background, aps: ["content-available": 1], data: ["refresh": true])
        #expect(notification.payload(forLocale: "de") == ["aps": ["content-available": 1], "refresh": true])
    }

    // MARK: Derived values

    @Test func collapseIDDefaultsToTheCampaignID() {
        var campaign = Campaign(id: "c1", app: "a", audience: .named("all"))
        #expect(campaign.effectiveCollapseID == "c1")
        campaign.options.collapseID = "sale"
        #expect(campaign.effectiveCollapseID == "sale")
    }

    @Test func longCampaignIDsGiveAStable64ByteCollapseID() {
        let prefix = String(repeating: "a", count: 60)
        let first = Campaign(id: prefix + "-first-campaign", app: "a", audience: .named("all"))
        let second = Campaign(id: prefix + "-second-campaign", app: "a", audience: .named("all"))
        #expect(first.effectiveCollapseID.utf8.count == 64)
        #expect(first.effectiveCollapseID.hasPrefix(String(repeating: "a", count: 47) + "~"))
        #expect(first.effectiveCollapseID != second.effectiveCollapseID)
        #expect(first.effectiveCollapseID == Campaign(id: first.id, app: "b", audience: .devices(["x"])).effectiveCollapseID)
        let exactly64 = Campaign(id: String(repeating: "b", count: 64), app: "a", audience: .named("all"))
        #expect(exactly64.effectiveCollapseID == exactly64.id)
    }

    @Test func priorityDefaultsByPushType() {
        var campaign = Campaign(id: "c1", app: "a", audience: .named("all"))
        #expect(campaign.effectivePriority == 10)
        campaign.notification.pushType = .background
        #expect(campaign.effectivePriority == 5)
        campaign.options.priority = 1
        #expect(campaign.effectivePriority == 1)
    }

    @Test func pushTypeTopicSuffixes() {
        #expect(Campaign.PushType.alert.topicSuffix == "")
        #expect(Campaign.PushType.voip.topicSuffix == ".voip")
        #expect(Campaign.PushType.liveactivity.topicSuffix == ".push-type.liveactivity")
        #expect(Campaign.PushType.voip.maxPayloadBytes == 5_120)
        #expect(Campaign.PushType.alert.maxPayloadBytes == 4_096)
        #expect(Campaign.PushType.allCases.count == 11)
    }
}
