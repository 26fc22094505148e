import Foundation
import PushfanMessages
import PushfanStore

/// `pushfan operator-log`: the operator log, one JSON object per line, oldest first.
struct OperatorLogCommand: Command {
    static let spec = CommandSpec(
        name: "operator-log",
        summary: "Show the operator log: who changed apps, campaigns, templates and segments through the API, from where, and how it ended",
        discussion: """
            One JSON object per line: seq, at (epoch ms), actor (the admin token or an app's
            secret kind, never the secret), client (the address, through a trusted proxy
            the forwarded one), action (method and route), app, target (the ids named and
            what was created) and status. The log is append-only: nothing changes or
            removes an entry. --after SEQ continues after an entry already read.
            """,
        options: [
            .option("app", "KEY", "only calls about this app"),
            .option("after", "SEQ", "entries after this sequence number (default 0: from the first)"),
            .option("limit", "N", "at most this many entries (default 1000)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let after = Int64(try arguments.int("after", default: 0, range: 0...Int.max))
        let limit = try arguments.int("limit", default: 1000, range: 1...1_000_000)
        let store = try await StoreOptions.open(arguments, context)
        for entry in try await store.operatorLog.list(after: after, limit: limit, app: arguments.value("app")) {
            print(entry.json.compactJSON)
        }
        return 0
    }
}
