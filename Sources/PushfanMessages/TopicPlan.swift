import PushfanSupport

/// The topics a real Kafka cluster needs for Pushfan, with partitions and settings, from a
/// few facts about the deployment. Pure: `pushfan topics plan` prints it, `pushfan topics
/// create` applies it through Kafka's admin API.
package struct TopicPlan: Sendable, Equatable {
    package struct Inputs: Sendable, Equatable {
        /// Rate lanes per app (`worker.lanes`): the tasks topic must give every lane of
        /// the busy apps a partition of its own.
        package var lanes = 4
        /// Apps sending at the same time, at most.
        package var concurrentApps = 8
        /// Workers at most: each should own at least one partition of the tasks topic.
        package var workers = 8
        package var replication = 3
        package var resultsRetentionDays = 7
        package var deadletterRetentionDays = 14

        package init() {}
    }

    package struct Topic: Sendable, Equatable {
        package let name: String
        package let partitions: Int
        package let replication: Int
        /// Topic configuration as Kafka names it (`retention.ms`, ...).
        package let config: [(String, String)]
        /// Why these numbers.
        package let purpose: String

        package static func == (lhs: Topic, rhs: Topic) -> Bool {
            lhs.name == rhs.name && lhs.partitions == rhs.partitions && lhs.replication == rhs.replication
                && lhs.config.map { "\($0.0)=\($0.1)" } == rhs.config.map { "\($0.0)=\($0.1)" } && lhs.purpose == rhs.purpose
        }
    }

    package let topics: [Topic]

    /// Most partitions the plan gives the tasks topic.
    package static let maxTaskPartitions = 256

    package init(names: TopicNames, inputs: Inputs) throws(ConfigurationError) {
        func check(_ value: Int, _ name: String, _ range: ClosedRange<Int>) throws(ConfigurationError) {
            guard range.contains(value) else { throw ConfigurationError("\(name) must be from \(range.lowerBound) to \(range.upperBound), got \(value)") }
        }
        try check(inputs.lanes, "lanes", 1...256)
        try check(inputs.concurrentApps, "apps", 1...10_000)
        try check(inputs.workers, "workers", 1...1_000)
        try check(inputs.replication, "replication", 1...7)
        try check(inputs.resultsRetentionDays, "results retention (days)", 1...365)
        try check(inputs.deadletterRetentionDays, "deadletter retention (days)", 1...365)
        let day = 24 * 3_600 * 1_000
        let minInSync = String(max(1, min(2, inputs.replication - 1)))
        func config(retentionDays: Int) -> [(String, String)] {
            [("cleanup.policy", "delete"), ("retention.ms", String(retentionDays * day)), ("min.insync.replicas", minInSync)]
        }
        let tasks = min(Self.maxTaskPartitions, max(inputs.workers, inputs.lanes * inputs.concurrentApps))
        topics = [
            Topic(
                name: names.campaigns, partitions: 6, replication: inputs.replication, config: config(retentionDays: 7) + [("max.message.bytes", "1048576")],
                purpose: "campaigns, keyed by id; planners share its partitions"),
            Topic(
                name: names.tasks, partitions: tasks, replication: inputs.replication, config: config(retentionDays: 7),
                purpose: "one record per shard, keyed <app>#<lane>: \(inputs.lanes) lanes x \(inputs.concurrentApps) apps, at least one per worker (\(inputs.workers))"),
            Topic(
                name: names.results, partitions: 12, replication: inputs.replication, config: config(retentionDays: inputs.resultsRetentionDays),
                purpose: "device outcomes and campaign events, keyed by campaign; dashboards rebuild from it within its retention"),
            Topic(
                name: names.control, partitions: 1, replication: inputs.replication, config: config(retentionDays: 7),
                purpose: "cancel, pause and resume; every worker reads all of it, in order"),
            Topic(
                name: names.deadletter, partitions: 3, replication: inputs.replication, config: config(retentionDays: inputs.deadletterRetentionDays),
                purpose: "records that could not be processed, kept longer for inspection"),
            Topic(
                name: names.events, partitions: 12, replication: inputs.replication, config: config(retentionDays: inputs.resultsRetentionDays),
                purpose: "what devices did with pushes, keyed <app>/<device>; the workers' events role counts each event id once"),
        ]
    }
}
