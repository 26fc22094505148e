import Foundation
import PushfanMessages
import PushfanSupport
import Testing

@testable import PushfanStore

/// A campaign of app shop-ios, as the store names it.
private func shop(_ id: String) -> CampaignKey { CampaignKey(app: "shop-ios", id: id) }

/// The evidence `pushfan devices repair-tokens` reads, on both backends: an invalid device
/// with each campaign whose token rejection came after its last registration, and the
/// restore that makes only invalid devices active again.
@Suite struct TokenRepairStoreTests {
    static let voip = #"{"v":1,"id":"calls","app":"shop-ios","audience":{"segment":"locale = en_US"},"notification":{"push_type":"voip","data":{"call":"1"}}}"#

    @Test(arguments: Backend.enabled)
    func invalidationsNameTheirCampaignAndRestoreReactivates(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        _ = try await store.apps.add(AppRegistration(
            app: "shop-ios", topic: "com.example.shop", credentials: .token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: "/k.p8")))
        let now = store.clock.wallMillis - 600_000
        let tokens = (0..<4).map { String(format: "%064x", $0 + 1) }
        func register(_ index: Int, seenAt: Int64) async throws {
            var registration = DeviceRegistration(deviceID: "phone-\(index)", token: tokens[index])
            registration.seenAt = seenAt
            _ = try await store.devices.register(app: "shop-ios", registration)
        }
        for index in tokens.indices { try await register(index, seenAt: now) }
        let targets = try await store.audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 10, now: store.clock.wallMillis)
        #expect(try await store.campaigns.record(CampaignKey(app: "shop-ios", id: "calls"), audience: 4, shards: 1, definition: CampaignDefinition(record: Self.voip), now: now))
        _ = try await store.ledger.claim(campaign: shop("calls"), targets: targets, owner: "w", now: now + 1_000)
        let outcomes = [
            LedgerOutcome(rowKey: targets[0].rowKey, state: .invalidToken, status: 400, reason: "DeviceTokenNotForTopic"),
            LedgerOutcome(rowKey: targets[1].rowKey, state: .invalidToken, status: 400, reason: "DeviceTokenNotForTopic"),
            LedgerOutcome(rowKey: targets[2].rowKey, state: .delivered, status: 200),
            LedgerOutcome(rowKey: targets[3].rowKey, state: .invalidToken, status: 400, reason: "DeviceTokenNotForTopic"),
        ]
        #expect(try await store.ledger.record(campaign: shop("calls"), outcomes, now: now + 2_000).count == 4)
        for index in [0, 1, 3] {
            #expect(try await store.devices.invalidate(app: "shop-ios", environment: .production, token: tokens[index], reason: "DeviceTokenNotForTopic", now: now + 2_000))
        }
        // phone-1 registered again since (active), then invalidated by something later.
        try await register(1, seenAt: now + 5_000)
        #expect(try await store.devices.invalidate(app: "shop-ios", environment: .production, token: tokens[1], reason: "BadDeviceToken", now: now + 6_000))

        let evidence = try await store.devices.tokenInvalidations(app: "shop-ios")
        #expect(evidence.map(\.deviceID) == ["phone-0", "phone-3"], "phone-1's rejection predates its registration; phone-2 is active")
        #expect(evidence.allSatisfy { $0.campaign == "calls" && $0.definition == Self.voip && $0.ledgerReason == "DeviceTokenNotForTopic" })
        #expect(try await store.devices.tokenInvalidations(app: "other").isEmpty, "another app's devices are not its evidence")

        // Only invalid devices change: phone-2 is active already.
        #expect(try await store.devices.restore(app: "shop-ios", deviceIDs: ["phone-0", "phone-2"]) == 1)
        let restored = try #require(try await store.devices.get(app: "shop-ios", deviceID: "phone-0"))
        #expect(restored.status == .active && restored.invalidReason == nil && restored.invalidAt == nil)
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "phone-3")?.status == .invalid)
        #expect(try await store.devices.tokenInvalidations(app: "shop-ios").map(\.deviceID) == ["phone-3"])
    }
}
