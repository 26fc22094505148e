import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport
import Testing

/// Broadcast channels (iOS 18) through the real client against `pushfan apns-sim`: the
/// management requests over libcurl's HTTP/2, and broadcasts through the sender's pool.
@Suite("Broadcast channels", .serialized) struct BroadcastChannelTests {
    static let topic = SenderHarness.topic

    static func manager(_ harness: SenderHarness) throws -> APNsChannelManager {
        APNsChannelManager(environment: .sandbox, override: try harness.endpoint, credentials: try harness.credentials, tokens: ProviderTokenCache(clock: SystemClock()))
    }

    static func update(_ channel: String, expiration: APNsNotification.Expiration = .immediately) throws -> APNsNotification {
        let payload = try APNsPayload(json: ["aps": .object([
            "event": .string("update"), "timestamp": .int(Int64(Date().timeIntervalSince1970)),
            "content-state": .object(["home": .int(2), "away": .int(1)]),
        ])])
        return try APNsNotification(
            channel: channel, bundleID: topic, prepared: APNsPreparedPayload(payload, pushType: .liveactivity, priority: .immediate), expiration: expiration)
    }

    @Test("a channel is created, read, listed and deleted; a broadcast to it is one request; once deleted it is ChannelNotRegistered")
    func lifecycle() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let manager = try Self.manager(harness)
        let id = try await manager.create(bundleID: Self.topic, policy: .mostRecentMessageStored)
        #expect(BroadcastChannel.problem(withID: id) == nil, "\(id)")
        #expect(try await manager.read(bundleID: Self.topic, channel: id) == APNsChannelManager.Channel(id: id, policy: .mostRecentMessageStored))
        let other = try await manager.create(bundleID: Self.topic, policy: .noMessageStored)
        #expect(Set(try await manager.list(bundleID: Self.topic)) == [id, other])

        let client = try harness.client()
        let update = try Self.update(id, expiration: .at(epochSeconds: Int64(Date().timeIntervalSince1970) + 3_600))
        #expect(update.path == "/4/broadcasts/apps/\(Self.topic)")
        #expect(update.headers.contains { $0 == ("apns-channel-id", id) } && !update.headers.contains { $0.0 == "apns-topic" })
        let sent = await client.send(update)
        #expect(sent.isAccepted, "\(sent)")
        let stats = try await harness.simulator.stats()
        #expect((stats["broadcasts"] as? [String: Int]) == [id: 1], "\(stats)")
        #expect((stats["channels"] as? Int) == 2)
        let line = try #require(harness.simulator.logLines().first { $0["channel"] as? String == id })
        #expect(line["token"] as? String == "" && line["push_type"] as? String == "liveactivity" && line["topic"] as? String == Self.topic)

        try await manager.delete(bundleID: Self.topic, channel: id)
        #expect(try await manager.list(bundleID: Self.topic) == [other])
        let afterDelete = await client.send(try Self.update(id))
        #expect(afterDelete.rejection?.reason == .channelNotRegistered && afterDelete.rejection?.status == 400, "\(afterDelete)")
        do {
            try await manager.delete(bundleID: Self.topic, channel: id)
            Issue.record("a deleted channel was deleted again")
        } catch {
            #expect(error == APNsChannelManager.Failure(status: 400, reason: "ChannelNotRegistered"))
        }
        await client.shutdown()
    }

    @Test("a channel without message storage takes only apns-expiration 0; a broadcast cannot start an activity")
    func storagePolicyAndEvents() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let id = try await Self.manager(harness).create(bundleID: Self.topic, policy: .noMessageStored)
        let client = try harness.client()
        let stored = await client.send(try Self.update(id, expiration: .at(epochSeconds: Int64(Date().timeIntervalSince1970) + 600)))
        #expect(stored.rejection?.reason == .badExpirationDate, "\(stored)")
        #expect(await client.send(try Self.update(id)).isAccepted)
        // An id that is not base64 never leaves the client.
        #expect(throws: APNsRequestError.self) { try Self.update("not base64!") }
        await client.shutdown()
    }

    @Test("APNs unreachable: the manager says so (status 0), not a made-up answer")
    func unreachable() async throws {
        let endpoint = try APNsEndpoint(url: "http://127.0.0.1:9")
        let manager = APNsChannelManager(
            environment: .sandbox, override: endpoint,
            credentials: try APNsCredentials.token(teamID: SenderHarness.teamID, keyID: SenderHarness.keyID, key: .generate()), tokens: ProviderTokenCache(clock: SystemClock()))
        do {
            _ = try await manager.list(bundleID: Self.topic)
            Issue.record("listing against a closed port succeeded")
        } catch {
            #expect(error.status == 0 && !error.reason.isEmpty, "\(error)")
        }
    }
}
