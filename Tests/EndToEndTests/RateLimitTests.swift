import Foundation
import PushfanMessages
import PushfanTestSupport
import Testing

extension RealTimeTests {
    /// Per-second send counts across workers: in the real-time namespace, so that it runs
    /// alone and a machine busy with other suites does not bunch the simulator's counts.
    @Suite(.serialized, .timeLimit(.minutes(5)))
    struct RateLimitTests {
        @Test("two apps at 500/s and 2,000/s over three workers: each stays within its limit and near it")
        func perAppRateLimitsHoldAcrossWorkers() async throws {
            let pipeline = try await Pipeline()
            defer { pipeline.stop() }
            try await pipeline.addApp("slow", topic: "com.example.slow", rate: 500, devices: 5_000)
            try await pipeline.addApp("fast", topic: "com.example.fast", rate: 2_000, devices: 20_000)
            for id in ["a", "b", "c"] { try pipeline.startWorker(id) }
            // The limits are per app across the group; what is measured is the group sending,
            // not it forming (three workers joining at once can take several rounds).
            try await pipeline.waitForSenderGroup(["a", "b", "c"])
            try await pipeline.submit(Pipeline.campaign("slow-1", app: "slow"))
            try await pipeline.submit(Pipeline.campaign("fast-1", app: "fast"))
            let slow = try await pipeline.results(of: "slow-1")
            let fast = try await pipeline.results(of: "fast-1")
            #expect(slow.completed?.count(of: .delivered) == 5_000)
            #expect(fast.completed?.count(of: .delivered) == 20_000)

            for (topic, limit) in [("com.example.slow", 500), ("com.example.fast", 2_000)] {
                let times = pipeline.delivered(topic: topic).compactMap { ($0["time_ms"] as? NSNumber)?.int64Value }.sorted()
                let perSecond = WorkerPipelineTests.perSecond(times)
                // Warm-up: the first two seconds (group joins, connections); the last second is partial.
                let steady = Array(perSecond.dropFirst(2).dropLast())
                #expect(!steady.isEmpty, "\(topic): too short to measure: \(perSecond)")
                #expect(WorkerPipelineTests.keepsRate(steady, limit: limit), "\(topic) per second: \(perSecond)")
                let median = steady.sorted()[steady.count / 2]
                #expect(Double(median) >= Double(limit) * 0.8, "\(topic) per second: \(perSecond)")
            }
        }
    }
}
