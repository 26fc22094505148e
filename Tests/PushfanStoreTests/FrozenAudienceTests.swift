import Foundation
import PushfanMessages
import PushfanSegments
import PushfanSupport
import Testing

@testable import PushfanStore

/// A campaign's audience is decided once: a saved segment is copied into the campaign's
/// definition when it is accepted, and every later reader (the planner's dispatch, the
/// senders) reads that copy, so editing or deleting the saved segment reaches only campaigns
/// accepted afterwards. Both backends.
@Suite struct FrozenAudienceTests {
    static func campaign(_ id: String, audience: String) throws -> Campaign {
        let json = #"{"v":1,"id":"\#(id)","app":"shop","audience":\#(audience),"notification":{"content":{"default":{"body":"Hi"}}}}"#
        return try Campaign.decodeRecord(Array(json.utf8))
    }

    /// A fresh store with the app `shop` and one saved segment.
    static func store(_ backend: Backend, saving name: String, as expression: String) async throws -> DeviceStore {
        let store = try await backend.openFresh()
        _ = try await store.apps.add(AppRegistration(app: "shop", topic: "com.example.shop", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil)))
        try await store.audience.saveSegment(app: "shop", name: name, expression: expression)
        return store
    }

    /// The store has no call that deletes a saved segment (an operator may, by hand).
    static func deleteSavedSegment(_ store: DeviceStore, _ name: String) async throws {
        try await store.audience.executor.run { connection throws(StoreError) in
            _ = try connection.execute("DELETE FROM segments WHERE app = 'shop' AND name = \(name)")
        }
    }

    @Test(arguments: Backend.enabled)
    func savedSegmentIsFrozenWhenAccepted(_ backend: Backend) async throws {
        let store = try await Self.store(backend, saving: "germans", as: "locale in (de_DE)")
        let campaign = try Self.campaign("c1", audience: #"{"named":"germans"}"#)

        let definition = try await store.definition(of: campaign)
        #expect(definition.segment == "locale in (de_DE)")
        #expect(try await store.campaigns.record(campaign.key, audience: 0, shards: 1, definition: definition, status: .planning, now: store.clock.wallMillis))
        #expect(try await store.campaigns.stored(campaign.key) == definition, "the copy is kept beside the record")

        // Edited, then deleted: the accepted campaign still reads its own copy.
        try await store.audience.saveSegment(app: "shop", name: "germans", expression: "locale in (fr_FR)")
        let stored = try #require(try await store.campaigns.stored(campaign.key))
        #expect(try await store.segment(of: campaign, definition: stored) == SegmentParser.parse("locale in (de_DE)"))
        try await Self.deleteSavedSegment(store, "germans")
        #expect(try await store.segment(of: campaign, definition: stored) == SegmentParser.parse("locale in (de_DE)"))

        // A campaign accepted now cannot name the deleted segment.
        await #expect(throws: MissingReference(code: "unknown_segment", field: "audience.named", reason: #"app shop has no saved segment "germans""#)) {
            try await store.definition(of: try Self.campaign("c2", audience: #"{"named":"germans"}"#))
        }
        // A campaign's own expression is its own; other audiences have no segment.
        #expect(try await store.definition(of: try Self.campaign("c3", audience: #"{"segment":"locale in (it_IT)"}"#)).segment == nil)
        #expect(try await store.segment(of: try Self.campaign("c3", audience: #"{"segment":"locale in (it_IT)"}"#), definition: nil)
            == SegmentParser.parse("locale in (it_IT)"))
        #expect(try await store.segment(of: try Self.campaign("c4", audience: #"{"devices":["d-1"]}"#), definition: nil) == nil)
    }

    /// A campaign stored before segments were frozen (no copy) reads the saved segment as it
    /// is now, as every campaign did then.
    @Test(arguments: Backend.enabled)
    func definitionWithoutCopyReadsTheSavedSegment(_ backend: Backend) async throws {
        let store = try await Self.store(backend, saving: "vip", as: "tag:vip")
        let campaign = try Self.campaign("old", audience: #"{"named":"vip"}"#)
        let legacy = CampaignDefinition(record: String(decoding: MessageCodec.encode(campaign), as: UTF8.self))
        #expect(try await store.segment(of: campaign, definition: legacy) == SegmentParser.parse("tag:vip"))
        try await Self.deleteSavedSegment(store, "vip")
        await #expect(throws: MissingReference.self) { try await store.segment(of: campaign, definition: legacy) }
    }
}
