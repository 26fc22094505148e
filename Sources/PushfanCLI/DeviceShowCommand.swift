import PushfanMessages
import PushfanStore

/// `pushfan devices show --app APP --device ID`: one device as the store has it, with its
/// tokens of every kind (the alert token is the device's own; VoIP, Live Activity and the
/// rest are listed with their state). Tokens are shortened: they identify a person's phone.
struct DevicesShowCommand: Command {
    static let spec = CommandSpec(
        name: "devices show",
        summary: "Show one device with its tokens of every kind",
        discussion: "Exit 1 when the app has no device of that id.",
        options: [.app, .option("device", "ID", "device id (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let (app, id) = (try arguments.required("app"), try arguments.required("device"))
        let store = try await StoreOptions.open(arguments, context)
        guard let device = try await store.devices.get(app: app, deviceID: id) else {
            printError("pushfan devices show: app \(app) has no device \(id)")
            return 1
        }
        print("device \(device.deviceID) (app \(app)): \(device.status.rawValue)" + (device.invalidReason.map { " (\($0))" } ?? ""))
        print("  locale \(device.locale ?? "-"), time zone \(device.timezone ?? "-"), app \(device.appVersion ?? "-"), tags \(device.tags.joined(separator: ","))")
        print(["  kind", "scope", "token", "env", "status"].joined(separator: "\t"))
        print(["  alert", "-", short(device.token), device.environment.rawValue, device.status.rawValue].joined(separator: "\t"))
        for stored in try await store.tokens.list(app: app, deviceID: id) {
            let status = stored.status + (stored.invalidReason.map { " (\($0))" } ?? "")
            print(["  " + stored.token.kind.rawValue, stored.token.scope.isEmpty ? "-" : stored.token.scope, short(stored.token.token),
                   stored.token.environment?.rawValue ?? "-", status].joined(separator: "\t"))
        }
        return 0
    }

    private static func short(_ token: String) -> String { String(token.prefix(12)) + "…" }
}
