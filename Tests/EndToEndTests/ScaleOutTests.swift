import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

extension RealTimeTests {
    /// Workers joining and leaving the group mid-campaign (issue 34, item 4): in the
    /// real-time namespace, since the gaps it reports are timings a busy machine stretches.
    @Suite(.serialized, .timeLimit(.minutes(5)))
    struct ScaleOutTests {
        /// librdkafka's mock cluster holds every join round open for the session timeout less
        /// a second, however quickly the members rejoin (a broker closes the round once every
        /// member is back); a 2.5 s session keeps the mock's rounds near a broker's.
        static let quickRounds = ["--property", "session.timeout.ms=2500"]

        @Test("a worker added and one stopped mid-campaign at APNs latency: every device gets one result, the others keep sending")
        func workerAddedAndRemovedMidCampaign() async throws {
            let pipeline = try await Pipeline(simArguments: ["--latency", "apns"])
            defer { pipeline.stop() }
            let count = 60_000
            let topic = "com.example.scale"
            try await pipeline.addApp("scale", topic: topic, rate: 3_000, devices: count)
            for id in ["a", "b"] { try pipeline.startWorker(id, extra: Self.quickRounds) }
            try await pipeline.waitForSenderGroup(["a", "b"])
            try await pipeline.submit(Pipeline.campaign("grow", app: "scale"))

            #expect(await Pipeline.eventually(timeout: .seconds(60)) { pipeline.delivered(topic: topic).count >= count / 5 })
            let addedAt = Self.epochMillis()
            try pipeline.startWorker("c", extra: Self.quickRounds)
            try await pipeline.waitForSenderGroup(["a", "b", "c"])
            #expect(await Pipeline.eventually(timeout: .seconds(60)) { pipeline.delivered(topic: topic).count >= count / 2 })
            let removedAt = Self.epochMillis()
            pipeline.workers["a"]?.signal(SIGTERM)
            let status = await pipeline.workers["a"]?.waitForExit()
            #expect(status == 0, "worker a: \(Self.crash(in: pipeline.workers["a"]?.standardError ?? ""))")

            let results = try await pipeline.results(of: "grow")
            let completed = try #require(results.completed)
            #expect(completed.finished == count)
            #expect(completed.count(of: .delivered) == count)
            #expect(Set(results.devices.keys) == Set((0..<count).map { "scale-\($0)" }))
            // Lanes move between workers only after their tasks are handed back: nothing is
            // sent twice, nothing skipped.
            let sent = pipeline.delivered(topic: topic)
            let tokens = sent.compactMap { $0["token"] as? String }
            #expect(tokens.count == count, "the simulator accepted \(tokens.count) notifications for \(count) devices")
            #expect(Set(tokens).count == count)

            let times = sent.compactMap { ($0["time_ms"] as? NSNumber)?.int64Value }.sorted()
            let gaps = Self.longestGaps(times, around: ["added": addedAt, "removed": removedAt], within: 10_000)
            print("scale-out: longest gap between sends \(gaps["all"] ?? -1) ms; within 10 s after a worker was added \(gaps["added"] ?? -1) ms, after one was stopped \(gaps["removed"] ?? -1) ms")
            print("scale-out timeline:\n\(pipeline.groupTimeline(["a", "b", "c"]))")
        }

        /// The longest pause between consecutive sends (simulator times, ms): over the whole
        /// campaign as "all", and for each named moment among the pauses that end after it
        /// and begin within `within` ms of it.
        static func longestGaps(_ sorted: [Int64], around moments: [String: Int64], within: Int64) -> [String: Int64] {
            let pauses = zip(sorted, sorted.dropFirst())
            var gaps = ["all": pauses.map { $1 - $0 }.max() ?? 0]
            for (name, at) in moments {
                gaps[name] = pauses.filter { $1 >= at && $0 <= at + within }.map { $1 - $0 }.max() ?? 0
            }
            return gaps
        }

        /// What a crashed process said first (the runtime's message and the crashing
        /// thread), or the end of its log.
        static func crash(in log: String) -> String {
            guard let start = log.range(of: "Fatal error") ?? log.range(of: "Program crashed") else { return String(log.suffix(1500)) }
            return String(log[start.lowerBound...].prefix(3000))
        }

        static func epochMillis() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
    }
}
