import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport
@testable import PushfanTemplates

/// Personalised texts: the placeholder language, what it renders for a device, and every
/// way a campaign's placeholders are refused.
@Suite struct TextTemplateTests {
    static let ada = TemplateDevice(
        id: "d-1", locale: "de_DE", timezone: "Europe/Berlin", appVersion: "2.4.1", osVersion: "18.1",
        attributes: ["first_name": "ada", "city": "Zürich", "points": 1200, "ratio": 2.5, "vip": true, "nothing": .null,
                     "empty": "", "tags": ["a"], "quote": #"say "hi"\n"#, "long": "Grüße aus München 🇩🇪👋🏽 und mehr"])
    static let bare = TemplateDevice(id: "d-2")

    struct Rendering: Sendable, CustomTestStringConvertible {
        let template: String
        let device: TemplateDevice
        let expected: String
        init(_ template: String, _ expected: String, for device: TemplateDevice = TextTemplateTests.ada) {
            (self.template, self.expected, self.device) = (template, expected, device)
        }
        var testDescription: String { template }
    }

    static let renderings: [Rendering] = [
        Rendering("Hello", "Hello"),
        Rendering("Hi {{attr.first_name}}!", "Hi ada!"),
        Rendering("Hi {{ attr.first_name | capitalize }}!", "Hi Ada!"),
        Rendering("{{attr.first_name|upcase}} {{ attr.city | downcase }}", "ADA zürich"),
        Rendering("{{ device.id }} {{ device.locale }} {{ device.timezone }} {{ device.app_version }} {{ device.os_version }}",
                  "d-1 de_DE Europe/Berlin 2.4.1 18.1"),
        Rendering("{{ attr.points }} points, ratio {{ attr.ratio }}, vip {{ attr.vip }}", "1200 points, ratio 2.5, vip true"),
        // Missing values: empty, unless a default is given; null, objects and arrays are missing.
        Rendering("Hi {{ attr.first_name }}", "Hi ", for: bare),
        Rendering(#"Hi {{ attr.first_name | default: "there" }}"#, "Hi there", for: bare),
        Rendering(#"{{ attr.nothing | default: "n" }}{{ attr.tags | default: "t" }}{{ attr.empty | default: "e" }}"#, "nte"),
        Rendering(#"{{ device.locale | default: "unknown" }}"#, "unknown", for: bare),
        Rendering(#"{{ attr.first_name | default: "there" | upcase }}"#, "THERE", for: bare),
        Rendering(#"{{ attr.first_name | upcase | default: "x" }}"#, "x", for: bare),
        Rendering(#"{{ attr.first_name | default: "a \"quoted\" \\ name" }}"#, #"a "quoted" \ name"#, for: bare),
        // Truncation counts characters, so a flag or a skin-toned emoji is never split.
        Rendering("{{ attr.long | truncate: 20 }}", "Grüße aus München 🇩🇪…"),
        Rendering("{{ attr.long | truncate: 21 }}", "Grüße aus München 🇩🇪👋🏽…"),
        Rendering("{{ attr.first_name | truncate: 3 }}", "ada"),
        Rendering("{{ attr.first_name | truncate: 1 }}", "…"),
        // Only `{{` opens a placeholder.
        Rendering("a { b } c }} d", "a { b } c }} d"),
        Rendering("{{attr.quote}}", "say \"hi\"\\n"),
    ]

    @Test("renders placeholders and filters for a device", arguments: renderings)
    func renders(_ case_: Rendering) throws {
        #expect(try TextTemplate.parse(case_.template).render(for: case_.device) == case_.expected)
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        let template: String
        let error: String
        var testDescription: String { template }
    }

    static let refusals: [Refusal] = [
        Refusal(template: "Hi {{ user.name }}", error: "at 7: unknown variable 'user.name'; expected device.id, device.locale, device.timezone, device.app_version, device.os_version or attr.NAME"),
        Refusal(template: "{{ device.name }}", error: "at 4: unknown variable 'device.name'"),
        Refusal(template: "{{ attr. }}", error: "at 4: attr. needs an attribute name"),
        Refusal(template: "{{ attr.x | shout }}", error: "at 13: unknown filter 'shout'; expected default, upcase, downcase, capitalize or truncate"),
        Refusal(template: "{{ attr.x | }}", error: "at 13: a filter's name should follow |"),
        Refusal(template: "Hi {{ attr.x", error: "at 13: the placeholder opened at 4 has no closing }}"),
        Refusal(template: "{{ attr.x attr.y }}", error: "at 11: expected | and a filter, or }}; found \"a\""),
        Refusal(template: "{{ }}", error: "at 4: found \"}\" where a variable should be"),
        Refusal(template: "{{ attr.x | default }}", error: "at 21: default needs an argument: default: \"text\""),
        Refusal(template: "{{ attr.x | default: there }}", error: "at 22: default's argument is a text in double quotes"),
        Refusal(template: #"{{ attr.x | default: "open }}"#, error: "the text opened at 22 has no closing \""),
        Refusal(template: #"{{ attr.x | default: "a\nb" }}"#, error: #"at 24: only \" and \\ are escapes"#),
        Refusal(template: "{{ attr.x | truncate: 0 }}", error: "at 23: truncate's argument is a number of characters from 1 to 4096"),
        Refusal(template: "{{ attr.x | truncate: many }}", error: "at 23: truncate's argument is a number"),
        Refusal(template: "{{ attr.x | upcase: 2 }}", error: "upcase takes no argument"),
        Refusal(template: "{{ attr.x }} {% for x in attr.list %}{{ x }}{% endfor %}", error: "at 41: unknown variable 'x'"),
    ]

    @Test("refuses what it does not know, saying where", arguments: refusals)
    func refuses(_ refusal: Refusal) {
        #expect {
            try TextTemplate.parse(refusal.template)
        } throws: { error in
            "\(error)".contains(refusal.error)
        }
    }

    static let personalised: JSONValue = CampaignTests.base
        .setting("notification.content", [
            "default": ["title": #"Hi {{ attr.first_name | default: "there" | capitalize }}"#, "body": "Your {{ attr.points }} points in {{ attr.city }}"],
            "locales": ["de": ["title": #"Hallo {{ attr.first_name | default: "du" }}"#, "body": "Deine {{ attr.points }} Punkte"]],
        ])
        .setting("notification.data", ["deeplink": "shop://u/{{ device.id }}", "nested": ["list": ["{{ attr.vip }}", 7]], "plain": "{ not a placeholder }"])

    static func campaign(_ json: JSONValue) throws -> Campaign {
        try MessageCodec.decode(Campaign.self, from: Array(json.jsonText.utf8))
    }

    @Test("a device's payload has its locale's texts and its data rendered for it, escaped as JSON")
    func personalisedPayload() throws {
        let campaign = try Self.campaign(Self.personalised)
        #expect(campaign.isPersonalised)
        #expect(try !Self.campaign(CampaignTests.base).isPersonalised, "a campaign without placeholders is built once per locale")
        var cache = TemplateCache()
        var device = Self.ada
        device.attributes["first_name"] = "Zoë \"Z\"\n😀"
        device.locale = "en_GB"
        var sent = campaign
        sent.notification = campaign.notification.personalised(for: device, locale: device.locale, templates: &cache)
        let payload = try APNsPreparedPayload(campaign: sent, locale: device.locale, marker: nil)
        let decoded = try JSONSerialization.jsonObject(with: payload.bytes) as? [String: Any]
        let alert = (decoded?["aps"] as? [String: Any])?["alert"] as? [String: Any]
        #expect(alert?["title"] as? String == "Hi Zoë \"Z\"\n😀")
        #expect(alert?["body"] as? String == "Your 1200 points in Zürich")
        #expect(decoded?["deeplink"] as? String == "shop://u/d-1")
        #expect((decoded?["nested"] as? [String: Any])?["list"] as? [AnyHashable] == ["true", 7])
        #expect(decoded?["plain"] as? String == "{ not a placeholder }")
        // The escapes are the JSON writer's: a quote, a newline, and the emoji as UTF-8.
        #expect(String(decoding: payload.bytes, as: UTF8.self).contains(#""title":"Hi Zoë \"Z\"\n😀""#))

        let german = campaign.notification.personalised(for: Self.bare, locale: "de_AT", templates: &cache)
        #expect(german.content?.text(forLocale: "de_AT")?.title == "Hallo du")
        #expect(german.content?.text(forLocale: "de_AT")?.body == "Deine  Punkte")
    }

    @Test("a device whose rendered payload is too large cannot be built; others still can")
    func renderedPayloadOverTheLimit() throws {
        let campaign = try Self.campaign(CampaignTests.base.setting("notification.content.default.body", "{{ attr.bio }}"))
        var cache = TemplateCache()
        var big = Self.bare
        big.attributes["bio"] = .string(String(repeating: "é", count: 2_100))
        var sent = campaign
        sent.notification = campaign.notification.personalised(for: big, locale: nil, templates: &cache)
        #expect(throws: APNsRequestError.self) { try APNsPreparedPayload(campaign: sent, locale: nil, marker: nil) }
        #expect((try? APNsPreparedPayload(campaign: sent, locale: nil, marker: nil)) == nil)
        var small = Self.bare
        small.attributes["bio"] = "short"
        sent.notification = campaign.notification.personalised(for: small, locale: nil, templates: &cache)
        #expect(throws: Never.self) { try APNsPreparedPayload(campaign: sent, locale: nil, marker: nil) }
    }

    static let rejects: [RejectCase] = [
        RejectCase("an unknown variable in the default body", value: CampaignTests.base.setting("notification.content.default.body", "Hi {{ user.name }}"),
                   code: "invalid_field", field: "notification.content.default.body", mentions: "at 7: unknown variable 'user.name'"),
        RejectCase("an unknown filter in a locale's title", value: CampaignTests.base.setting("notification.content.locales.de.title", "{{ attr.x | shout }}"),
                   code: "invalid_field", field: "notification.content.locales.de.title", mentions: "unknown filter 'shout'"),
        RejectCase("an unclosed placeholder in data", value: CampaignTests.base.setting("notification.data", ["links": ["a", "{{ device.id"]]),
                   code: "invalid_field", field: "notification.data.links[1]", mentions: "has no closing }}"),
        RejectCase("a variant's unknown variable", value: CampaignVariantTests.withVariants.setting(
            "variants", [["id": "a", "weight": 1, "content": ["default": ["body": "{{ device.name }}"]]]]),
                   code: "invalid_field", field: "variants[0].content.default.body", mentions: "unknown variable 'device.name'"),
    ]

    @Test("a campaign with placeholders that do not parse is refused at the field", arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: Campaign.self)
    }
}
