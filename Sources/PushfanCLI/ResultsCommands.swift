import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSupport
import Synchronization

/// Follows one campaign's lifecycle events on the results topic: a progress bar on a
/// terminal (periodic lines otherwise), then the summary table.
struct CampaignWatch {
    let campaign: CampaignKey
    /// Where the submitted record landed: events before the planner's answer to this
    /// record (which names it) belong to an earlier submission of the id and are passed over.
    let submission: CampaignEvent.Submission
    let client: KafkaClientConfiguration
    let topics: TopicNames
    let logger: Logger

    /// Reads the results topic from the start (a private consumer group, so nothing is
    /// skipped however early the campaign's events were written) until this submission's
    /// campaign completes, fails or ends cancelled, or `timeout` passes. Returns the last event of this
    /// submission seen (nil when the planner never answered it).
    func wait(timeout: Duration, output: @escaping @Sendable (String) -> Void = { print($0) }) async throws -> CampaignEvent? {
        var configuration = KafkaConsumerConfiguration(client: client, groupID: "pushfan-watch-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        configuration.offsetReset = .earliest
        let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        try consumer.subscribe(topics: [topics.results])
        let deadline = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { await consumer.close() }
        }
        defer { deadline.cancel() }
        let bar = ProgressLine()
        var last: CampaignEvent?
        var lastLine = ContinuousClock.now - .seconds(10)
        let key = Array(campaign.stored.utf8)
        // Our record was produced before the watch began; a little earlier still, for clocks.
        var gate = SubmissionGate(submission: submission, since: Int64(Date().timeIntervalSince1970 * 1000) - 5_000)
        loop: for await event in consumer.events {
            guard case .records(let records) = event else { continue }
            for record in records {
                gate.saw(partition: record.partition, offset: record.offset, timestamp: record.timestamp)
                guard record.key.map(Array.init) == key,
                      case .campaign(let update) = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)),
                      gate.admits(update, partition: record.partition)
                else { continue }
                last = update
                switch update.event {
                case .paused, .resumed:
                    let text = update.event == .paused
                        ? "paused: \(update.error ?? "no reason given"); devices are waiting" : "resumed: sending goes on"
                    if bar.enabled { bar.show(text) } else { output(text) }
                    lastLine = .now
                case .accepted, .progress:
                    let text = Self.progressText(update)
                    if bar.enabled {
                        bar.show(text)
                    } else if ContinuousClock.now - lastLine >= .seconds(2) {
                        output(text)
                        lastLine = .now
                    }
                case .completed, .failed, .cancelled:
                    break loop
                }
            }
        }
        bar.finish()
        await consumer.close()
        return last
    }

    /// `[#########-----------]  45%  4,500/10,000  delivered 4,410 · invalid_token 90`
    static func progressText(_ event: CampaignEvent) -> String {
        let audience = max(event.audience ?? 0, event.finished)
        let fraction = audience == 0 ? 0 : Double(event.finished) / Double(audience)
        let width = 30
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let counts = event.counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: " · ")
        return "[\(bar)] \(String(format: "%3.0f%%", fraction * 100))  \(event.finished)/\(audience)  \(counts)"
    }

    /// The summary table of a finished campaign.
    static func summary(_ event: CampaignEvent) -> String {
        var lines = ["campaign \(event.campaign) (app \(event.app)): \(event.event.rawValue)"]
        if let error = event.error { lines.append("  error: \(error)") }
        let total = event.finished
        lines.append("  outcome          devices      share")
        for outcome in DeviceOutcome.allCases {
            let count = event.count(of: outcome)
            guard count > 0 else { continue }
            let share = total == 0 ? 0 : Double(count) / Double(total) * 100
            lines.append("  " + outcome.rawValue.padding(toLength: 15, withPad: " ", startingAt: 0)
                + String(format: "%9d   %7.2f%%", count, share))
        }
        lines.append("  " + "total".padding(toLength: 15, withPad: " ", startingAt: 0) + String(format: "%9d", total))
        if let audience = event.audience, audience > total {
            lines.append("  " + "not finished".padding(toLength: 15, withPad: " ", startingAt: 0) + String(format: "%9d", audience - total))
        }
        return lines.joined(separator: "\n")
    }
}

/// Which of a campaign id's events belong to one submission: none before the planner's
/// answer to its record (they are an earlier submission's), then every event but answers to
/// other records of the id. A reader that fell behind the topic's retention may find the
/// answer dropped: records missing from a partition (its offsets jump) mean everything of
/// the id before the jump went with them, so on that partition the next event without
/// another record's answer is this submission's. So does a partition whose first record read
/// is newer than the submission: retention removed everything before it, perhaps the answer
/// too (seen on the dev cluster, whose retention is small, with a million results ahead).
struct SubmissionGate {
    let submission: CampaignEvent.Submission
    /// When the submission's record was produced, at the latest (ms).
    let since: Int64
    private(set) var answered = false
    private var next: [Int32: Int64] = [:]
    private var gapped: Set<Int32> = []

    init(submission: CampaignEvent.Submission, since: Int64) { (self.submission, self.since) = (submission, since) }

    /// Every record read, in order, before `admits` for it.
    mutating func saw(partition: Int32, offset: Int64, timestamp: Int64?) {
        if let expected = next[partition] {
            if offset > expected { gapped.insert(partition) }
        } else if offset > 0, let timestamp, timestamp >= since {
            gapped.insert(partition)
        }
        next[partition] = offset + 1
    }

    mutating func admits(_ update: CampaignEvent, partition: Int32) -> Bool {
        if let other = update.submission, other != submission {
            // The planner answering someone else's record of this id.
            return false
        }
        if !answered {
            guard update.submission == submission || gapped.contains(partition) else { return false }
            answered = true
        }
        return true
    }
}

/// `pushfan results tail`: the results topic, readably.
struct ResultsTailCommand: Command {
    static let spec = CommandSpec(
        name: "results tail",
        summary: "Print results (device outcomes and campaign events) readably, optionally for one campaign",
        discussion: """
            Reads the results topic with a private consumer group, from the start (--from
            earliest, the default) or only what arrives from now on (--from latest). A device
            result can appear more than once (sends are at-least-once); the last one per
            campaign/device key counts. Stops at SIGINT, after --count records or --idle-exit
            seconds without one.
            """,
        options: [
            .option("campaign", "APP/ID", "only this campaign's records"),
            .option("count", "N", "exit after N printed records"),
            .option("idle-exit", "SECONDS", "exit after this long without a record"),
            .option("from", "WHERE", "earliest or latest (default earliest)"),
            .flag("json", "print the records as JSON lines instead"),
        ] + KafkaOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let campaign = try arguments.value("campaign").map { text in try CampaignArgument.key(text, what: "--campaign") }
        let limit = try arguments.int("count", default: Int.max, range: 1...Int.max)
        let idle = try arguments.double("idle-exit", default: 0, range: 0...86_400)
        var configuration = KafkaConsumerConfiguration(client: try KafkaOptions.client(arguments, context), groupID: "pushfan-tail-\(getpid())")
        switch arguments.value("from") ?? "earliest" {
        case "earliest": configuration.offsetReset = .earliest
        case "latest": configuration.offsetReset = .latest
        case let other: throw UsageError("--from must be earliest or latest, got '\(other)'")
        }
        let json = arguments.flag("json")
        let consumer = try KafkaConsumer(configuration: configuration, logger: context.logger)
        try consumer.subscribe(topics: [context.configuration.kafka.topics.results])
        ShutdownSignal.install { _ in Task { await consumer.close() } }
        let activity = ActivityClock()
        // The idle clock starts once the group has assigned partitions: joining takes seconds.
        let assigned = Atomic<Bool>(false)
        let idleWatch = Task {
            guard idle > 0 else { return }
            while !Task.isCancelled, !assigned.load(ordering: .relaxed) || activity.secondsSinceLast() < idle {
                try? await Task.sleep(for: .milliseconds(100))
            }
            if !Task.isCancelled { await consumer.close() }
        }
        var printed = 0
        loop: for await event in consumer.events {
            if case .assigned = event {
                activity.touch()
                assigned.store(true, ordering: .relaxed)
            }
            guard case .records(let records) = event else { continue }
            activity.touch()
            var output = OutputBuffer()
            for record in records {
                let result: ResultRecord
                do {
                    result = try MessageCodec.decode(ResultRecord.self, from: Data(record.value))
                } catch {
                    if let erasure = try? MessageCodec.decode(ErasureRecord.self, from: Data(record.value)) {
                        if campaign == nil || campaign?.app == erasure.app {
                            output.append(json ? String(decoding: MessageCodec.encode(erasure), as: UTF8.self) + "\n"
                                : "erasure app=\(erasure.app)\(erasure.user.map { " user=\($0)" } ?? "") devices=\(erasure.devices.joined(separator: ","))\n")
                        }
                        continue
                    }
                    output.append("unreadable record at \(record.topicPartition)@\(record.offset): \(error)\n")
                    continue
                }
                if let campaign, result.campaignKey != campaign { continue }
                output.append((json ? String(decoding: MessageCodec.encode(result), as: UTF8.self) : describe(result)) + "\n")
                printed += 1
                if printed >= limit { break }
            }
            _ = output.flush()
            if printed >= limit { break loop }
        }
        idleWatch.cancel()
        await consumer.close()
        return 0
    }

    static func describe(_ result: ResultRecord) -> String {
        switch result {
        case .device(let device):
            var text = "\(timestamp(device.at))  \(device.campaign)  \(device.device)  \(device.outcome.rawValue)"
            if let status = device.status { text += "  \(status)" }
            if let reason = device.reason, !reason.isEmpty { text += "  \(reason)" }
            text += "  attempts=\(device.attempts)"
            if let apnsID = device.apnsID { text += "  apns-id=\(apnsID)" }
            return text
        case .campaign(let event):
            var text = "\(timestamp(event.at))  \(event.campaign)  [campaign \(event.event.rawValue)]"
            if let audience = event.audience { text += "  audience=\(audience)" }
            let counts = event.counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            if !counts.isEmpty { text += "  " + counts.joined(separator: " ") }
            if let error = event.error { text += "  error: \(error)" }
            return text
        }
    }

    private static func timestamp(_ millis: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
    }
}
