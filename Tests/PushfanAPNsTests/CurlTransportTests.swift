import Foundation
import PushfanAPNs
import PushfanCore
import PushfanTestSupport
import Testing

/// The libcurl transport (`transport: libcurl`) against the simulator: it
/// sends and reads answers like the default one; under refused streams it
/// behaves as libcurl 7.88 does (pinned here, explained in docs/apns.md).
@Suite(.serialized) struct CurlTransportTests {
    private func client(_ harness: SenderHarness) throws -> APNsClient {
        try harness.client { $0.transport = .libcurl }
    }

    @Test("libcurl: acceptances, rejections and the 410 timestamp come back as with nghttp2")
    func outcomes() async throws {
        let bad = SenderHarness.randomToken()
        let gone = SenderHarness.randomToken()
        let harness = try await SenderHarness.start(rules: [
            "tokens": [bad.hex: "BadDeviceToken"], "unregistered": [gone.hex: 1_700_000_000_000],
        ])
        defer { harness.stop() }
        let client = try client(harness)
        let good = try SenderHarness.alert(collapseID: "c1")
        let results = await client.send(batch: [good, try SenderHarness.alert(token: bad), try SenderHarness.alert(token: gone)])
        await client.shutdown()
        guard case .response(.accepted(let apnsID, _)) = results[0] else {
            Issue.record("expected acceptance, got \(results[0])")
            return
        }
        #expect(apnsID == good.apnsIDString)
        #expect(harness.acceptedLog()[good.apnsIDString]?["collapse_id"] as? String == "c1")
        #expect(results[1].rejection?.status == 400)
        #expect(results[1].rejection?.reason == .badDeviceToken)
        #expect(results[2].rejection?.reason == .unregistered)
        #expect(results[2].rejection?.timestamp == Date(timeIntervalSince1970: 1_700_000_000))
    }

    @Test("libcurl resends refused streams on fresh connections; what it gives up on is reported as outcome unknown")
    func refusedStreams() async throws {
        let harness = try await SenderHarness.start(["--refuse-fraction", "0.2"])
        defer { harness.stop() }
        let client = try client(harness)
        let notifications = try (0..<100).map { _ in try SenderHarness.alert() }
        let results = await client.send(batch: notifications)
        await client.shutdown()
        let stats = try await harness.simulator.stats()
        #expect(stats.count("refused_streams") > 0)
        #expect(stats.count("connections_accepted") > 1, "libcurl 7.88 closes a connection after a refused stream")
        let log = harness.acceptedLog()
        for (notification, result) in zip(notifications, results) {
            if result.isAccepted { #expect(log[notification.apnsIDString] != nil) }
            if let failure = result.failure { #expect(failure.certainty == .outcomeUnknown, "\(failure)") }
        }
    }
}
