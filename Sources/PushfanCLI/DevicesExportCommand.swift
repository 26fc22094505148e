import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `pushfan devices export --app APP [--out FILE]`: the app's active devices as NDJSON import
/// lines, with their tokens of every kind, so `pushfan devices import` brings them back as
/// they were (another store, a restore, SQLite to PostgreSQL). Streams page by page; memory
/// stays flat however many devices the app has.
struct DevicesExportCommand: Command {
    static let spec = CommandSpec(
        name: "devices export",
        summary: "Export an app's active devices, with their tokens of every kind, as NDJSON that devices import reads back",
        discussion: """
            One line per active device: device_id, token, environment, locale, timezone,
            app_version, os_version, tags, attributes, quiet_hours, last_seen and tokens (its
            active, unexpired tokens of other kinds than alert, as the import and the API's
            tokens calls take them). Invalid and unregistered devices and refused tokens are left
            out: an import would make them usable again. The file holds device tokens, which
            identify people's phones: --out creates it readable by its owner only.
            """,
        options: [
            .app,
            .option("out", "FILE", "write here (created or replaced, mode 0600) instead of standard output"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        guard try await store.apps.get(app) != nil else {
            printError("pushfan devices export: unknown app '\(app)'; `pushfan apps list` shows the apps")
            return 1
        }
        let output: FileHandle
        if let path = arguments.value("out") {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            guard descriptor >= 0 else { throw UsageError("cannot create \(path): \(String(cString: strerror(errno)))") }
            output = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        } else {
            output = FileHandle.standardOutput
        }
        let progress = ProgressLine()
        let started = ContinuousClock.now
        var (after, exported): (Int64?, Int) = (nil, 0)
        while true {
            let page = try await store.devices.exportPage(app: app, after: after, limit: 400, now: store.clock.wallMillis)
            guard let last = page.last else { break }
            var text = ""
            for line in page.lines { text += line.compactJSON + "\n" }
            try output.write(contentsOf: Data(text.utf8))
            (after, exported) = (last, exported + page.lines.count)
            progress.show("exported \(exported) devices (\(Int(Double(exported) / max(0.001, (ContinuousClock.now - started).seconds)))/s)")
        }
        progress.finish()
        printError("exported \(exported) devices of app \(app)")
        return 0
    }
}
