import Foundation
import PushfanKafka
import PushfanMessages

/// `pushfan submit`: validates a campaign file and produces it to the campaigns topic.
struct SubmitCommand: Command {
    static let spec = CommandSpec(
        name: "submit",
        summary: "Validate a campaign (JSON file, or - for standard input) and submit it",
        discussion: """
            The campaign is checked against the v1 schema (docs/messages.md) before anything is
            sent: at most 512 KiB, and an options.expiration that has not passed yet; a bad
            file is reported with the field at fault and exit code 1. The record's key is the
            campaign id, so submitting the same campaign again is one campaign; a different
            campaign under an id already taken is refused by the planner (a dead letter and a
            failed event naming the conflict).
            With --wait, follows this submission on the results topic (a progress bar on a
            terminal, a line every two seconds otherwise; a pause for credentials is shown
            with its reason) and prints the summary table when it completes; exit 0 when
            completed, 1 when it failed, was cancelled or --timeout passed.
            """,
        positionals: ["FILE"],
        options: [
            .flag("wait", "follow the campaign until it completes, then print a summary"),
            .option("timeout", "SECONDS", "with --wait: give up after this long (default 3600)"),
        ] + KafkaOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let path = arguments.positionals[0]
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: path) else {
                printError("pushfan submit: cannot read \(path)")
                return 1
            }
            data = contents
        }
        let campaign: Campaign
        do {
            campaign = try Campaign.decodeRecord(data)
            try campaign.checkSubmittable(now: Date())
        } catch {
            printError("pushfan submit: \(path) is not a valid campaign: \(error)")
            return 1
        }
        let topic = context.configuration.kafka.topics.campaigns
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: KafkaOptions.client(arguments, context)), logger: context.logger)
        // Re-encoded compactly: the record on the topic is the validated campaign.
        let report: DeliveryReport
        do {
            report = try await producer.send(ProducerRecord(topic: topic, key: campaign.kafkaKey, value: MessageCodec.encode(campaign)))
        } catch {
            await producer.close()
            throw error
        }
        await producer.close()
        print("campaign \(campaign.id) submitted to \(topic)[\(report.partition)] at offset \(report.offset)")
        guard arguments.flag("wait") else { return 0 }
        let timeout = try arguments.double("timeout", default: 3600, range: 1...604_800)
        let watch = CampaignWatch(
            campaign: campaign.key, submission: CampaignEvent.Submission(partition: Int(report.partition), offset: report.offset),
            client: try KafkaOptions.client(arguments, context), topics: context.configuration.kafka.topics, logger: context.logger)
        guard let last = try await watch.wait(timeout: .seconds(timeout)) else {
            printError("pushfan submit: no word from any worker about \(campaign.id) within \(Int(timeout)) s; is a worker running?")
            return 1
        }
        print(CampaignWatch.summary(last))
        switch last.event {
        case .completed: return 0
        case .failed:
            printError("pushfan submit: \(campaign.id) failed: \(last.error ?? "no reason given")")
            return 1
        case .cancelled:
            printError("pushfan submit: \(campaign.id) was cancelled")
            return 1
        case .accepted, .progress, .paused, .resumed:
            printError("pushfan submit: \(campaign.id) did not complete within \(Int(timeout)) s")
            return 1
        }
    }
}
