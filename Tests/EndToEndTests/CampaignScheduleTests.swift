import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

extension RealTimeTests {
    /// `options.send_at` with real workers: a campaign parked in the store starts on time
    /// through worker restarts, a past one sends now, a cancelled parked one ends without a
    /// send, and one too far ahead is refused at submission.
    @Suite(.serialized, .timeLimit(.minutes(10)))
    struct CampaignScheduleTests {
        static func nowMillis() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

        /// `pushfan campaigns status` of campaign `id`, whose app is the id's first part.
        static func status(_ pipeline: Pipeline, _ id: String) async throws -> String {
            try await CommandLineTool.run(TestBinaries.pushfan, ["campaigns", "status", "\(id.split(separator: "-")[0])/\(id)", "--database", pipeline.database]).output
        }

        /// Polls `pushfan campaigns status` until it shows `status`.
        static func waitForStatus(_ pipeline: Pipeline, _ id: String, _ status: String) async throws -> Bool {
            for _ in 0..<150 {
                if try await Self.status(pipeline, id).contains("campaign \(id) (app \(id.split(separator: "-")[0])): \(status)") { return true }
                try await Task.sleep(for: .milliseconds(200))
            }
            return false
        }

        @Test("send_at 35 s ahead, parked in the store, every worker killed and others started meanwhile: the first request goes out within a second of it")
        func parkedCampaignStartsOnTime() async throws {
            let pipeline = try await Pipeline()
            defer { pipeline.stop() }
            try await pipeline.addApp("later", topic: "com.example.later", rate: 20_000, devices: 3_000)
            for id in ["a", "b"] { try pipeline.startWorker(id) }
            // Joined first, so the planner reads the record well before the dispatcher's lead.
            await CampaignControlTests.waitForControlReaders(pipeline, ["a", "b"])
            // Far enough ahead that the group has dropped the killed members (session timeout
            // 6 s) and settled before the dispatcher's lead: then the bound is the schedule's own.
            let sendAt = Self.nowMillis() + 35_000
            try await pipeline.submit(Pipeline.campaign("later-1", app: "later", options: #"{"send_at":\#(sendAt)}"#))
            let parked = try await Self.waitForStatus(pipeline, "later-1", "scheduled")
            let shown = try await Self.status(pipeline, "later-1")
            #expect(parked, "\(shown)")
            // Everyone goes away; the campaign exists only as its row.
            for id in ["a", "b"] { pipeline.workers[id]?.signal(SIGKILL) }
            for id in ["a", "b"] { _ = await pipeline.workers[id]?.waitForExit() }
            let early = pipeline.delivered(topic: "com.example.later").count
            #expect(early == 0, "\(early) requests before send_at")
            try await Task.sleep(for: .seconds(2))
            for id in ["c", "d"] { try pipeline.startWorker(id) }

            let results = try await pipeline.results(of: "later-1")
            #expect(results.completed?.count(of: .delivered) == 3_000)
            let times = pipeline.delivered(topic: "com.example.later").compactMap { ($0["time_ms"] as? NSNumber)?.int64Value }.sorted()
            let first = try #require(times.first)
            #expect(first >= sendAt, "the first request came \(sendAt - first) ms early")
            #expect(first <= sendAt + 1_000, "the first request came \(first - sendAt) ms late")
            let logs = ["c", "d"].map { pipeline.workers[$0]?.standardError ?? "" }.joined()
            let (dispatched, started) = (logs.contains("event=planner.dispatched"), logs.contains("event=task.scheduled_start"))
            #expect(dispatched, "no worker dispatched it")
            #expect(started, "no task logged its scheduled start")
        }

        @Test("a send_at already past sends now; a parked campaign cancelled before its time ends cancelled without a send; 40 days ahead is refused")
        func pastCancelledAndTooFar() async throws {
            let pipeline = try await Pipeline()
            defer { pipeline.stop() }
            try await pipeline.addApp("soon", topic: "com.example.soon", rate: 20_000, devices: 500)
            try pipeline.startWorker("a")

            try await pipeline.submit(Pipeline.campaign("soon-past", app: "soon", options: #"{"send_at":\#(Self.nowMillis() - 60_000)}"#))
            let past = try await pipeline.results(of: "soon-past")
            #expect(past.completed?.count(of: .delivered) == 500)

            try await pipeline.submit(Pipeline.campaign("soon-later", app: "soon", options: #"{"send_at":\#(Self.nowMillis() + 3_600_000)}"#))
            #expect(try await Self.waitForStatus(pipeline, "soon-later", "scheduled"))
            let cancel = try await pipeline.run(["campaigns", "cancel", "soon/soon-later", "--database", pipeline.database] + pipeline.kafkaArguments)
            #expect(cancel.output.contains("scheduled → cancelled"), "\(cancel.output)")
            let cancelled = try await CampaignControlTests.outcomes(pipeline, of: "soon-later", audience: 500)
            #expect(cancelled.events.last?.event == .cancelled)
            #expect(cancelled.events.last?.count(of: .cancelled) == 500)
            #expect(pipeline.delivered(topic: "com.example.soon").count == 500, "only the first campaign was sent")

            let file = pipeline.directory + "/far.json"
            try Pipeline.campaign("soon-far", app: "soon", options: #"{"send_at":\#(Self.nowMillis() + 40 * 86_400_000)}"#).write(toFile: file, atomically: true, encoding: .utf8)
            let refused = try await CommandLineTool.run(TestBinaries.pushfan, ["submit", file] + pipeline.kafkaArguments)
            #expect(refused.status == 1)
            #expect(refused.error.contains("options.send_at") && refused.error.contains("more than 30 days ahead"), "\(refused.error)")
        }
    }
}
