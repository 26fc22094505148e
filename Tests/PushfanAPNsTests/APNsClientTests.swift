import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanCrypto
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// The sender against the project's APNs simulator: what reaches "APNs" and
/// what comes back.
@Suite(.serialized) struct APNsClientTests {
    @Test("an accepted notification carries exactly the headers and payload it was built with")
    func acceptedAsBuilt() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let client = try harness.client()
        let notification = try APNsNotification(
            token: SenderHarness.randomToken(), topic: SenderHarness.topic,
            payload: APNsPayload(json: ["aps": .object(["alert": .string("Hello")]), "deal": .string("42")]),
            expiration: .at(epochSeconds: 4_102_444_800), collapseID: "spring-sale")
        let result = await client.send(notification)
        await client.shutdown()

        guard case .response(.accepted(let apnsID, let uniqueID)) = result else {
            Issue.record("expected acceptance, got \(result)")
            return
        }
        #expect(apnsID == notification.apnsIDString)
        #expect(uniqueID != nil, "the simulator answers like the sandbox, with apns-unique-id")
        let line = try #require(harness.acceptedLog()[notification.apnsIDString])
        #expect(line["token"] as? String == notification.token?.hex)
        #expect(line["topic"] as? String == "com.example.app")
        #expect(line["push_type"] as? String == "alert")
        #expect((line["priority"] as? NSNumber)?.intValue == 10)
        #expect(line["collapse_id"] as? String == "spring-sale")
        #expect((line["payload_bytes"] as? NSNumber)?.intValue == notification.payload.count)
    }

    @Test("the wire carries exactly the headers the notification's encoder gives")
    func wireHeadersAreTheEncoders() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let client = try harness.client()
        let notifications = [
            try APNsNotification(
                token: SenderHarness.randomToken(), topic: SenderHarness.topic, pushType: .background,
                payload: APNsPayload(json: ["aps": .object(["content-available": .int(1)])]),
                expiration: .at(epochSeconds: 4_102_444_800), collapseID: "sync-\u{e9}"),
            try APNsNotification(
                token: SenderHarness.randomToken(), topic: SenderHarness.topic, pushType: .voip,
                payload: APNsPayload(json: ["aps": .object([:])]), priority: .low, expiration: .immediately),
        ]
        let results = await client.send(batch: notifications)
        await client.shutdown()
        let log = harness.acceptedLog()
        let logged = ["apns-topic": "topic", "apns-push-type": "push_type", "apns-priority": "priority",
                      "apns-expiration": "expiration", "apns-collapse-id": "collapse_id", "apns-id": "apns_id"]
        for (notification, result) in zip(notifications, results) {
            #expect(result.isAccepted, "\(result)")
            let line = try #require(log[notification.apnsIDString])
            let written = Dictionary(uniqueKeysWithValues: notification.headers)
            #expect(Set(written.keys).isSubset(of: logged.keys), "every header the encoder writes is one the simulator logs")
            for (header, field) in logged {
                let seen = line[field].flatMap { $0 is NSNull ? nil : "\($0)" }
                #expect(seen == written[header], "\(header): wire \(seen ?? "none"), encoder \(written[header] ?? "none")")
            }
        }
    }

    /// A payload each push type accepts, and the topic and priority APNs must see.
    static let pushTypes: [(Campaign.PushType, [String: JSONValue], String, Int)] = [
        (.alert, ["aps": .object(["alert": .string("hi")])], "com.example.app", 10),
        (.background, ["aps": .object(["content-available": .int(1)])], "com.example.app", 5),
        (.voip, ["aps": .object([:]), "call": .string("x")], "com.example.app.voip", 10),
        (.complication, ["aps": .object([:])], "com.example.app.complication", 10),
        (.fileprovider, ["aps": .object([:])], "com.example.app.pushkit.fileprovider", 10),
        (.mdm, ["mdm": .string("00000000-1111-2222-3333-444444444444")], "com.example.app", 10),
        (.location, ["aps": .object([:])], "com.example.app.location-query", 10),
        (.liveactivity, ["aps": .object([
            "event": .string("update"), "timestamp": .int(1_700_000_000), "content-state": .object(["score": .int(2)]),
        ])], "com.example.app.push-type.liveactivity", 10),
        (.pushtotalk, ["aps": .object([:])], "com.example.app.voip-ptt", 10),
        (.widgets, ["aps": .object(["content-changed": .bool(true)])], "com.example.app.push-type.widgets", 10),
        (.controls, ["aps": .object(["content-changed": .bool(true)])], "com.example.app.push-type.controls", 10),
    ]

    @Test("every push type reaches APNs with its topic suffix and priority")
    func everyPushType() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let client = try harness.client()
        var sent: [(APNsNotification, String, Int)] = []
        for (pushType, payload, topic, priority) in Self.pushTypes {
            let notification = try APNsNotification(
                token: SenderHarness.randomToken(), topic: SenderHarness.topic, pushType: pushType, payload: APNsPayload(json: payload))
            sent.append((notification, topic, priority))
        }
        let results = await client.send(batch: sent.map(\.0))
        await client.shutdown()
        let log = harness.acceptedLog()
        for ((notification, topic, priority), result) in zip(sent, results) {
            #expect(result.isAccepted, "\(notification.pushType): \(result)")
            let line = log[notification.apnsIDString]
            #expect(line?["topic"] as? String == topic)
            #expect(line?["push_type"] as? String == notification.pushType.rawValue)
            #expect((line?["priority"] as? NSNumber)?.intValue == priority)
        }
    }

    @Test("every documented reason comes back as a rejection with its status and disposition")
    func reasonTable() async throws {
        // The simulator answers each rule token with the given reason and status.
        var rules: [String: Any] = [:]
        var expected: [(DeviceToken, APNsReason, Int)] = []
        for entry in APNsReason.table {
            let token = SenderHarness.randomToken()
            rules[token.hex] = ["reason": entry.reason.rawValue, "status": entry.status]
            expected.append((token, entry.reason, entry.status))
        }
        let harness = try await SenderHarness.start(rules: ["tokens": rules])
        defer { harness.stop() }
        let client = try harness.client()
        let results = await client.send(batch: try expected.map { try SenderHarness.alert(token: $0.0) })
        await client.shutdown()
        for ((_, reason, status), result) in zip(expected, results) {
            if reason == .expiredProviderToken {
                // The token is minutes old, too young to replace (20-minute
                // rule), so the sender hands the rejection to the caller.
                #expect(result.rejection?.reason == reason)
                continue
            }
            let rejection = try #require(result.rejection, "\(reason): \(result)")
            #expect(rejection.status == status)
            #expect(rejection.reason == reason)
            let disposition = try #require(APNsReason.table.first { $0.reason == reason }?.disposition)
            #expect(APNsOutcome.rejected(status: rejection.status, reason: rejection.reason, timestamp: nil).disposition == disposition)
        }
    }

    @Test("410 carries the timestamp APNs last saw the token invalid")
    func unregisteredTimestamp() async throws {
        let token = SenderHarness.randomToken()
        let harness = try await SenderHarness.start(rules: ["unregistered": [token.hex: 1_700_000_123_456]])
        defer { harness.stop() }
        let client = try harness.client()
        let result = await client.send(try SenderHarness.alert(token: token))
        await client.shutdown()
        let rejection = try #require(result.rejection)
        #expect(rejection.status == 410)
        #expect(rejection.reason == .unregistered)
        #expect(rejection.timestamp == Date(timeIntervalSince1970: 1_700_000_123.456))
        #expect(APNsOutcome.rejected(status: 410, reason: .unregistered, timestamp: rejection.timestamp).disposition == .invalidateToken)
    }

    @Test("a wrong signing key is a credentials problem, not a device failure")
    func wrongKey() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let impostor = try APNsCredentials.token(teamID: SenderHarness.teamID, keyID: SenderHarness.keyID, key: .generate())
        let client = try APNsClient(endpoint: harness.endpoint, credentials: impostor)
        let result = await client.send(try SenderHarness.alert())
        await client.shutdown()
        let rejection = try #require(result.rejection)
        #expect(rejection.status == 403)
        #expect(rejection.reason == .invalidProviderToken)
        #expect(APNsOutcome.rejected(status: 403, reason: rejection.reason, timestamp: nil).disposition == .credentialsProblem)
    }

    @Test("one provider token serves every request until it is 50 minutes old, never two within 20 minutes")
    func providerTokenReuseAndRefresh() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let clock = ManualClock(wall: Date())
        let cache = ProviderTokenCache(clock: clock)
        let client = try harness.client(tokenCache: cache) { $0.connections = 2 }
        let first = await client.send(batch: try (0..<50).map { _ in try SenderHarness.alert() })
        #expect(first.allSatisfy { $0.isAccepted })
        let changesAtStart = try await Self.jwtChanges(harness)

        // 30 minutes on: still the same token.
        clock.advance(minutes: 30)
        try await harness.simulator.control(["clock_offset_s": 30 * 60])
        let second = await client.send(batch: try (0..<50).map { _ in try SenderHarness.alert() })
        #expect(second.allSatisfy { $0.isAccepted })
        #expect(try await Self.jwtChanges(harness) == changesAtStart)

        // 51 minutes after the first: one new token, accepted (not TooManyProviderTokenUpdates).
        clock.advance(minutes: 21)
        try await harness.simulator.control(["clock_offset_s": 51 * 60])
        let third = await client.send(batch: try (0..<50).map { _ in try SenderHarness.alert() })
        await client.shutdown()
        #expect(third.allSatisfy { $0.isAccepted }, "\(third.first { !$0.isAccepted }.map { "\($0)" } ?? "")")
        #expect(try await Self.jwtChanges(harness) == changesAtStart + 1)
        let stats = try await harness.simulator.stats()
        #expect(stats.count("reason", "TooManyProviderTokenUpdates") == 0)
        #expect(stats.count("reason", "ExpiredProviderToken") == 0)
    }

    @Test("ExpiredProviderToken: the sender refreshes the token once, reconnects and the resend is accepted")
    func expiredProviderTokenRecovery() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let clock = ManualClock(wall: Date())
        let cache = ProviderTokenCache(clock: clock)
        let client = try harness.client(tokenCache: cache)
        #expect(await client.send(try SenderHarness.alert()).isAccepted)
        let connectionsBefore = try await harness.simulator.stats().count("connections_accepted")

        // Our clock: 25 minutes on (the token is still current for us); the
        // simulator's: 65 minutes on, so it calls the token expired.
        clock.advance(minutes: 25)
        try await harness.simulator.control(["clock_offset_s": 65 * 60])
        let notification = try SenderHarness.alert()
        let result = await client.send(notification)
        await client.shutdown()
        #expect(result.isAccepted, "\(result)")
        let stats = try await harness.simulator.stats()
        #expect(stats.count("reason", "ExpiredProviderToken") == 1)
        #expect(stats.count("connections_accepted") > connectionsBefore, "the resend went over a new connection")
        #expect(harness.acceptedLog()[notification.apnsIDString] != nil)
    }

    @Test("an oversize payload is refused when the notification is built and never reaches the wire")
    func oversizePayload() async throws {
        let big = String(repeating: "x", count: 4_100)
        #expect(throws: APNsRequestError.self) {
            try APNsNotification(
                token: SenderHarness.randomToken(), topic: SenderHarness.topic,
                payload: APNsPayload(json: ["aps": .object(["alert": .string(big)])]))
        }
        // VoIP allows 5,120 bytes; the same payload goes through.
        let voip = try APNsNotification(
            token: SenderHarness.randomToken(), topic: SenderHarness.topic, pushType: .voip,
            payload: APNsPayload(json: ["aps": .object([:]), "blob": .string(big)]))
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let client = try harness.client()
        #expect(await client.send(voip).isAccepted)
        await client.shutdown()
        #expect(try await harness.simulator.stats().count("requests") == 1)
    }

    static func jwtChanges(_ harness: SenderHarness) async throws -> Int {
        let stats = try await harness.simulator.stats()
        return (stats["jwt_changes"] as? [String: Any])?.values.compactMap { ($0 as? NSNumber)?.intValue }.reduce(0, +) ?? 0
    }
}
