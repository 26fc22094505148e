import PushfanMessages
import PushfanSupport
import Testing

/// The topics a real cluster needs, from the deployment's facts.
@Suite struct TopicPlanTests {
    @Test("every topic with its partitions, replication, retention and min.insync.replicas")
    func defaults() throws {
        let plan = try TopicPlan(names: TopicNames(), inputs: TopicPlan.Inputs())
        #expect(plan.topics.map(\.name) == TopicNames().all)
        #expect(plan.topics.map(\.partitions) == [6, 32, 12, 1, 3, 12], "tasks: 4 lanes x 8 apps")
        #expect(plan.topics.allSatisfy { $0.replication == 3 && $0.config.contains { $0 == ("min.insync.replicas", "2") } })
        let retention = Dictionary(uniqueKeysWithValues: plan.topics.map { topic in (topic.name, topic.config.first { $0.0 == "retention.ms" }?.1) })
        #expect(retention[TopicNames.defaultResults] == "604800000" && retention[TopicNames.defaultDeadletter] == "1209600000")
        #expect(retention[TopicNames.defaultEvents] == "604800000", "events are kept as long as results")
    }

    @Test("the tasks topic: a partition per lane of each busy app, at least one per worker, at most 256")
    func taskPartitions() throws {
        func tasks(lanes: Int, apps: Int, workers: Int) throws -> Int {
            var inputs = TopicPlan.Inputs()
            (inputs.lanes, inputs.concurrentApps, inputs.workers) = (lanes, apps, workers)
            return try TopicPlan(names: TopicNames(), inputs: inputs).topics[1].partitions
        }
        #expect(try tasks(lanes: 4, apps: 2, workers: 3) == 8)
        #expect(try tasks(lanes: 1, apps: 2, workers: 12) == 12)
        #expect(try tasks(lanes: 64, apps: 100, workers: 3) == 256)
    }

    @Test("one replica needs one in sync; out-of-range facts are refused by name")
    func limits() throws {
        var single = TopicPlan.Inputs()
        single.replication = 1
        #expect(try TopicPlan(names: TopicNames(), inputs: single).topics.allSatisfy { $0.config.contains { $0 == ("min.insync.replicas", "1") } })
        var bad = TopicPlan.Inputs()
        bad.resultsRetentionDays = 0
        #expect(throws: ConfigurationError("results retention (days) must be from 1 to 365, got 0")) { try TopicPlan(names: TopicNames(), inputs: bad) }
    }
}
