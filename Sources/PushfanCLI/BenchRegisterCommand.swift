import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `pushfan bench register`: the store's own rate of single-device registrations, in
/// process: the most one API server on the same store could reach (scripts/bench-api).
struct BenchRegisterCommand: Command {
    static let spec = CommandSpec(
        name: "bench register",
        summary: "Register N distinct devices one call each, C at a time, straight on the store; report the rate",
        discussion: """
            Each registration is what `PUT /v1/apps/{app}/devices/{device}` does. The last line
            on standard output is {"bench":"register","devices":N,"seconds":S,"per_s":R}.
            """,
        options: [
            .option("app", "KEY", "app key (required; must exist)"),
            .option("count", "N", "devices (default 20000)"),
            .option("concurrency", "C", "registrations in flight (default 64)"),
            .option("prefix", "TEXT", "device id prefix, so runs do not collide (default: store)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let count = try arguments.int("count", default: 20_000, range: 1...10_000_000)
        let concurrency = try arguments.int("concurrency", default: 64, range: 1...1024)
        let prefix = arguments.value("prefix") ?? "store"
        let store = try await StoreOptions.open(arguments, context)
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<concurrency {
                group.addTask {
                    for index in stride(from: lane, to: count, by: concurrency) {
                        var registration = DeviceRegistration(deviceID: "\(prefix)-\(index)", token: String(format: "%08x%056x", UInt32(truncatingIfNeeded: prefix.hashValue), index))
                        registration.locale = "en_US"
                        _ = try await store.devices.register(app: app, registration)
                    }
                }
            }
            try await group.waitForAll()
        }
        let seconds = Double((ContinuousClock.now - started).milliseconds) / 1000
        print(#"{"bench":"register","devices":\#(count),"seconds":\#(seconds),"per_s":\#(Int(Double(count) / max(seconds, 0.001)))}"#)
        return 0
    }
}
