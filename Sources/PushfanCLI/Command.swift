import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// A subcommand of `pushfan`.
package protocol Command: Sendable {
    static var spec: CommandSpec { get }
    /// Returns the process exit code.
    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32
}

/// What every command gets: the merged configuration, a logger and the process's one clock
/// (the system's; a test harness may run the commands on another).
package struct CommandContext: Sendable {
    package var configuration: PushfanConfiguration
    package var logger: Logger
    package var clock: any ServiceClock
}

/// Dispatches `pushfan <command> ...`.
package enum PushfanMain {
    package static let commands: [any Command.Type] = [
        KafkaDevCommand.self,
        ProduceCommand.self,
        ConsumeCommand.self,
        SubmitCommand.self,
        CampaignsListCommand.self,
        CampaignsStatusCommand.self,
        CampaignsStatsCommand.self,
        CampaignControlCommand<CancelAction>.self,
        CampaignControlCommand<PauseAction>.self,
        CampaignControlCommand<ResumeAction>.self,
        WorkerCommand.self,
        APICommand.self,
        ResultsTailCommand.self,
        AuditCommand.self,
        OperatorLogCommand.self,
        KeysAddCommand.self,
        KeysListCommand.self,
        KeysRevokeCommand.self,
        AppsAddCommand.self,
        AppsListCommand.self,
        AppsShowCommand.self,
        AppsSetRateCommand.self,
        AppsSetCapsCommand.self,
        AppsRotateSecretCommand.self,
        AppsSetCredentialsCommand.self,
        DevicesRegisterCommand.self,
        DevicesUnregisterCommand.self,
        DevicesRepairTokensCommand.self,
        DevicesListCommand.self,
        DevicesShowCommand.self,
        DevicesImportCommand.self,
        DevicesExportCommand.self,
        DevicesExpandCommand.self,
        SegmentsCountCommand.self,
        SegmentsSampleCommand.self,
        SegmentsSaveCommand.self,
        TemplatesSetCommand.self,
        TemplatesListCommand.self,
        TemplatesRemoveCommand.self,
        DemoCommand.self,
        SendCommand.self,
        BenchAPNsCommand.self,
        BenchRegisterCommand.self,
        APNsSimCommand.self,
        TopicsPlanCommand.self,
        TopicsCreateCommand.self,
    ]

    package static var help: String {
        var text = """
            pushfan: push-notification campaigns to iOS devices through APNs, at scale.

            Usage: pushfan <command> [options]    (pushfan <command> --help for details)

            Commands:

            """
        let width = (commands.map { $0.spec.name.count }.max() ?? 0) + 2
        for command in commands {
            text += "  " + command.spec.name.padding(toLength: width, withPad: " ", startingAt: 0) + command.spec.summary + "\n"
        }
        text += """

            Configuration: a JSON file (--config or PUSHFAN_CONFIG), then the environment
            (PUSHFAN_KAFKA_BROKERS, PUSHFAN_DATABASE, PUSHFAN_APNS_URL, PUSHFAN_APNS_CA_FILE,
            PUSHFAN_LOG_LEVEL), then flags. See docs/configuration.md.
            """
        return text
    }

    /// The commands whose name starts with the word `group` (`apps`, `devices`...), listed;
    /// nil when no command has more words after it.
    static func groupHelp(_ group: String) -> String? {
        let members = commands.filter { $0.spec.name.hasPrefix(group + " ") }
        guard !members.isEmpty else { return nil }
        let width = (members.map { $0.spec.name.count }.max() ?? 0) + 2
        var text = "Usage: pushfan \(group) <command> [options]    (pushfan \(group) <command> --help for details)\n\nCommands:\n"
        for command in members {
            text += "  " + command.spec.name.padding(toLength: width, withPad: " ", startingAt: 0) + command.spec.summary + "\n"
        }
        return text
    }

    /// Runs the command named by the leading words of `arguments` (without the program name)
    /// on `clock`.
    package static func run(_ arguments: [String], clock: any ServiceClock) async -> Int32 {
        if arguments.isEmpty || arguments == ["--help"] || arguments == ["-h"] || arguments == ["help"] {
            print(help)
            return arguments.isEmpty ? 2 : 0
        }
        // The longest command name that matches the leading words wins ("bench kafka" over "bench").
        let match = commands
            .filter { command in
                let words = command.spec.name.split(separator: " ").map(String.init)
                return arguments.count >= words.count && Array(arguments.prefix(words.count)) == words
            }
            .max { $0.spec.name.count < $1.spec.name.count }
        guard let command = match else {
            if let group = groupHelp(arguments[0]) {
                // `pushfan apps --help`: the group's commands.
                let asked = arguments.count == 2 && (arguments[1] == "--help" || arguments[1] == "-h")
                if asked || arguments.count == 1 {
                    if asked { print(group) } else { printError(group) }
                    return asked ? 0 : 2
                }
                printError("unknown command '\(arguments.prefix(2).joined(separator: " "))'\n\n\(group)")
                return 2
            }
            printError("unknown command '\(arguments[0])'\n\n\(help)")
            return 2
        }
        let rest = Array(arguments.dropFirst(command.spec.name.split(separator: " ").count))
        do {
            let parsed = try command.spec.parse(rest)
            if parsed.flag("help") {
                print(command.spec.help)
                return 0
            }
            var configuration = try PushfanConfiguration.load(file: parsed.value("config"))
            if let level = parsed.value("log-level") {
                guard LogLevel(name: level) != nil else { throw UsageError("--log-level must be debug, info, notice, warning or error") }
                configuration.logLevel = level
            }
            let logger = Logger(label: "pushfan", threshold: configuration.logThreshold)
            return try await command.run(parsed, CommandContext(configuration: configuration, logger: logger, clock: clock))
        } catch let error as StoreError where error.code == .invalidInput || error.code == .notFound || error.code == .conflict {
            printError("pushfan \(command.spec.name): \(error.description)")
            return 1
        } catch let error as UsageError {
            printError("pushfan \(command.spec.name): \(error.description)")
            return 2
        } catch {
            printError("pushfan \(command.spec.name): \(error)")
            return 1
        }
    }
}

/// Writes a line to standard error.
package func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
