import Foundation
import PushfanKafka
import PushfanMessages

/// `pushfan kafka-dev`: a long-lived development Kafka cluster for tests and demos.
struct KafkaDevCommand: Command {
    static let spec = CommandSpec(
        name: "kafka-dev",
        summary: "Run a development Kafka cluster (librdkafka's mock cluster) on loopback",
        discussion: """
            Prints the bootstrap servers as the first line of standard output and keeps running
            until SIGINT or SIGTERM. Creates Pushfan's topics (names from the configuration)
            with --partitions partitions; other topics are created on first use.
            Nothing is stored on disk, and each partition keeps only about 5 MB.

            Fault injection: write one command per line to standard input; each gets "ok" or
            "error: ..." on standard output.
              broker down <id> | broker up <id>         take a broker (1..N) off the network and back
              rtt <broker> <ms>                         delay a broker's responses
              errors <Api> <count> <ERROR_NAME>         fail the next <count> requests of an API,
                                                        e.g. errors Produce 5 NOT_LEADER_FOR_PARTITION
              clear-errors <Api>
              leader <topic> <partition> <broker>       move a partition's leadership
              topic <name> <partitions>                 create a topic
            APIs: \(KafkaAPIKey.allCases.map(\.name).joined(separator: ", ")).
            """,
        options: [
            .option("brokers", "N", "number of brokers (default 3)"),
            .option("partitions", "P", "partitions per Pushfan topic (default 12)"),
            .option("bootstrap-file", "FILE", "also write the bootstrap servers to FILE (atomically)"),
        ])

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let brokers = try arguments.int("brokers", default: 3, range: 1...32)
        let partitions = try arguments.int("partitions", default: 12, range: 1...10_000)
        let logger = context.logger.child("kafka-dev")
        let cluster = try KafkaDevCluster(brokers: brokers, logger: logger)
        for topic in context.configuration.kafka.topics.all {
            try cluster.createTopic(topic, partitions: partitions, replicationFactor: min(3, brokers))
        }
        let shutdown = ShutdownSignal.prepare()
        // The file before the line: whoever reads the line may look for the file at once.
        if let file = arguments.value("bootstrap-file") {
            try writeAtomically(cluster.bootstrapServers + "\n", to: file)
        }
        print(cluster.bootstrapServers)
        fflush(nil)
        logger.notice("kafka_dev.ready", ["kafka.brokers": cluster.bootstrapServers, "kafka.partitions": String(partitions)])
        startControlChannel(cluster)
        let signal = await shutdown()
        logger.notice("kafka_dev.stopping", ["signal": String(signal)])
        cluster.close()
        if let file = arguments.value("bootstrap-file") { try? FileManager.default.removeItem(atPath: file) }
        return 0
    }

    /// Reads control commands from standard input on a thread of its own; end of input
    /// only ends the control channel, not the cluster.
    private static func startControlChannel(_ cluster: KafkaDevCluster) {
        let thread = Thread {
            while let line = readLine() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
                let reply: String
                do {
                    try cluster.apply(try DevClusterCommand.parse(trimmed))
                    reply = "ok"
                } catch {
                    reply = "error: \(error)"
                }
                print(reply)
                fflush(nil)
            }
        }
        thread.name = "pushfan.kafka-dev.control"
        thread.start()
    }
}
