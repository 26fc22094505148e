import Foundation
import PushfanAPNsModel
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `pushfan audit --campaign ID | --all [--sim-log FILE]`: compares the ledger, the results
/// topic (read from its start by a private consumer group) and optionally the simulator's
/// log, campaign by campaign (`CampaignAudit`). Prints a table and a JSON line; exits 1 on any
/// violation.
struct AuditCommand: Command {
    static let spec = CommandSpec(
        name: "audit",
        summary: "Check that every device of a campaign has exactly one outcome, the same in the ledger, on the results topic and at APNs",
        discussion: """
            Reads the store's ledger, the whole results topic (a private consumer group, from the
            start to the end it had when the audit began) and, with --sim-log, the NDJSON log of
            `pushfan apns-sim --log`. --all audits every completed or cancelled campaign in the
            store (the most recent --limit). Duplicated results and APNs requests are counted, not
            failed. Exit status 1 when any campaign has a violation, 2 when the sources could
            not be read.
            """,
        options: [
            .option("campaign", "APP/ID", "the campaign to audit"), .flag("all", "every completed or cancelled campaign"),
            .option("limit", "N", "with --all, the most recent N campaigns (default 1000)"),
            .option("sim-log", "FILE", "the simulator's log of accepted requests (`apns-sim --log FILE`)"),
            .option("timeout", "SECONDS", "how long reading the results topic may take (default 120)"),
        ] + StoreOptions.specs + KafkaOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        do {
            return try await audit(arguments, context)
        } catch let error as UsageError {
            throw error
        } catch {
            // Not a verdict: 1 means a violation was found, and scripts branch on it.
            printError("pushfan audit: the sources could not be read: \(error)")
            return 2
        }
    }

    private static func audit(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let one = try arguments.value("campaign").map { text in try CampaignArgument.key(text, what: "--campaign") }
        guard (one != nil) != arguments.flag("all") else { throw UsageError("give --campaign APP/ID or --all") }
        let store = try await StoreOptions.open(arguments, context)
        var rows: [CampaignRegistry.Row] = []
        if let one {
            guard let row = try await store.campaigns.get(one) else {
                printError("pushfan audit: no campaign \(one) in the store")
                return 2
            }
            rows = [row]
        } else {
            rows = try await store.campaigns.list(limit: try arguments.int("limit", default: 1000, range: 1...1_000_000))
                .filter { $0.status == .completed || $0.status == .cancelled }
        }
        let wanted = Set(rows.map(\.key))
        let topic = try await ResultsReading.read(
            client: try KafkaOptions.client(arguments, context), topic: context.configuration.kafka.topics.results, campaigns: wanted,
            timeout: .seconds(try arguments.int("timeout", default: 120, range: 1...86_400)), logger: context.logger)
        // The log is read once for all campaigns, and each app's tokens once.
        let simulatorLog = try arguments.value("sim-log").map { path throws(UsageError) in try SimulatorLog(path: path) }
        var devicesByToken: [String: [String: String]] = [:]
        var reports: [CampaignAudit.Report] = []
        for row in rows {
            let ledger = try await store.ledger.facts(campaign: row.key)
            var accepted: [String: Int]?
            if let simulatorLog {
                if devicesByToken[row.app] == nil { devicesByToken[row.app] = try await store.devices.deviceIDsByToken(app: row.app) }
                accepted = try await acceptedRequests(in: simulatorLog, campaign: row.key, devices: devicesByToken[row.app] ?? [:], store: store)
            }
            let audit = CampaignAudit(
                campaign: row.key.stored, status: row.status.rawValue, ledger: ledger, results: topic.devices[row.key] ?? [:],
                resultRecords: topic.records[row.key] ?? 0, finalEvent: topic.finalEvents[row.key], accepted: accepted,
                erased: topic.erased[row.app] ?? [:])
            reports.append(audit.check())
        }
        print(table(reports))
        let violations = reports.map(\.violations.count).reduce(0, +)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(Summary(audit: reports, campaigns: reports.count, violations: violations)), as: UTF8.self))
        return violations == 0 ? 0 : 1
    }

    /// The last line: every report, and the totals.
    struct Summary: Encodable {
        let audit: [CampaignAudit.Report]
        let campaigns: Int
        let violations: Int
    }

    /// Device id → requests the simulator accepted for the campaign: its log lines for the
    /// app's topic with the campaign's collapse id, by token, tokens mapped to devices.
    static func acceptedRequests(
        in log: SimulatorLog, campaign: CampaignKey, devices: [String: String], store: DeviceStore
    ) async throws -> [String: Int] {
        guard let stored = try await store.campaigns.stored(campaign), let parsed = try? stored.accepted(campaign),
              let appRecord = try await store.apps.get(campaign.app) else { return [:] }
        let topic = (try? APNsNotification.requestTopic(appRecord.topic, pushType: parsed.notification.pushType)) ?? appRecord.topic
        var accepted: [String: Int] = [:]
        for (token, requests) in log.accepted(topic: topic, collapseID: parsed.effectiveCollapseID) {
            accepted[devices[token] ?? CampaignAudit.unmappedToken + token.prefix(12), default: 0] += requests
        }
        return accepted
    }

    static func table(_ reports: [CampaignAudit.Report]) -> String {
        var lines = ["campaign".padding(toLength: 32, withPad: " ", startingAt: 0) + " status     devices  results  dup-results  dup-apns  violations"]
        for report in reports {
            lines.append(report.campaign.padding(toLength: 32, withPad: " ", startingAt: 0) + " " + report.status.padding(toLength: 10, withPad: " ", startingAt: 0)
                + String(format: " %7d  %7d  %11d  %8@  %10d", report.devices, report.results, report.duplicateResults,
                         report.apnsDuplicates.map { String($0) } ?? "-", report.violations.count))
            for violation in report.violations { lines.append("  ✗ \(violation)") }
        }
        return lines.joined(separator: "\n")
    }
}

/// The simulator's log of accepted requests (`apns-sim --log`), counted by topic, collapse
/// id and token in one pass.
struct SimulatorLog {
    private var requests: [String: [String: [String: Int]]] = [:]

    init(path: String) throws(UsageError) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError("--sim-log: cannot read \(path)") }
        for line in text.split(separator: "\n") {
            guard let object = try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)).objectValue,
                  let topic = object["topic"]?.stringValue, let collapseID = object["collapse_id"]?.stringValue,
                  let token = object["token"]?.stringValue else { continue }
            requests[topic, default: [:]][collapseID, default: [:]][token, default: 0] += 1
        }
    }

    /// Token → requests accepted for that topic and collapse id.
    func accepted(topic: String, collapseID: String) -> [String: Int] {
        requests[topic]?[collapseID] ?? [:]
    }
}

/// The results topic read once, from its start to the end it had when reading began.
struct ResultsReading {
    /// Campaign → device id → its last result.
    var devices: [CampaignKey: [String: DeviceResult]] = [:]
    /// Campaign → device records read, duplicates included.
    var records: [CampaignKey: Int] = [:]
    /// Campaign → its last `completed` or `cancelled` event.
    var finalEvents: [CampaignKey: CampaignEvent] = [:]
    /// App → devices erased on request and when (the topic's tombstones): their ledger rows
    /// are gone.
    var erased: [String: [String: Int64]] = [:]

    static func read(client: KafkaClientConfiguration, topic: String, campaigns: Set<CampaignKey>, timeout: Duration, logger: Logger) async throws -> ResultsReading {
        var configuration = KafkaConsumerConfiguration(client: client, groupID: "pushfan-audit-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        configuration.offsetReset = .earliest
        let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        try consumer.subscribe(topics: [topic])
        let watchdog = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { await consumer.close() }
        }
        defer { watchdog.cancel() }
        var reading = ResultsReading()
        // Partition → the offset to read up to (the end when the audit began), and where reading is.
        var ends: [TopicPartition: Int64]?
        var next: [TopicPartition: Int64] = [:]
        func done() -> Bool { ends.map { $0.allSatisfy { next[$0.key, default: 0] >= $0.value } } ?? false }
        loop: for await event in consumer.events {
            switch event {
            case .assigned(let partitions):
                let marks = try await consumer.watermarks(partitions)
                ends = marks.mapValues(\.high)
                for (partition, mark) in marks where next[partition] == nil { next[partition] = mark.low }
            case .records(let records):
                for record in records {
                    next[record.topicPartition] = record.offset + 1
                    reading.add(record, campaigns: campaigns)
                }
            default:
                break
            }
            if done() { break loop }
        }
        let complete = done()
        await consumer.close()
        guard complete else { throw UsageError("the results topic was not read to its end within \(timeout.seconds) s (--timeout)") }
        return reading
    }

    mutating func add(_ record: KafkaRecord, campaigns: Set<CampaignKey>) {
        guard let decoded = record.withValueBytes({ try? MessageCodec.decode(ResultRecord.self, from: $0) }) else {
            if let erasure = record.withValueBytes({ try? MessageCodec.decode(ErasureRecord.self, from: $0) }) {
                for device in erasure.devices { erased[erasure.app, default: [:]][device] = erasure.at }
            }
            return
        }
        switch decoded {
        case .device(let result) where campaigns.contains(result.campaignKey):
            devices[result.campaignKey, default: [:]][result.device] = result
            records[result.campaignKey, default: 0] += 1
        case .campaign(let event) where campaigns.contains(event.campaignKey) && (event.event == .completed || event.event == .cancelled):
            finalEvents[event.campaignKey] = event
        default:
            break
        }
    }
}
