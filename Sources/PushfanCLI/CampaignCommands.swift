import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics
import PushfanWorker

/// `pushfan campaigns list`: the newest campaigns with their status and progress.
struct CampaignsListCommand: Command {
    static let spec = CommandSpec(
        name: "campaigns list",
        summary: "List the newest campaigns with status, audience and devices finished",
        options: [.option("limit", "N", "at most N campaigns (default 20)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        let rows = try await store.campaigns.list(limit: try arguments.int("limit", default: 20, range: 1...10_000))
        print("campaign".padding(toLength: 32, withPad: " ", startingAt: 0) + " " + "app".padding(toLength: 16, withPad: " ", startingAt: 0)
            + " status      audience   finished")
        for row in rows {
            let finished = try await CampaignReport.finished(store, row.key)
            print(row.id.padding(toLength: 32, withPad: " ", startingAt: 0) + " " + row.app.padding(toLength: 16, withPad: " ", startingAt: 0)
                + " " + row.status.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0) + String(format: " %9d  %9d", row.audience, finished))
        }
        return 0
    }
}

/// A campaign named on the command line: `APP/ID`, since campaign ids are named within
/// their app (two apps may both have a `spring-sale`).
enum CampaignArgument {
    static func key(_ text: String, what: String = "ID") throws -> CampaignKey {
        guard let key = CampaignKey(stored: text) else {
            throw UsageError("\(what): give the campaign as APP/ID (campaign ids are named within their app), got \(text.debugDescription)")
        }
        return key
    }

    /// The store, and the row of the campaign the first positional names; nil (after saying
    /// so on standard error, for exit 1) when the store has no such campaign.
    static func stored(_ arguments: ParsedArguments, _ context: CommandContext, command: String) async throws -> (DeviceStore, CampaignRegistry.Row)? {
        let id = try key(arguments.positionals[0])
        let store = try await StoreOptions.open(arguments, context)
        guard let row = try await store.campaigns.get(id) else {
            printError("pushfan \(command): no campaign \(id) in the store")
            return nil
        }
        return (store, row)
    }
}

/// `pushfan campaigns status APP/ID`: one campaign's status and counts.
struct CampaignsStatusCommand: Command {
    static let spec = CommandSpec(
        name: "campaigns status",
        summary: "Show a campaign's status, audience and outcome counts",
        discussion: "Exit 1 when the store has no campaign of that id in that app.",
        positionals: ["APP/ID"],
        options: StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        guard let (store, row) = try await CampaignArgument.stored(arguments, context, command: "campaigns status") else { return 1 }
        let id = row.key
        print("campaign \(row.id) (app \(row.app)): \(row.status.rawValue)")
        print("  audience \(row.audience) in \(row.shards) shards")
        if let sendAt = row.sendAt, row.parked { print("  send at \(isoTime(sendAt))") }
        let waves = try await store.waves.parked(campaign: id)
        if let next = waves.next {
            print("  \(waves.count) wave\(waves.count == 1 ? "" : "s") parked, the next at \(isoTime(next))")
        }
        let counts = try await store.ledger.progressCounts(campaign: id)
        for (state, count) in counts.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where count > 0 && state != .claimed {
            print("  " + state.rawValue.padding(toLength: 15, withPad: " ", startingAt: 0) + String(format: "%9d", count))
        }
        return 0
    }
}

/// `pushfan campaigns stats APP/ID`: outcomes and engagement per variant, and the holdout's lift.
struct CampaignsStatsCommand: Command {
    static let spec = CommandSpec(
        name: "campaigns stats",
        summary: "Show a campaign's deliveries, opens, actions and conversions per variant, and the holdout's lift",
        discussion: """
            Counts are exact: each engagement event counts once, however often it was sent or
            read. Rates are per device (opened or converting devices over delivered ones; the
            holdout's over the devices it held out). --json prints what GET /v1/apps/{app}/campaigns/{id}/stats
            answers. Exit 1 when the store has no campaign of that id in that app.
            """,
        positionals: ["APP/ID"],
        options: StoreOptions.specs + [.flag("json", "print the stats as JSON")])

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        guard let (store, row) = try await CampaignArgument.stored(arguments, context, command: "campaigns stats") else { return 1 }
        let stats = try await store.campaignStats(row.key)
        if arguments.flag("json") {
            print(stats.jsonValue.compactJSON)
            return 0
        }
        print("campaign \(row.id) (app \(row.app)): \(row.status.rawValue)")
        print("  " + ["variant", "delivered", "opened", "open rate", "converted", "conv. rate"].map { $0.padding(toLength: 11, withPad: " ", startingAt: 0) }.joined())
        guard case .object(let answer) = stats.jsonValue, case .object(let variants)? = answer["variants"] else { return 0 }
        for (name, value) in variants.sorted(by: { $0.key < $1.key }) {
            guard case .object = value else { continue }
            func number(_ path: String...) -> String {
                var current: JSONValue? = value
                for key in path { if case .object(let members)? = current { current = members[key] } else { current = nil } }
                switch current {
                case .int(let n)?: return String(n)
                case .number(let n)?: return String(format: "%.2f%%", n * 100)
                default: return "-"
                }
            }
            let cells = [name, number("delivered"), number("opened", "devices"), number("open_rate"), number("conversions", "devices"), number("conversion_rate")]
            print("  " + cells.map { $0.padding(toLength: 11, withPad: " ", startingAt: 0) }.joined())
        }
        if let lift = stats.holdoutLift {
            print(String(format: "  holdout lift: %+.2f points (95%% interval %+.2f to %+.2f), variants %.2f%% against holdout %.2f%%",
                         lift.absolute * 100, lift.low * 100, lift.high * 100, lift.treatedRate * 100, lift.holdoutRate * 100))
        }
        return 0
    }
}

/// `pushfan campaigns cancel|pause|resume APP/ID`.
struct CampaignControlCommand<Action: ControlActionName>: Command {
    static var spec: CommandSpec {
        CommandSpec(
            name: "campaigns \(Action.action.rawValue)", summary: Action.summary,
            discussion: """
                The store's campaign row changes first (what a worker that starts later reads),
                then a control record on the control topic tells every running worker, which
                starts no further request for the campaign within a second. Repeating a command
                changes nothing and exits 0; an unknown campaign, or one the command cannot apply
                to (a completed campaign cannot be cancelled), exits 1 with the reason.
                """,
            positionals: ["APP/ID"],
            options: StoreOptions.specs + KafkaOptions.specs)
    }

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let id = try CampaignArgument.key(arguments.positionals[0])
        let name = "pushfan campaigns \(Action.action.rawValue)"
        let store = try await StoreOptions.open(arguments, context)
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: KafkaOptions.client(arguments, context)), logger: context.logger)
        let command = OperatorCommand(store: store, writer: ResultsWriter(producer: producer, topics: context.configuration.kafka.topics))
        let answer: OperatorCommand.Answer
        do {
            answer = try await command.run(Action.action, campaign: id)
        } catch {
            await producer.close()
            throw error
        }
        await producer.close()
        switch answer {
        case .unknownCampaign:
            printError("\(name): no campaign \(id) in the store (it is there once a worker's planner has read it)")
            return 1
        case .decided(.move(let from, let to)):
            print("campaign \(id): \(from.rawValue) → \(to.rawValue)" + (Action.action == .cancel ? "; unsent devices end cancelled" : ""))
            return 0
        case .decided(.already(let status)):
            print("campaign \(id) is already \(status.rawValue); nothing changed")
            return 0
        case .decided(.refused(let reason)):
            printError("\(name): \(reason); nothing changed")
            return 1
        }
    }
}

/// The three commands, as types (a command's spec is static).
protocol ControlActionName: Sendable {
    static var action: ControlRecord.Action { get }
    static var summary: String { get }
}

enum CancelAction: ControlActionName {
    static let action = ControlRecord.Action.cancel
    static let summary = "Cancel a campaign: no further request starts; unsent devices end cancelled"
}

enum PauseAction: ControlActionName {
    static let action = ControlRecord.Action.pause
    static let summary = "Pause a campaign: no further request starts until it is resumed; nothing is lost"
}

enum ResumeAction: ControlActionName {
    static let action = ControlRecord.Action.resume
    static let summary = "Resume a paused campaign from where it stopped"
}

enum CampaignReport {
    /// Devices with a final outcome so far, from the running totals.
    static func finished(_ store: DeviceStore, _ id: CampaignKey) async throws -> Int {
        try await store.ledger.progressCounts(campaign: id).filter { $0.key != .claimed }.values.reduce(0, +)
    }
}

/// An epoch-milliseconds time as ISO 8601, UTC.
private func isoTime(_ millis: Int64) -> String {
    ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
}
