import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanStore

/// `pushfan devices register`: what a client SDK does on launch.
struct DevicesRegisterCommand: Command {
    static let spec = CommandSpec(
        name: "devices register",
        summary: "Register or update one device (idempotent)",
        discussion: "A token registered before under another device id moves to this one.",
        options: [
            .app,
            .option("token", "HEX", "APNs device token, hexadecimal (required)"),
            .option("device-id", "ID", "stable device id (default: the token)"),
            .option("environment", "E", "production or sandbox (default production)"),
            .option("locale", "L", "e.g. de_DE"),
            .option("timezone", "TZ", "IANA name, e.g. Europe/Berlin"),
            .option("quiet-hours", "HH:MM-HH:MM", "do not disturb (local time), e.g. 22:00-07:00: alert pushes wait until it ends"),
            .option("app-version", "V", "app version, e.g. 2.3.1"),
            .option("os-version", "V", "iOS version, e.g. 17.4"),
            .option("tag", "T", "a tag", repeatable: true),
            .option("attr", "K=V", "an attribute; numbers are stored as numbers", repeatable: true),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let token = try arguments.required("token")
        var registration = DeviceRegistration(deviceID: arguments.value("device-id") ?? token, token: token)
        registration.environment = try APNsEnvironment(parsing: arguments.value("environment") ?? "production")
        registration.locale = arguments.value("locale")
        registration.timezone = arguments.value("timezone")
        if let window = arguments.value("quiet-hours") {
            let ends = window.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard ends.count == 2 else { throw UsageError("--quiet-hours must look like 22:00-07:00, got '\(window)'") }
            registration.quietHours = try Validation.quietHours(start: ends[0], end: ends[1])
        }
        registration.appVersion = arguments.value("app-version")
        registration.osVersion = arguments.value("os-version")
        registration.tags = arguments.values("tag")
        for pair in arguments.values("attr") {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else { throw UsageError("--attr must look like name=value, got '\(pair)'") }
            let value = String(pair[pair.index(after: equals)...])
            registration.attributes[String(pair[..<equals])] = .inferred(from: value)
        }
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        let result = try await store.devices.register(app: app, registration)
        print("device \(registration.deviceID) \(result.created ? "registered" : "updated") (row \(result.rowKey))")
        if !result.tokenMovedFrom.isEmpty { print("token moved from device \(result.tokenMovedFrom.joined(separator: ", "))") }
        return 0
    }
}

struct DevicesUnregisterCommand: Command {
    static let spec = CommandSpec(
        name: "devices unregister",
        summary: "Stop sending to a device",
        options: [.app, .option("device-id", "ID", "device id (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        let deviceID = try arguments.required("device-id")
        guard try await store.devices.unregister(app: try arguments.required("app"), deviceID: deviceID) else {
            printError("pushfan devices unregister: no device \(deviceID)")
            return 1
        }
        print("device \(deviceID) unregistered")
        return 0
    }
}

struct DevicesListCommand: Command {
    static let spec = CommandSpec(
        name: "devices list",
        summary: "List an app's devices in registration order",
        options: [
            .app,
            .option("limit", "N", "how many (default 20)"),
            .option("after", "ROW", "continue after this row key"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        let limit = try arguments.int("limit", default: 20, range: 1...100_000)
        let after = try arguments.value("after").map { _ throws(UsageError) in Int64(try arguments.int("after", default: 0)) }
        let devices = try await store.devices.list(app: try arguments.required("app"), after: after, limit: limit)
        print(["row", "device id", "token", "env", "locale", "app", "status", "tags"].joined(separator: "\t"))
        for device in devices {
            print([
                String(device.rowKey), device.deviceID, String(device.token.prefix(12)) + "…", device.environment.rawValue,
                device.locale ?? "-", device.appVersion ?? "-", device.status.rawValue + (device.invalidReason.map { " (\($0))" } ?? ""),
                device.tags.joined(separator: ","),
            ].joined(separator: "\t"))
        }
        return 0
    }
}
