import Foundation
import PushfanMessages
import Testing

@testable import PushfanStore

/// Apps' broadcast channels on both backends: kept per app, another app's id is not found,
/// an unknown app is refused.
@Suite(.timeLimit(.minutes(2)))
struct BroadcastChannelsTests {
    @Test("channels are kept per app, listed oldest first, found only under their own app, and removed once", arguments: Backend.enabled)
    func perApp(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        try await store.addTestApp("news-ios")
        let first = BroadcastChannels.Row(app: "shop-ios", id: "dHN0LXNyY3gtY2hhbm5lbC0xMjM=", environment: .sandbox, policy: .mostRecentMessageStored, createdAt: 1_000)
        let second = BroadcastChannels.Row(app: "shop-ios", id: "ab+/cd==", environment: .production, policy: .noMessageStored, createdAt: 2_000)
        try await store.channels.add(second)
        try await store.channels.add(first)
        #expect(try await store.channels.list(app: "shop-ios") == [first, second])
        #expect(try await store.channels.get(app: "shop-ios", id: second.id) == second)
        #expect(try await store.channels.get(app: "news-ios", id: second.id) == nil)
        #expect(try await store.channels.list(app: "news-ios").isEmpty)
        #expect(try await !store.channels.remove(app: "news-ios", id: first.id))
        #expect(try await store.channels.remove(app: "shop-ios", id: first.id))
        #expect(try await !store.channels.remove(app: "shop-ios", id: first.id))
        #expect(try await store.channels.list(app: "shop-ios") == [second])
        await #expect(throws: StoreError.self) {
            try await store.channels.add(BroadcastChannels.Row(app: "nobody", id: "AAAA", environment: .sandbox, policy: .noMessageStored, createdAt: 1))
        }
    }
}
