import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

extension RealTimeTests {
    /// Cancel, pause and resume as an operator gives them (`pushfan campaigns ...`) to real
    /// workers, measured at the simulator: no request starts more than a second after the
    /// control record, and every device ends with exactly one final outcome.
    @Suite(.serialized, .timeLimit(.minutes(10)))
    struct CampaignControlTests {
        /// Waits until every worker's control consumer has its partitions, so the record is
        /// read as it comes (before that the store still tells them, page by page).
        static func waitForControlReaders(_ pipeline: Pipeline, _ ids: [String]) async {
            for id in ids {
                _ = await pipeline.workers[id]?.waitForError(timeout: .seconds(30)) { log in
                    log.split(separator: "\n").contains { $0.contains("-control-") && $0.contains("event=kafka.assigned") }
                }
            }
        }

        /// The control records on the topic, oldest first.
        static func controlRecords(_ pipeline: Pipeline, count: Int) async throws -> [ControlRecord] {
            try await pipeline.readTopic(TopicNames.defaultControl, timeout: .seconds(30), into: [ControlRecord]()) { records, record in
                if let control = try? MessageCodec.decode(ControlRecord.self, from: Data(record.value)) { records.append(control) }
                return records.count >= count
            }
        }

        /// Every device result of a campaign (all records, duplicates included) until its last
        /// event (`completed` or `cancelled`) and a result for each of `audience` devices.
        static func outcomes(_ pipeline: Pipeline, of campaign: String, audience: Int) async throws -> (byDevice: [String: Set<DeviceOutcome>], events: [CampaignEvent]) {
            try await pipeline.readTopic(TopicNames.defaultResults, timeout: .seconds(180), into: ([String: Set<DeviceOutcome>](), [CampaignEvent]())) { state, record in
                guard let decoded = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)), decoded.campaignKey.id == campaign else { return false }
                switch decoded {
                case .device(let device): state.0[device.device, default: []].insert(device.outcome)
                case .campaign(let event): state.1.append(event)
                }
                return state.1.contains { $0.event == .completed || $0.event == .cancelled } && state.0.count >= audience
            }
        }

        static func times(_ pipeline: Pipeline, topic: String) -> [Int64] {
            pipeline.delivered(topic: topic).compactMap { ($0["time_ms"] as? NSNumber)?.int64Value }.sorted()
        }

        @Test("cancel at about 30% of 50,000 devices over three workers: no request starts a second after the record; every device ends exactly once")
        func cancelMidCampaign() async throws {
            let pipeline = try await Pipeline()
            defer { pipeline.stop() }
            let count = 50_000
            try await pipeline.addApp("shop", topic: "com.example.shop", rate: 5_000, devices: count)
            let ids = ["a", "b", "c"]
            for id in ids { try pipeline.startWorker(id) }
            await Self.waitForControlReaders(pipeline, ids)
            try await pipeline.submit(Pipeline.campaign("stopme", app: "shop"))
            let reached = await Pipeline.eventually(timeout: .seconds(90)) { pipeline.delivered(topic: "com.example.shop").count >= count * 3 / 10 }
            #expect(reached, "the campaign never reached 30%")

            let answer = try await pipeline.run(["campaigns", "cancel", "shop/stopme", "--database", pipeline.database] + pipeline.kafkaArguments)
            #expect(answer.output.contains("campaign shop/stopme: running → cancelled"), "\(answer.output)")
            let record = try #require(try await Self.controlRecords(pipeline, count: 1).first)
            #expect(record.campaign == "stopme" && record.action == .cancel)

            let results = try await Self.outcomes(pipeline, of: "stopme", audience: count)
            let last = try #require(results.events.last, "no events")
            #expect(last.event == .cancelled, "\(results.events.map(\.event))")
            // Exactly one final outcome per device, and each device's records agree.
            #expect(results.byDevice.count == count)
            #expect(results.byDevice.values.allSatisfy { $0.count == 1 }, "a device with two different outcomes")
            let tokens = pipeline.delivered(topic: "com.example.shop").compactMap { $0["token"] as? String }
            let answered = Set(tokens).count
            #expect(tokens.count == answered, "\(tokens.count - answered) devices were sent twice")
            #expect(last.count(of: .cancelled) == count - answered, "cancelled \(last.count(of: .cancelled)), answered \(answered)")
            #expect(last.count(of: .delivered) == answered)
            #expect(last.finished == count && last.audience == count)
            #expect(answered < count * 9 / 10, "the cancel came too late to stop anything: \(answered) sent")

            // The bound, from the simulator's own clock: nothing started a second after the record.
            let latest = try #require(Self.times(pipeline, topic: "com.example.shop").last)
            #expect(latest <= record.at + 1_000, "a request was answered \(latest - record.at) ms after the control record")
            // And each worker measured it.
            let measured = pipeline.logged("control.obeyed", workers: ids).compactMap { $0["record_to_last_request_ms"].flatMap { Int($0) } }
            let read = pipeline.logged("control.received", workers: ids).compactMap { $0["record_to_read_ms"] }
            print("cancel: record read after \(read) ms, last batch started after \(measured) ms, last request at the simulator after \(latest - record.at) ms")
            #expect(!measured.isEmpty, "no worker logged control.obeyed")
            #expect(measured.allSatisfy { $0 <= 1_000 }, "\(measured)")
        }

        @Test("pause for 5 s, then resume: no request during the pause, nothing lost, nothing twice; and the same with every worker killed while paused")
        func pauseAndResume() async throws {
            for killWorkers in [false, true] {
                let pipeline = try await Pipeline()
                defer { pipeline.stop() }
                let count = 12_000
                try await pipeline.addApp("news", topic: "com.example.news", rate: 2_000, devices: count)
                let ids = ["a", "b"]
                for id in ids { try pipeline.startWorker(id) }
                await Self.waitForControlReaders(pipeline, ids)
                try await pipeline.submit(Pipeline.campaign("hold", app: "news"))
                let reached = await Pipeline.eventually(timeout: .seconds(60)) { pipeline.delivered(topic: "com.example.news").count >= count / 4 }
                #expect(reached, "the campaign never reached 25%")

                let paused = try await pipeline.run(["campaigns", "pause", "news/hold", "--database", pipeline.database] + pipeline.kafkaArguments)
                #expect(paused.output.contains("running → paused"), "\(paused.output)")
                let again = try await pipeline.run(["campaigns", "pause", "news/hold", "--database", pipeline.database] + pipeline.kafkaArguments)
                #expect(again.output.contains("already paused; nothing changed"), "\(again.output)")
                if killWorkers {
                    try await Task.sleep(for: .seconds(2))
                    for id in ids { pipeline.workers[id]?.signal(SIGKILL) }
                    for id in ids { _ = await pipeline.workers[id]?.waitForExit() }
                    for id in ids { try pipeline.startWorker(id + "2") }
                    await Self.waitForControlReaders(pipeline, ids.map { $0 + "2" })
                }
                try await Task.sleep(for: .seconds(killWorkers ? 3 : 5))
                let status = try await pipeline.run(["campaigns", "status", "news/hold", "--database", pipeline.database])
                #expect(status.output.contains("campaign hold (app news): paused"), "\(status.output)")
                let sentWhilePaused = pipeline.delivered(topic: "com.example.news").count
                #expect(sentWhilePaused < count, "the pause came after the end")
                try await pipeline.run(["campaigns", "resume", "news/hold", "--database", pipeline.database] + pipeline.kafkaArguments)

                let records = try await Self.controlRecords(pipeline, count: 2)
                #expect(records.map(\.action) == [.pause, .resume])
                let results = try await Self.outcomes(pipeline, of: "hold", audience: count)
                #expect(results.events.last?.event == .completed, "\(results.events.map(\.event))")
                #expect(results.events.contains { $0.event == .paused } && results.events.contains { $0.event == .resumed })
                #expect(results.events.last?.count(of: .delivered) == count)
                let tokens = pipeline.delivered(topic: "com.example.news").compactMap { $0["token"] as? String }
                #expect(tokens.count == count && Set(tokens).count == count, "\(tokens.count) sends for \(Set(tokens).count) devices")
                // Nothing was answered from a second after the pause until the resume.
                let pauseAt = records[0].at, resumeAt = records[1].at
                let during = Self.times(pipeline, topic: "com.example.news").filter { $0 > pauseAt + 1_000 && $0 < resumeAt }
                #expect(during.isEmpty, "\(during.count) requests during the pause (killed workers: \(killWorkers))")
            }
        }

        @Test("cancel before any send, while paused, twice; an unknown or completed campaign gets a clear answer and nothing changes")
        func commandsOnEveryState() async throws {
            let pipeline = try await Pipeline()
            defer { pipeline.stop() }
            try await pipeline.addApp("shop", topic: "com.example.shop", rate: 200, devices: 2_000)
            try await pipeline.addApp("tiny", topic: "com.example.tiny", rate: 10_000, devices: 20)
            let store = ["--database", pipeline.database]
            func campaigns(_ words: [String]) async throws -> CommandLineTool.Result {
                let kafka = ["list", "status"].contains(words[0]) ? [] : pipeline.kafkaArguments
                return try await CommandLineTool.run(TestBinaries.pushfan, ["campaigns"] + words + store + kafka)
            }

            let unknown = try await campaigns(["cancel", "shop/ghost"])
            #expect(unknown.status == 1 && unknown.error.contains("no campaign shop/ghost in the store"), "\(unknown.error)")

            // Planned by a planner-only worker, cancelled before any sender ran: nothing is sent.
            try pipeline.startWorker("planner", extra: ["--no-sender"])
            try await pipeline.submit(Pipeline.campaign("early", app: "shop"))
            var planned = false
            for _ in 0..<100 where !planned {
                planned = try await campaigns(["status", "shop/early"]).output.contains("campaign early (app shop): running")
                if !planned { try await Task.sleep(for: .milliseconds(300)) }
            }
            #expect(planned, "the planner never planned it")
            #expect(try await campaigns(["cancel", "shop/early"]).output.contains("running → cancelled"))
            let twice = try await campaigns(["cancel", "shop/early"])
            #expect(twice.status == 0 && twice.output.contains("campaign shop/early is already cancelled; nothing changed"), "\(twice.output)")
            let resume = try await campaigns(["resume", "shop/early"])
            #expect(resume.status == 1 && resume.error.contains("campaign early was cancelled; it cannot be resumed; nothing changed"), "\(resume.error)")
            try pipeline.startWorker("sender", extra: ["--no-planner"])
            let early = try await Self.outcomes(pipeline, of: "early", audience: 2_000)
            #expect(early.events.last?.event == .cancelled)
            #expect(early.events.last?.count(of: .cancelled) == 2_000)
            #expect(pipeline.delivered(topic: "com.example.shop").isEmpty)

            // Paused, then cancelled while paused. At 200/s over 4 lanes a page of 500 takes a
            // lane 10 s: the pause must stop it between batches, not at the next page.
            try await pipeline.submit(Pipeline.campaign("slow", app: "shop"))
            let started = await Pipeline.eventually(timeout: .seconds(30)) { pipeline.delivered(topic: "com.example.shop").count >= 100 }
            #expect(started)
            #expect(try await campaigns(["pause", "shop/slow"]).output.contains("running → paused"))
            try await Task.sleep(for: .seconds(2))
            #expect(try await campaigns(["cancel", "shop/slow"]).output.contains("paused → cancelled"))
            let slow = try await Self.outcomes(pipeline, of: "slow", audience: 2_000)
            let answered = Set(pipeline.delivered(topic: "com.example.shop").compactMap { $0["token"] as? String }).count
            #expect(slow.events.last?.event == .cancelled)
            #expect(slow.events.last?.count(of: .cancelled) == 2_000 - answered)
            #expect(answered < 1_000, "\(answered) sent: the pause did not hold")
            // Each campaign's records in its order (a campaign's records share a partition; two
            // campaigns' do not, so their order between them is not the topic's to keep).
            let records = try await Self.controlRecords(pipeline, count: 3)
            #expect(records.filter { $0.campaign == "early" }.map(\.action) == [.cancel])
            let slowRecords = records.filter { $0.campaign == "slow" }
            #expect(slowRecords.map(\.action) == [.pause, .cancel])
            let pause = try #require(slowRecords.first)
            let latest = try #require(Self.times(pipeline, topic: "com.example.shop").last)
            #expect(latest <= pause.at + 1_000, "a request was answered \(latest - pause.at) ms after the pause")

            // Completed: the command is refused and the campaign stays completed.
            try await pipeline.submit(Pipeline.campaign("done", app: "tiny"))
            let done = try await Self.outcomes(pipeline, of: "done", audience: 20)
            #expect(done.events.last?.event == .completed)
            let late = try await campaigns(["cancel", "tiny/done"])
            #expect(late.status == 1 && late.error.contains("campaign done has completed; there is nothing left to cancel"), "\(late.error)")
            let list = try await campaigns(["list"])
            for (id, status) in [("early", "cancelled"), ("slow", "cancelled"), ("done", "completed")] {
                #expect(list.output.split(separator: "\n").contains { $0.hasPrefix(id + " ") && $0.contains(" \(status) ") }, "\(list.output)")
            }
        }
    }
}
