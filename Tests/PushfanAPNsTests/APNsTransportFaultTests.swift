import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// What Debian 12's libcurl (7.88.1) reports when the server misbehaves, and how
/// the sender classifies it. Every case checks the classification against the
/// simulator's record of what it accepted: a result may say "not processed"
/// only for a notification the simulator never accepted.
@Suite(.serialized) struct APNsTransportFaultTests {
    /// No failure claims "not processed" for something the simulator accepted,
    /// and every acceptance the client saw is in the simulator's log.
    private func checkAgainstLog(_ notifications: [APNsNotification], _ results: [APNsSendResult], _ harness: SenderHarness) {
        let log = harness.acceptedLog()
        for (notification, result) in zip(notifications, results) {
            switch result {
            case .response(.accepted):
                #expect(log[notification.apnsIDString] != nil, "accepted but not in the simulator's log")
            case .failed(let failure) where failure.certainty == .notProcessed:
                #expect(log[notification.apnsIDString] == nil, "\(failure) but the simulator accepted it")
            default:
                break
            }
        }
    }

    @Test("GOAWAY with streams in flight: each stream is answered, or failed with an honest certainty")
    func goAwayInFlight() async throws {
        let harness = try await SenderHarness.start(["--goaway-after", "10", "--latency", "20"])
        defer { harness.stop() }
        let client = try harness.client()
        let notifications = try (0..<60).map { _ in try SenderHarness.alert() }
        let results = await client.send(batch: notifications)
        await client.shutdown()
        checkAgainstLog(notifications, results, harness)
        let stats = try await harness.simulator.stats()
        #expect(stats.count("goaways_sent") >= 1)
        // libcurl resends streams above last-stream-id on a new connection by
        // itself, so most notifications get through.
        #expect(results.filter { $0.isAccepted }.count >= 10)
        for failure in results.compactMap(\.failure) {
            #expect([.goAwayUnprocessed, .goAwayInFlight, .connectionLost, .refusedStream, .streamReset].contains(failure.cause), "\(failure)")
        }
    }

    @Test("refused streams were not processed: never in the simulator's log, and safe to resend")
    func refusedStreams() async throws {
        let harness = try await SenderHarness.start(["--refuse-fraction", "0.3"])
        defer { harness.stop() }
        let client = try harness.client()
        let notifications = try (0..<100).map { _ in try SenderHarness.alert() }
        let results = await client.send(batch: notifications)
        checkAgainstLog(notifications, results, harness)
        let stats = try await harness.simulator.stats()
        #expect(stats.count("refused_streams") > 0)
        // Whatever libcurl did not retry itself is reported as refused (not processed).
        for failure in results.compactMap(\.failure) {
            #expect(failure.cause == .refusedStream, "\(failure)")
            #expect(failure.certainty == .notProcessed)
        }
        // Resending the failures gets them through once the fault is off.
        try await harness.simulator.control(["refuse_fraction": 0])
        let retried = notifications.enumerated().filter { !results[$0.offset].isAccepted }.map(\.element)
        let second = await client.send(batch: retried)
        await client.shutdown()
        #expect(second.allSatisfy { $0.isAccepted })
        #expect(try await harness.simulator.stats().count("duplicate_acceptances") == 0)
    }

    @Test("a connection dropped mid-flight leaves those requests' outcome unknown")
    func connectionResetMidFlight() async throws {
        let harness = try await SenderHarness.start(["--drop-after", "5", "--latency", "50"])
        defer { harness.stop() }
        let client = try harness.client()
        let notifications = try (0..<20).map { _ in try SenderHarness.alert() }
        let results = await client.send(batch: notifications)
        await client.shutdown()
        checkAgainstLog(notifications, results, harness)
        let failures = results.compactMap(\.failure)
        #expect(!failures.isEmpty, "the simulator dropped a connection with streams in flight")
        #expect(failures.contains { $0.certainty == .outcomeUnknown })
        #expect(try await harness.simulator.stats().count("dropped_connections") >= 1)
    }

    @Test("a server limit of one stream is honoured, then a raised limit is used")
    func streamLimitOneThenRaised() async throws {
        let harness = try await SenderHarness.start(["--max-concurrent-streams", "1"])
        defer { harness.stop() }
        let client = try harness.client { $0.streamsPerConnection = 100 }
        let first = await client.send(batch: try (0..<30).map { _ in try SenderHarness.alert() })
        #expect(first.allSatisfy { $0.isAccepted }, "\(first.first { !$0.isAccepted }.map { "\($0)" } ?? "")")
        try await harness.simulator.control(["max_concurrent_streams": 500])
        let second = await client.send(batch: try (0..<300).map { _ in try SenderHarness.alert() })
        await client.shutdown()
        #expect(second.allSatisfy { $0.isAccepted })
        let stats = try await harness.simulator.stats()
        #expect(stats.count("refused_streams") == 0, "the client never opened more streams than allowed")
        #expect(stats.count("accepted") == 330)
    }

    @Test("503 bursts come back as retry-later rejections, and the retrying send gets through")
    func serviceUnavailableBursts() async throws {
        let harness = try await SenderHarness.start(["--p503", "1"])
        defer { harness.stop() }
        let client = try harness.client()
        let burst = await client.send(batch: try (0..<20).map { _ in try SenderHarness.alert() })
        for result in burst {
            #expect(result.rejection?.status == 503, "\(result)")
            #expect(result.rejection?.reason == .serviceUnavailable)
        }
        try await harness.simulator.control(["p503": 0.5])
        var policy = RetryPolicy()
        policy.maxAttempts = 30
        policy.baseDelay = .milliseconds(1)
        policy.maxDelay = .milliseconds(5)
        let (result, decision, attempts) = await client.send(try SenderHarness.alert(), retrying: policy)
        await client.shutdown()
        #expect(result.isAccepted, "\(result) after \(attempts) attempts")
        #expect(decision == .done)
    }

    @Test("429 TooManyRequests waits per token: a notification expiring sooner is not hammered")
    func tooManyRequests() async throws {
        let token = SenderHarness.randomToken()
        let harness = try await SenderHarness.start(["--throttle-token", token.hex])
        defer { harness.stop() }
        let client = try harness.client()
        let notification = try APNsNotification(
            token: token, topic: SenderHarness.topic,
            payload: APNsPayload(json: ["aps": .object(["alert": .string("x")])]),
            expiration: .until(Date().addingTimeInterval(20)))
        let (result, decision, attempts) = await client.send(notification, retrying: RetryPolicy())
        await client.shutdown()
        #expect(result.rejection?.status == 429)
        #expect(result.rejection?.reason == .tooManyRequests)
        #expect(decision == .expired)
        #expect(attempts == 1)
    }

    @Test("a slow server: requests finish when it answers within the timeout, and time out with unknown outcome otherwise")
    func slowServer() async throws {
        let harness = try await SenderHarness.start(["--latency", "300"])
        defer { harness.stop() }
        let patient = try harness.client()
        #expect(await patient.send(batch: try (0..<10).map { _ in try SenderHarness.alert() }).allSatisfy { $0.isAccepted })
        await patient.shutdown()

        let hasty = try harness.client { $0.requestTimeout = .milliseconds(100) }
        let result = await hasty.send(try SenderHarness.alert())
        await hasty.shutdown()
        let failure = try #require(result.failure, "\(result)")
        #expect(failure.cause == .timedOut)
        #expect(failure.certainty == .outcomeUnknown)
    }

    @Test("nothing listening: connect failures say not processed")
    func connectFailed() async throws {
        let (port, held) = try FreePort.held()
        defer { close(held) }
        let client = try APNsClient(
            endpoint: APNsEndpoint(url: "https://127.0.0.1:\(port)"),
            credentials: APNsCredentials.token(teamID: "TEAM123456", keyID: "KEY1234567", key: .generate()))
        let results = await client.send(batch: try (0..<5).map { _ in try SenderHarness.alert() })
        await client.shutdown()
        for result in results {
            #expect(result.failure?.cause == .connectFailed)
            #expect(result.failure?.certainty == .notProcessed)
        }
    }

    @Test("shutdown: queued notifications come back as sender_closed, later sends too")
    func shutdown() async throws {
        let harness = try await SenderHarness.start(["--latency", "200"])
        defer { harness.stop() }
        let log = SenderHarness.LogCapture()
        let client = try harness.client(logger: log.logger) { $0.streamsPerConnection = 2 }
        // Two streams answered in 200 ms each drain 200 notifications in 20 s:
        // far longer than a poll of the simulator takes on a loaded machine
        // (with 20, the whole batch was once done before a poll saw it).
        let notifications = try (0..<200).map { _ in try SenderHarness.alert() }
        async let results = client.send(batch: notifications)
        // Shut down once requests are on the wire. Once (of many full runs) none was within
        // 10 s: say what the sender's connection did.
        let deadline = ContinuousClock.now + .seconds(30)
        while try await harness.simulator.stats().count("requests") == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let stats = try await harness.simulator.stats()
        #expect(stats.count("requests") > 0, "no request reached the simulator in 30 s; the sender: \(log.lines.suffix(20)); the simulator: \(stats)")
        await client.shutdown()
        let all = await results
        #expect(all.filter { $0.isAccepted }.count >= 1, "the requests on the wire were allowed to finish")
        #expect(all.contains { $0.failure?.cause == .senderClosed })
        checkAgainstLog(notifications, all, harness)
        let late = await client.send(try SenderHarness.alert())
        #expect(late.failure?.cause == .senderClosed)
    }
}
