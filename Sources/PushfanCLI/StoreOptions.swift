import Foundation
import PushfanAPNs
import PushfanMessages
import PushfanStore
import PushfanSupport

/// Options shared by commands that use the device store.
enum StoreOptions {
    static let specs: [OptionSpec] = [
        .option("database", "URL", "sqlite:PATH or postgres://... (default: $PUSHFAN_DATABASE or sqlite:pushfan.db)"),
    ]

    static func open(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> DeviceStore {
        try await DeviceStore.open(arguments.value("database") ?? context.configuration.database, logger: context.logger, clock: context.clock)
    }
}
