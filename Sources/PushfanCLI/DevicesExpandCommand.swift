import Foundation
import PushfanAPNs
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `pushfan devices expand`: streams an audience the way the pipeline does (shards, then
/// keyset pages), counting devices; a dry run of expansion and the store benchmark's probe.
struct DevicesExpandCommand: Command {
    static let spec = CommandSpec(
        name: "devices expand",
        summary: "Expand an audience through shards and pages, as a campaign would, and report the rate",
        positionals: ["[EXPR]"],
        options: SegmentInput.specs + [
            .option("shard-size", "N", "devices per shard (default 10000)"), .option("page", "N", "devices per page (default 1000)"),
            .option("parallel", "N", "shards read at once (default 2)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let (app, store, expression) = try await SegmentInput.open(arguments, context)
        let shardSize = try arguments.int("shard-size", default: 10_000, range: 1...10_000_000)
        let pageSize = try arguments.int("page", default: 1000, range: 1...100_000)
        let parallel = try arguments.int("parallel", default: 2, range: 1...64)
        let started = ContinuousClock.now
        let progress = ProgressLine()
        var devices = 0
        var checksum: Int64 = 0
        var scannedShards = 0
        var foundShards = 0
        // Each shard is scanned as soon as its boundary is known, `parallel` at once, as
        // workers would scan them.
        let (found, foundShard) = AsyncThrowingStream<ShardRange, any Error>.makeStream()
        try await withThrowingTaskGroup(of: (devices: Int, checksum: Int64)?.self) { group in
            group.addTask {
                do {
                    _ = try await store.audience.shards(app: app, size: shardSize) { foundShard.yield($0) }
                    foundShard.finish()
                } catch {
                    foundShard.finish(throwing: error)
                }
                return nil
            }
            func scan(_ shard: ShardRange) async throws -> (devices: Int, checksum: Int64) {
                var devices = 0
                var checksum: Int64 = 0
                var cursor: Int64?
                while true {
                    let page = try await store.audience.page(app: app, segment: expression, shard: shard, cursor: cursor, limit: pageSize, now: store.clock.wallMillis)
                    devices += page.count
                    // Touch what the pipeline would use, so the work is not optimised away.
                    for target in page { checksum &+= target.rowKey &+ Int64(target.token.utf8.count) }
                    guard page.count == pageSize, let last = page.last else { return (devices, checksum) }
                    cursor = last.rowKey
                }
            }
            var scanning = 0
            func collect(_ result: (devices: Int, checksum: Int64)?) {
                guard let result else { return }  // the boundary search ended
                scanning -= 1
                scannedShards += 1
                devices += result.devices
                checksum &+= result.checksum
                progress.show("\(scannedShards) of \(foundShards) shards found so far: \(devices) devices")
            }
            for try await shard in found {
                foundShards += 1
                while scanning >= parallel, let result = try await group.next() { collect(result) }
                group.addTask { try await scan(shard) }
                scanning += 1
            }
            for try await result in group { collect(result) }
        }
        progress.finish()
        let seconds = (ContinuousClock.now - started).seconds
        print(#"{"devices":\#(devices),"shards":\#(foundShards),"seconds":\#(String(format: "%.3f", seconds)),"per_s":\#(Int(Double(devices) / max(seconds, 1e-9))),"checksum":\#(checksum)}"#)
        return 0
    }
}
