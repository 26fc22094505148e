import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSupport

/// What `topics plan` and `topics create` share: the deployment facts the plan comes from.
enum TopicPlanOptions {
    static let specs: [OptionSpec] = [
        .option("lanes", "N", "rate lanes per app (default: worker.lanes of the configuration, 4)"),
        .option("apps", "N", "apps sending at the same time, at most (default: 8)"),
        .option("workers", "N", "workers at most; each should own a partition of the tasks topic (default: 8)"),
        .option("replication", "N", "replicas per partition (default: 3)"),
        .option("results-retention-days", "N", "how long results (device outcomes, campaign events) are kept (default: 7)"),
        .option("deadletter-retention-days", "N", "how long dead letters are kept (default: 14)"),
    ]

    static func plan(_ arguments: ParsedArguments, _ context: CommandContext) throws -> TopicPlan {
        var inputs = TopicPlan.Inputs()
        inputs.lanes = try arguments.int("lanes", default: context.configuration.worker.lanes, range: 1...256)
        inputs.concurrentApps = try arguments.int("apps", default: inputs.concurrentApps, range: 1...10_000)
        inputs.workers = try arguments.int("workers", default: inputs.workers, range: 1...1_000)
        inputs.replication = try arguments.int("replication", default: inputs.replication, range: 1...7)
        inputs.resultsRetentionDays = try arguments.int("results-retention-days", default: inputs.resultsRetentionDays, range: 1...365)
        inputs.deadletterRetentionDays = try arguments.int("deadletter-retention-days", default: inputs.deadletterRetentionDays, range: 1...365)
        return try TopicPlan(names: context.configuration.kafka.topics, inputs: inputs)
    }

    /// One JSON object per topic: `{"topic","partitions","replication","config":{…}}`.
    static func json(_ topic: TopicPlan.Topic) -> String {
        JSONValue.orderedObjectJSON([
            ("topic", .string(topic.name)), ("partitions", .int(Int64(topic.partitions))), ("replication", .int(Int64(topic.replication))),
            ("config", .object(Dictionary(uniqueKeysWithValues: topic.config.map { ($0.0, JSONValue.string($0.1)) }))),
        ])
    }
}

/// `pushfan topics plan`: the topics a real cluster needs, printed.
struct TopicsPlanCommand: Command {
    static let spec = CommandSpec(
        name: "topics plan",
        summary: "Print the Kafka topics Pushfan needs, with partitions, replication and settings",
        discussion: """
            From a few facts about the deployment (lanes, apps sending at once, workers,
            replication, retention). A table on standard error for people, one JSON object per
            topic on standard output for tools. `pushfan topics create` applies the same plan.
            """,
        options: TopicPlanOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let plan = try TopicPlanOptions.plan(arguments, context)
        for topic in plan.topics {
            printError("\(topic.name): \(topic.partitions) partition\(topic.partitions == 1 ? "" : "s") x \(topic.replication) replica\(topic.replication == 1 ? "" : "s"); "
                + topic.config.map { "\($0.0)=\($0.1)" }.joined(separator: " ") + "\n    \(topic.purpose)")
            print(TopicPlanOptions.json(topic))
        }
        return 0
    }
}

/// `pushfan topics create`: the plan applied through Kafka's admin API.
struct TopicsCreateCommand: Command {
    static let spec = CommandSpec(
        name: "topics create",
        summary: "Create the planned topics on a Kafka cluster (existing topics are left as they are)",
        discussion: """
            One CreateTopics request with every topic of `pushfan topics plan` (same options),
            answered per topic: created, already exists, or the broker's error. Exit 0 when every
            topic exists afterwards. The development cluster (`pushfan kafka-dev`) does not serve
            CreateTopics: it creates topics when they are first used.
            """,
        options: TopicPlanOptions.specs + [.option("timeout", "SECONDS", "how long to wait for the cluster (default: 30)")] + KafkaOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let plan = try TopicPlanOptions.plan(arguments, context)
        let timeout = Duration.seconds(try arguments.int("timeout", default: 30, range: 1...600))
        let answers: [(String, KafkaAdmin.Creation)]
        do {
            answers = try await KafkaAdmin.createTopics(plan.topics, client: try KafkaOptions.client(arguments, context), logger: context.logger, timeout: timeout)
        } catch {
            printError("pushfan topics create: the cluster created nothing: \(error)")
            printError("(a cluster without a controller that serves CreateTopics, such as `pushfan kafka-dev`, answers this way; it creates topics on first use)")
            return 1
        }
        var failed = false
        for (name, creation) in answers {
            switch creation {
            case .created: print("\(name): created")
            case .alreadyExists: print("\(name): already exists (left as it is)")
            case .failed(let reason):
                failed = true
                print("\(name): not created: \(reason)")
            }
        }
        return failed ? 1 : 0
    }
}
