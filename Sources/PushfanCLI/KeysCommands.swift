import Foundation
import PushfanMessages
import PushfanStore

/// `pushfan keys add --name NAME --role ROLE [--app KEY]`: makes a scoped key, printed once.
struct KeysAddCommand: Command {
    static let spec = CommandSpec(
        name: "keys add",
        summary: "Make a scoped key for an operator or a tool: admin, campaigns:write for one app, or read-only (printed once)",
        discussion: """
            The key goes as Authorization: Bearer KEY. admin may do what the admin token may;
            campaigns:write (with --app) may submit, list, read, cancel, pause and resume that
            app's campaigns and see its dashboard; read-only may read the admin routes, the
            operator log and every app's dashboard. Only a salted hash is stored: keep the
            printed key, it is not shown again. The id before the secret names the key in the
            operator log and in `keys revoke`.
            """,
        options: [
            .option("name", "NAME", "what the key is for, e.g. \"crm export\" (required)"),
            .option("role", "ROLE", "admin, campaigns:write or read-only (required)"),
            .option("app", "KEY", "the app of a campaigns:write key"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let role = try KeyRole(name: try arguments.required("role"), app: arguments.value("app"))
        let name = try arguments.required("name")
        let store = try await StoreOptions.open(arguments, context)
        let (key, token) = try await store.adminKeys.add(name: name, role: role)
        print("key \(key.id) (\(role.name)\(role.app.map { " for \($0)" } ?? "")): \(token)")
        return 0
    }
}

/// `pushfan keys list`: every key, revoked ones too, one JSON object per line (never a secret).
struct KeysListCommand: Command {
    static let spec = CommandSpec(name: "keys list", summary: "List the scoped keys (id, name, role, app, created, revoked; never a secret)", options: StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        for key in try await store.adminKeys.list() { print(key.json.compactJSON) }
        return 0
    }
}

/// `pushfan keys revoke --id ID`: the key stops working at once.
struct KeysRevokeCommand: Command {
    static let spec = CommandSpec(
        name: "keys revoke", summary: "Revoke a scoped key at once (it stays listed)", options: [.option("id", "ID", "the key's id (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let id = try arguments.required("id")
        let store = try await StoreOptions.open(arguments, context)
        guard try await store.adminKeys.revoke(id: id) else {
            printError("pushfan keys revoke: no key \(id) that is not revoked already")
            return 1
        }
        print("key \(id) revoked")
        return 0
    }
}
