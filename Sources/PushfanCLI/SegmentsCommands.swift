import Foundation
import PushfanAPNs
import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport

/// Commands that read an app's audience share its options (`--app`, then EXPR or `--name`
/// of a saved segment) and their lookup.
enum SegmentInput {
    static let specs: [OptionSpec] = [.app, .option("name", "NAME", "use a saved segment instead of EXPR")]

    /// The app, its store, and the segment (nil: every active device).
    static func open(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> (app: String, store: DeviceStore, segment: SegmentExpression?) {
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        return (app, store, try await expression(arguments, store, app: app))
    }

    static func expression(_ arguments: ParsedArguments, _ store: DeviceStore, app: String) async throws -> SegmentExpression? {
        var text = arguments.positionals.first
        if let name = arguments.value("name") {
            guard let saved = try await store.audience.savedSegment(app: app, name: name) else { throw UsageError("no saved segment '\(name)' for app \(app)") }
            text = saved
        }
        guard let text, text.trimmingCharacters(in: .whitespaces) != "all" else { return nil }
        do {
            return try SegmentParser.parse(text)
        } catch {
            throw UsageError("segment \(error)")
        }
    }
}

struct SegmentsCountCommand: Command {
    static let spec = CommandSpec(
        name: "segments count",
        summary: "Count an app's active devices matching a segment (docs/segments.md)",
        positionals: ["[EXPR]"],
        options: SegmentInput.specs + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let (app, store, expression) = try await SegmentInput.open(arguments, context)
        print(try await store.audience.count(app: app, segment: expression, now: store.clock.wallMillis))
        return 0
    }
}

struct SegmentsSampleCommand: Command {
    static let spec = CommandSpec(
        name: "segments sample",
        summary: "Show some devices matching a segment",
        positionals: ["[EXPR]"],
        options: SegmentInput.specs + [.option("limit", "N", "how many (default 10)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let (app, store, expression) = try await SegmentInput.open(arguments, context)
        let limit = try arguments.int("limit", default: 10, range: 1...10_000)
        let devices = try await store.audience.page(app: app, segment: expression, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: limit, now: store.clock.wallMillis)
        for device in devices {
            print([String(device.rowKey), device.deviceID, device.environment.rawValue, device.locale ?? "-"].joined(separator: "\t"))
        }
        return 0
    }
}

struct SegmentsSaveCommand: Command {
    static let spec = CommandSpec(
        name: "segments save",
        summary: "Save a named segment for an app (campaigns can target it by name)",
        positionals: ["EXPR"],
        options: [.app, .option("name", "NAME", "segment name (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let name = try arguments.required("name")
        let store = try await StoreOptions.open(arguments, context)
        try await store.audience.saveSegment(app: app, name: name, expression: arguments.positionals[0])
        print("segment \(name) saved for app \(app)")
        return 0
    }
}
