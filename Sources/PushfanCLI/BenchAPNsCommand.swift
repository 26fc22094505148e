import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanCrypto
import PushfanMessages
import PushfanSupport

/// `pushfan bench apns`: as many notifications as fast as the sender goes.
struct BenchAPNsCommand: Command {
    static let spec = CommandSpec(
        name: "bench apns",
        summary: "Send N notifications as fast as possible and report the rate",
        discussion: """
            For load tests against a simulator or staging endpoint, never Apple's hosts. Without
            credentials a throwaway P-256 key signs the provider tokens (a simulator run with
            --accept-any-key, or with that key registered, accepts them; --key-out writes its public
            half); without --tokens, random 64-hex device tokens are used.

            Notifications are built and handed to the sender in batches (--batch), with up to
            --concurrency batches in flight. Progress goes to standard error every second; the
            last line on standard output is one JSON object:
              {"bench":"apns","sent":N,"seconds":S,"sent_per_s":R,"cpu_us_per_notification":C,
               "connections":C,"streams":S,"outcomes":{"accepted":N,...}}
            Outcomes are counted as accepted, rejected:<reason> and failed:<cause>.
            """,
        options: [
            .option("count", "N", "notifications to send (required)"),
            .option("tokens", "FILE", "device tokens, one hex token per line (used round-robin)"),
            .option("topic", "BUNDLE", "apns-topic (default: com.example.pushfan)"),
            .option("payload", "JSON", "the payload (default: a 150-byte alert)"),
            .option("batch", "N", "notifications per hand-over (default: 1000)"),
            .option("concurrency", "N", "batches in flight (default: 256: a batch waits for its slowest answer, so at APNs latency the sender, not this command, sets the rate)"),
            .option("key-out", "FILE", "write the throwaway key's public PEM here (for a simulator's --keys)"),
            .flag("insecure", "do not verify the server's certificate"),
        ] + APNsOptions.poolSpecs + APNsOptions.endpointSpecs + APNsOptions.credentialSpecs)

    /// 150 bytes, the size scripts/bench-sender gives every client.
    static let defaultPayload = #"{"aps":{"alert":{"title":"Pushfan benchmark","body":"A notification of the size campaigns send: a title and a body line. Thanks!"},"sound":"default"}}"#

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let count = try arguments.int("count", default: 0, range: 1...100_000_000)
        guard arguments.value("count") != nil else { throw UsageError("--count is required") }
        let batchSize = try arguments.int("batch", default: 1000, range: 1...100_000)
        let concurrency = try arguments.int("concurrency", default: 256, range: 1...1024)
        let endpoint = try APNsOptions.endpoint(arguments, context, insecure: arguments.flag("insecure"))
        let credentials: APNsCredentials
        if let given = try APNsOptions.credentials(arguments) {
            credentials = given
        } else {
            let key = ES256PrivateKey.generate()
            if let path = arguments.value("key-out") {
                try Data(key.publicKey.pem.utf8).write(to: URL(fileURLWithPath: path))
            }
            credentials = try APNsCredentials.token(teamID: "BENCHTEAM1", keyID: "BENCHKEY01", key: key)
        }
        let tokens = try loadTokens(arguments.value("tokens"))
        let payload = try APNsPreparedPayload(
            APNsPayload(jsonBytes: Data((arguments.value("payload") ?? defaultPayload).utf8)), pushType: .alert, priority: nil)
        let topic = arguments.value("topic") ?? "com.example.pushfan"
        let configuration = try APNsOptions.pool(arguments, context)
        let client = try APNsClient(
            endpoint: endpoint, credentials: credentials, configuration: configuration, logger: context.logger)

        // Warm-up: one request opens a connection (and, for token auth, lifts a
        // server's initial limit of one stream) before the clock starts.
        _ = await client.send(try APNsNotification(token: tokens[0], topic: topic, prepared: payload))

        let counter = OutcomeCounter()
        let progress = ProgressReporter()
        let cpuStart = processCPUSeconds()
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            var running = 0
            func addBatch() {
                let range = next..<min(next + batchSize, count)
                next = range.upperBound
                running += 1
                group.addTask {
                    var batch: [APNsNotification] = []
                    batch.reserveCapacity(range.count)
                    for index in range {
                        // Cannot fail: the token, topic and payload were checked above.
                        batch.append(try! APNsNotification(token: tokens[index % tokens.count], topic: topic, prepared: payload))
                    }
                    let results = await client.send(batch: batch)
                    counter.add(results)
                    progress.report(counter.total, of: count, since: start)
                }
            }
            while next < count && running < concurrency { addBatch() }
            for await _ in group {
                running -= 1
                if next < count { addBatch() }
            }
        }
        let seconds = (ContinuousClock.now - start).seconds
        let cpu = processCPUSeconds() - cpuStart
        await client.shutdown()
        progress.finish()

        let outcomes = counter.snapshot.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.int(Int64($0.value))) }
        print(JSONValue.orderedObjectJSON([
            ("bench", .string("apns")),
            ("sent", .int(Int64(count))),
            ("seconds", .number((seconds * 1000).rounded() / 1000)),
            ("sent_per_s", .int(Int64((Double(count) / seconds).rounded()))),
            ("cpu_us_per_notification", .number((cpu / Double(count) * 1e7).rounded() / 10)),
            ("connections", .int(Int64(configuration.connections))),
            ("streams", .int(Int64(configuration.streamsPerConnection))),
            ("outcomes", .object(Dictionary(uniqueKeysWithValues: outcomes))),
        ]))
        return 0
    }

    private static func loadTokens(_ path: String?) throws -> [DeviceToken] {
        guard let path else {
            var generator = SystemRandomNumberGenerator()
            return (0..<10_000).map { _ in
                let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
                return try! DeviceToken(bytes.map { String(format: "%02x", $0) }.joined())
            }
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError("cannot read tokens file \(path)") }
        var tokens: [DeviceToken] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            do {
                tokens.append(try DeviceToken(trimmed))
            } catch {
                throw UsageError("\(path) line \(number + 1): \(error)")
            }
        }
        guard !tokens.isEmpty else { throw UsageError("\(path) has no tokens") }
        return tokens
    }
}

/// Outcome counts across concurrent batches.
private final class OutcomeCounter: Sendable {
    private let counts = Locked<[String: Int]>([:])

    func add(_ results: [APNsSendResult]) {
        var local: [String: Int] = [:]
        for result in results {
            switch result {
            case .response(.accepted): local["accepted", default: 0] += 1
            case .response(.rejected(_, let reason, _)): local["rejected:\(reason.rawValue.isEmpty ? "unspecified" : reason.rawValue)", default: 0] += 1
            case .failed(let failure): local["failed:\(failure.cause.rawValue)", default: 0] += 1
            }
        }
        counts.withLock { counts in counts.merge(local, uniquingKeysWith: +) }
    }

    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
    var snapshot: [String: Int] { counts.withLock { $0 } }
}

/// A progress line, redrawn at most once a second (on a terminal only).
private final class ProgressReporter: Sendable {
    private let last = Locked<ContinuousClock.Instant?>(nil)
    private let line = ProgressLine()

    func report(_ done: Int, of total: Int, since start: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        let due = last.withLock { last in
            if let previous = last, now - previous < .seconds(1) { return false }
            last = now
            return true
        }
        guard due else { return }
        let rate = Double(done) / max((now - start).seconds, 0.001)
        line.show("sent \(done)/\(total) (\(Int(rate))/s)")
    }

    func finish() { line.finish() }
}

/// User plus system CPU time of this process, in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}
