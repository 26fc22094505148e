import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanTestSupport
import Testing

/// How the sender reaches the server, against real processes: libcurl's connections over
/// IPv6, through a fallback address, through an HTTP CONNECT proxy (Debian's tinyproxy),
/// refusing an unknown CA, and nghttp2's streams under APNs' drop to one stream.
@Suite(.timeLimit(.minutes(3)))
struct ConnectionPathTests {
    @Test("IPv6: the simulator on ::1, the sender reaches it")
    func ipv6() async throws {
        let harness = try await SenderHarness.start(["--host", "::1"])
        defer { harness.stop() }
        #expect(harness.simulator.url.hasPrefix("https://[::1]:"), "\(harness.simulator.url)")
        let client = try harness.client()
        let result = await client.send(try SenderHarness.alert())
        await client.shutdown()
        #expect(result.isAccepted, "\(result)")
    }

    @Test("a host whose first address has nothing listening is reached through the other")
    func fallbackAddress() async throws {
        // libcurl resolves localhost to 127.0.0.1 first, then ::1; the simulator is on ::1 only.
        // Its port on 127.0.0.1 is held, bound but not listening, so the first address is
        // refused: another test's simulator listening there (the two families' ports are
        // apart) once answered instead, with a certificate of another CA.
        var started: (harness: SenderHarness, held: Int32)?
        for _ in 0..<5 where started == nil {
            let harness = try await SenderHarness.start(["--host", "::1"])
            if let held = FreePort.hold(harness.simulator.port) { started = (harness, held) } else { harness.stop() }
        }
        guard let (harness, held) = started else { throw TestFailure("127.0.0.1 had another listener on each simulator's port") }
        defer {
            close(held)
            harness.stop()
        }
        let endpoint = try APNsEndpoint(url: "https://localhost:\(harness.simulator.port)", caFile: harness.simulator.caFile)
        var configuration = APNsClientConfiguration()
        configuration.connections = 1
        let client = try APNsClient(endpoint: endpoint, credentials: harness.credentials, configuration: configuration)
        let results = await client.send(batch: try (0..<3).map { _ in try SenderHarness.alert() })
        await client.shutdown()
        #expect(results.allSatisfy { $0.isAccepted }, "\(results)")
    }

    @Test("through an HTTP CONNECT proxy: accepted, and the proxy's log shows the tunnel")
    func throughAProxy() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let proxy = try await ProxyProcess()
        let client = try harness.client { $0.proxy = proxy.url }
        let results = await client.send(batch: try (0..<20).map { _ in try SenderHarness.alert() })
        await client.shutdown()
        #expect(results.allSatisfy { $0.isAccepted }, "\(results.filter { !$0.isAccepted })")
        #expect(proxy.log.contains("CONNECT") && proxy.log.contains(":\(harness.simulator.port)"), "\(proxy.log)")
        #expect(try await harness.simulator.stats().count("accepted") == 20)
    }

    @Test("`pushfan send` takes the proxy from https_proxy, as libcurl reads it")
    func proxyFromTheEnvironment() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        let proxy = try await ProxyProcess()
        let sent = try await CommandLineTool.run("env", [
            "https_proxy=\(proxy.url)", TestBinaries.pushfan, "send", "--token", SenderHarness.randomToken().hex,
            "--payload", #"{"aps":{"alert":"hi"}}"#, "--url", harness.simulator.url, "--ca-file", harness.simulator.caFile ?? "",
            "--team-id", SenderHarness.teamID, "--key-id", SenderHarness.keyID, "--key-file", harness.keyFile,
            "--topic", SenderHarness.topic, "--token-cache", "off",
        ])
        #expect(sent.status == 0 && sent.output.contains(#""outcome":"accepted""#), "\(sent.output) \(sent.error)")
        #expect(proxy.log.contains("CONNECT"), "\(proxy.log)")
    }

    @Test("a proxy that refuses the tunnel: a clear error, nothing sent")
    func refusingProxy() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        // Tunnels only to a port the simulator is not on: tinyproxy answers 403.
        let proxy = try await ProxyProcess(allowedPorts: [1])
        let client = try harness.client { $0.proxy = proxy.url }
        let results = await client.send(batch: try (0..<5).map { _ in try SenderHarness.alert() })
        await client.shutdown()
        for result in results {
            let failure = try #require(result.failure, "\(result)")
            #expect(failure.cause == .connectFailed && failure.certainty == .notProcessed, "\(failure)")
            #expect(failure.detail.contains("CONNECT") && failure.detail.contains("403"), "\(failure.detail)")
        }
        #expect(try await harness.simulator.stats().count("requests") == 0)
    }

    @Test("a server certificate from an unknown CA: an error naming verification, nothing sent, no reconnect storm")
    func unknownCA() async throws {
        let harness = try await SenderHarness.start()
        defer { harness.stop() }
        // The simulator's CA is not given: only the system's CAs are trusted.
        let endpoint = try APNsEndpoint(url: harness.simulator.url)
        let client = try APNsClient(endpoint: endpoint, credentials: harness.credentials)
        // A batch of 100, then four single sends, each after the reconnect backoff.
        var results = await client.send(batch: try (0..<100).map { _ in try SenderHarness.alert() })
        for _ in 0..<4 { results.append(await client.send(try SenderHarness.alert())) }
        await client.shutdown()
        let failures = try results.map { try #require($0.failure, "\($0)") }
        for failure in failures {
            #expect(failure.cause == .connectFailed && failure.certainty == .notProcessed, "\(failure)")
        }
        #expect(failures.contains { $0.detail.contains("certificate") }, "\(Set(failures.map(\.detail)))")
        let stats = try await harness.simulator.stats()
        #expect(stats.count("requests") == 0)
        // One attempt per round, not one per notification.
        #expect(stats.count("connections_accepted") <= 6, "\(stats.count("connections_accepted")) connections for 104 notifications")
    }

    @Test("APNs' drop to one stream after each rejection, 10% rejected: every notification answered, none lost, no duplicates")
    func dropToOne() async throws {
        let harness = try await SenderHarness.start(
            ["--drop-to-one-after-rejection"], rules: ["prefixes": ["0bad": ["reason": "BadDeviceToken"]]], log: false)
        defer { harness.stop() }
        let client = try harness.client { $0.connections = 2 }
        let notifications = try (0..<2_000).map { index in
            try SenderHarness.alert(token: DeviceToken((index % 10 == 0 ? "0bad" : "ab00") + String(format: "%060x", index)))
        }
        let results = await client.send(batch: notifications)
        await client.shutdown()
        let accepted = results.filter(\.isAccepted).count
        let rejected = results.filter { $0.rejection?.reason == .badDeviceToken }.count
        #expect(accepted == 1_800 && rejected == 200, "other outcomes: \(results.filter { !$0.isAccepted && $0.rejection == nil }.prefix(3))")
        let stats = try await harness.simulator.stats()
        #expect(stats.count("accepted") == 1_800)
        #expect(stats.count("duplicate_acceptances") == 0)
    }
}
