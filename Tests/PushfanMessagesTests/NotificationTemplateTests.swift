import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport

/// Stored templates: what a template document sets, how a campaign overrides it, and every
/// way a template (or a campaign with one) is refused.
@Suite struct NotificationTemplateTests {
    static let document = #"""
        {"category":"ORDER_ACTIONS","media_url":"https://cdn.shop.example/o.jpg","thread_id":"orders","summary_arg":"Shop",
         "summary_arg_count":2,"interruption_level":"time-sensitive",
         "actions":[{"id":"track","params":{"url":"shop://orders"}},{"id":"rate"}]}
        """#

    static func campaign(_ notification: JSONValue) throws -> Campaign {
        try MessageCodec.decode(Campaign.self, from: Array(CampaignTests.base.setting("notification", notification).jsonText.utf8))
    }

    @Test("a template's fields become aps keys, actions and media_url; the campaign's own win")
    func appliedUnderTheCampaign() throws {
        let template = try NotificationTemplate.decode(Array(Self.document.utf8))
        #expect(template.aps == ["category": "ORDER_ACTIONS", "mutable-content": 1, "thread-id": "orders", "summary-arg": "Shop",
                                 "summary-arg-count": 2, "interruption-level": "time-sensitive"])
        // Actions need a category, which the template brings.
        let campaign = try Self.campaign([
            "content": ["default": ["title": "Shipped", "body": "Order 77"]], "template": "order-update",
            "aps": ["thread-id": "order-77", "sound": "default"], "actions": [["id": "track", "params": ["url": "shop://orders/77"]]],
        ])
        let resolved = try campaign.resolved(with: template)
        #expect(resolved.notification.template == nil)
        #expect(resolved.notification.aps?["thread-id"] == "order-77" && resolved.notification.aps?["category"] == "ORDER_ACTIONS")
        #expect(resolved.notification.aps?["sound"] == "default" && resolved.notification.aps?["summary-arg"] == "Shop")
        #expect(resolved.notification.actions.map(\.id) == ["track"], "the campaign's actions replace the template's")
        #expect(resolved.notification.custom["action_params"] == ["track": ["url": "shop://orders/77"]])
        #expect(resolved.notification.data?["media_url"] == "https://cdn.shop.example/o.jpg")

        let plain = try Self.campaign(["content": ["default": ["body": "Hi"]], "template": "order-update"]).resolved(with: template)
        #expect(plain.notification.actions.map(\.id) == ["track", "rate"])
        let payload = try APNsPreparedPayload(campaign: plain, locale: nil, marker: nil)
        let text = String(decoding: payload.bytes, as: UTF8.self)
        #expect(text.contains(#""action_params":{"rate":{},"track":{"url":"shop://orders"}}"#), "\(text)")
        #expect(text.contains(#""media_url":"https://cdn.shop.example/o.jpg""#) && text.contains(#""mutable-content":1"#), "\(text)")
        // Stored in its canonical form and read back the same.
        #expect(try NotificationTemplate.decode(template.canonicalJSON) == template)
    }

    @Test("refuses template documents with a clear error at the template's field", arguments: [
        (#"[]"#, "wrong_schema", "expected a JSON object"),
        (#"{"category":""}"#, "invalid_field", "category: must be 1 to 255 bytes"),
        (#"{"category":7}"#, "wrong_schema", "category: expected a string, found a number"),
        (#"{"summary_arg_count":0}"#, "invalid_field", "summary_arg_count: must be at least 1, got 0"),
        (#"{"interruption_level":"loud"}"#, "invalid_field", "interruption_level: must be passive, active, time-sensitive or critical"),
        (#"{"media_url":"http://cdn.example/a.jpg"}"#, "invalid_field", "media_url: must be an https URL"),
        (#"{"actions":[{"id":"a"}]}"#, "invalid_field", "actions: needs category"),
        (#"{"category":"C","actions":[{"id":"a b"}]}"#, "invalid_field", "actions[0].id"),
        (#"{"category":"C","actions":[{"id":"a"},{"id":"a"}]}"#, "invalid_field", "actions[1].id: repeats"),
    ])
    func refusals(_ json: String, _ code: String, _ message: String) {
        #expect {
            try NotificationTemplate.decode(Array(json.utf8))
        } throws: { error in
            guard let error = error as? MessageDecodingError else { return false }
            return error.code == code && error.description.contains(message)
        }
    }

    @Test("a campaign naming a template is checked again with it: actions still need a category from one of them")
    func checkedWithTheTemplate() throws {
        let campaign = try Self.campaign(["content": ["default": ["body": "Hi"]], "template": "bare", "actions": [["id": "open"]]])
        #expect {
            try campaign.resolved(with: NotificationTemplate(threadID: "t"))
        } throws: { error in
            (error as? MessageDecodingError)?.description.contains("notification.actions: needs notification.aps.category") == true
        }
        #expect(throws: MessageDecodingError.self) { try Self.campaign(["content": ["default": ["body": "Hi"]], "template": "bad name"]) }
    }
}
