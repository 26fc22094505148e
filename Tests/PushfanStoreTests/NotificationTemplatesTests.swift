import Foundation
import PushfanMessages
import PushfanSupport
import Testing

@testable import PushfanStore

/// Stored templates on both backends: saved, replaced, listed, read, removed, and refused
/// for an unknown app or a bad name; a campaign's copy is kept beside its record.
@Suite struct NotificationTemplatesTests {
    @Test(arguments: Backend.enabled)
    func savedReadListedAndRemoved(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        _ = try await store.apps.add(AppRegistration(app: "shop", topic: "com.example.shop", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil)))
        let order = NotificationTemplate(category: "ORDER", threadID: "orders", actions: [Campaign.Action(id: "track", params: ["url": "shop://o"])])
        #expect(try await store.templates.put(app: "shop", name: "order", order, now: store.clock.wallMillis))
        #expect(try await store.templates.put(app: "shop", name: "promo", NotificationTemplate(mediaURL: "https://cdn.example/p.jpg"), now: store.clock.wallMillis))
        #expect(try await store.templates.get(app: "shop", name: "order") == order)
        var changed = order
        changed.summaryArg = "Shop"
        #expect(try await !store.templates.put(app: "shop", name: "order", changed, now: store.clock.wallMillis), "a second save replaces")
        #expect(try await store.templates.list(app: "shop").map(\.name) == ["order", "promo"])
        #expect(try await store.templates.get(app: "shop", name: "order")?.summaryArg == "Shop")
        #expect(try await store.templates.get(app: "shop", name: "none") == nil)
        #expect(try await store.templates.remove(app: "shop", name: "promo"))
        #expect(try await !store.templates.remove(app: "shop", name: "promo"))

        await #expect(throws: StoreError.notFound("unknown app 'nope'; add it with `pushfan apps add`")) {
            try await store.templates.put(app: "nope", name: "order", order, now: store.clock.wallMillis)
        }
        await #expect { try await store.templates.put(app: "shop", name: "a/b", order, now: store.clock.wallMillis) } throws: { error in
            "\(error)".contains("template name must be 1-128 characters")
        }

        // A campaign keeps the template it was planned with beside its record.
        let definition = CampaignDefinition(record: #"{"v":1}"#, template: NotificationTemplates.document(changed))
        #expect(try await store.campaigns.record(CampaignKey(app: "shop", id: "c1"), audience: 1, shards: 1, definition: definition, status: .planning, now: store.clock.wallMillis))
        #expect(try await store.campaigns.stored(CampaignKey(app: "shop", id: "c1")) == definition)
        #expect(try NotificationTemplates.read(try #require(definition.template), name: "order") == changed)
    }
}
