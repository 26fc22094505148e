import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// The dev cluster, `pushfan submit` and the documented example, checked with kcat as an
/// independent Kafka client.
@Suite(.timeLimit(.minutes(3)), .serialized)
struct KafkaInteropTests {
    let example = TestBinaries.packageRoot.appendingPathComponent("examples/campaign.json").path

    func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32?, out: String, err: String) {
        let process = try ManagedProcess(executable, arguments)
        process.closeInput()
        let status = await process.waitForExit(timeout: .seconds(60))
        return (status, process.standardOutput, process.standardError)
    }

    /// Reads the campaigns topic with Pushfan's consumer until `count` records arrived.
    func campaigns(_ cluster: DevClusterProcess, count: Int) async throws -> [KafkaRecord] {
        var configuration = KafkaConsumerConfiguration(
            client: KafkaClientConfiguration(bootstrapServers: cluster.bootstrapServers, properties: DevClusterProcess.fastGroupProperties),
            groupID: "interop-\(UUID().uuidString)")
        configuration.offsetReset = .earliest
        let consumer = try KafkaConsumer(configuration: configuration, logger: Logger(label: "test", threshold: .error))
        try consumer.subscribe(topics: [TopicNames().campaigns])
        let deadline = Task {
            try? await Task.sleep(for: .seconds(30))
            await consumer.close()
        }
        var received: [KafkaRecord] = []
        for await event in consumer.events {
            if case .records(let records) = event { received += records }
            if received.count >= count { break }
        }
        deadline.cancel()
        await consumer.close()
        return received
    }

    @Test(.enabled(if: TestBinaries.available("kcat")))
    func kcatSeesTheTopicsAndItsExampleCampaignDecodes() async throws {
        let cluster = try await DevClusterProcess(partitions: 3)
        let listing = try await run("kcat", ["-L", "-b", cluster.bootstrapServers])
        #expect(listing.status == 0)
        for topic in TopicNames().all {
            #expect(listing.out.contains("topic \"\(topic)\" with 3 partitions"), "kcat -L did not list \(topic): \(listing.out)")
        }

        // The exact command from docs/messages.md.
        let produced = try await run("kcat", ["-P", "-b", cluster.bootstrapServers, "-t", "pushfan.campaigns", "-k", "spring-sale-2026", "-l", example])
        #expect(produced.status == 0, "kcat -P failed: \(produced.err)")

        let records = try await campaigns(cluster, count: 1)
        let record = try #require(records.first)
        #expect(record.keyString == "spring-sale-2026")
        let campaign = try MessageCodec.decode(Campaign.self, from: record.value)
        #expect(campaign.id == "spring-sale-2026")
        // Valid whenever it is run: no expiration that could have passed.
        try campaign.checkSubmittable(now: Date())
        #expect(campaign.notification.content?.text(forLocale: "de_CH")?.title != campaign.notification.content?.text(forLocale: nil)?.title)
    }

    @Test(.enabled(if: TestBinaries.available("kcat")))
    func submitValidatesThenProducesAndKcatReadsIt() async throws {
        let cluster = try await DevClusterProcess(partitions: 3)
        let directory = FileManager.default.temporaryDirectory
        let notJSON = directory.appendingPathComponent("not-json-\(UUID().uuidString).json")
        try Data("campaign: yes please".utf8).write(to: notJSON)
        let wrongSchema = directory.appendingPathComponent("wrong-\(UUID().uuidString).json")
        try Data(#"{"v":1,"id":"x","app":"shop","audience":{"segment":"tag:a","named":"vip"},"notification":{"content":{"default":{"body":"hi"}}}}"#.utf8).write(to: wrongSchema)

        let refused = try await run(TestBinaries.pushfan, ["submit", notJSON.path, "--brokers", cluster.bootstrapServers])
        #expect(refused.status == 1)
        #expect(refused.err.contains("is not a valid campaign"), "stderr: \(refused.err)")
        let refusedSchema = try await run(TestBinaries.pushfan, ["submit", wrongSchema.path, "--brokers", cluster.bootstrapServers])
        #expect(refusedSchema.status == 1)
        #expect(refusedSchema.err.contains("audience"), "the error should name the field: \(refusedSchema.err)")

        let accepted = try await run(TestBinaries.pushfan, ["submit", example, "--brokers", cluster.bootstrapServers])
        #expect(accepted.status == 0, "stderr: \(accepted.err)")
        #expect(accepted.out.contains("campaign spring-sale-2026 submitted to pushfan.campaigns["))

        // Only the valid campaign reached the topic: kcat reads exactly one record.
        let read = try await run("kcat", ["-C", "-b", cluster.bootstrapServers, "-t", "pushfan.campaigns", "-o", "beginning", "-e", "-q", "-f", "%k\t%s\n"])
        #expect(read.status == 0)
        let lines = read.out.split(separator: "\n")
        #expect(lines.count == 1, "expected one record, kcat read: \(read.out)")
        let parts = try #require(lines.first?.split(separator: "\t", maxSplits: 1))
        #expect(parts.first == "shop-ios/spring-sale-2026")
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(parts[1].utf8))
        #expect(campaign.id == "spring-sale-2026")
    }

    @Test func unknownCommandsAndOptionsAreUsageErrors() async throws {
        let unknown = try await run(TestBinaries.pushfan, ["launch"])
        #expect(unknown.status == 2)
        #expect(unknown.err.contains("unknown command 'launch'"))
        let badOption = try await run(TestBinaries.pushfan, ["kafka-dev", "--brokerz", "3"])
        #expect(badOption.status == 2)
        #expect(badOption.err.contains("unknown option --brokerz"))
        let help = try await run(TestBinaries.pushfan, ["kafka-dev", "--help"])
        #expect(help.status == 0)
        #expect(help.out.contains("broker down <id>"))
    }

    @Test("topics plan prints each topic as JSON; topics create against the dev cluster (no CreateTopics) fails saying so")
    func topicsPlanAndCreate() async throws {
        let plan = try await run(TestBinaries.pushfan, ["topics", "plan", "--lanes", "2", "--apps", "3", "--workers", "4", "--replication", "1"])
        #expect(plan.status == 0, "\(plan.err)")
        let topics = try plan.out.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(topics.compactMap { $0["topic"] as? String } == TopicNames().all)
        #expect(topics.compactMap { $0["partitions"] as? Int } == [6, 6, 12, 1, 3, 12], "tasks: max(2 lanes x 3 apps, 4 workers)")
        #expect(plan.err.contains("pushfan.tasks: 6 partitions x 1 replica;"), "\(plan.err)")
        let refused = try await run(TestBinaries.pushfan, ["topics", "plan", "--replication", "0"])
        #expect(refused.status == 2 && refused.err.contains("--replication"), "\(refused.err)")

        let cluster = try await DevClusterProcess(partitions: 2)
        defer { cluster.process.signal(SIGTERM) }
        let created = try await run(TestBinaries.pushfan, [
            "topics", "create", "--brokers", cluster.bootstrapServers, "--replication", "1", "--timeout", "3", "--log-level", "error",
        ])
        #expect(created.status == 1, "\(created.out) \(created.err)")
        #expect(created.err.contains("the cluster created nothing") && created.err.contains("kafka-dev"), "\(created.err)")
    }

    @Test func kafkaDevStopsCleanlyOnSigterm() async throws {
        let bootstrapFile = FileManager.default.temporaryDirectory.appendingPathComponent("bootstrap-\(UUID().uuidString)").path
        let process = try ManagedProcess(TestBinaries.pushfan, ["kafka-dev", "--brokers", "1", "--bootstrap-file", bootstrapFile])
        let written = await process.waitForOutput { $0.contains("\n") }
        #expect(written != nil)
        #expect(try String(contentsOfFile: bootstrapFile, encoding: .utf8).hasPrefix("127.0.0.1:"))
        process.signal(SIGTERM)
        #expect(await process.waitForExit(timeout: .seconds(10)) == 0)
        #expect(!FileManager.default.fileExists(atPath: bootstrapFile))
    }
}
