import Foundation
import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport
@testable import PushfanWorker
import Testing

/// The sender's pages of a shard, against a real SQLite store: an explicit audience is read
/// by row key, so its cost is the list's size, not the app's.
@Suite(.timeLimit(.minutes(3)))
struct ShardPagesTests {
    static func freshStore() async throws -> DeviceStore {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-pages-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try await DeviceStore.open("sqlite:" + directory.appendingPathComponent("store.db").path, logger: Logger(label: "test", threshold: .error), clock: SystemClock())
        _ = try await store.apps.add(AppRegistration(
            app: "big", topic: "com.example.big", credentials: .token(teamID: "TEAM000001", keyID: "KEY0000001", keyFile: "/k.p8"), ratePerSecond: 1_000))
        return store
    }

    /// Shards as the planner cuts them from an explicit audience's row keys.
    static func tasks(for keys: [Int64], shards: Int, app: String) -> [TaskRecord] {
        let size = (keys.count + shards - 1) / shards
        var tasks: [TaskRecord] = []
        var after: Int64?
        for (index, start) in stride(from: 0, to: keys.count, by: size).enumerated() {
            let end = min(start + size, keys.count)
            tasks.append(TaskRecord(
                campaign: "listed", app: app, shard: index, shards: shards, after: after, through: keys[end - 1], estimate: end - start, lane: 0, lanes: 1))
            after = keys[end - 1]
        }
        return tasks
    }

    @Test("1,000 listed devices among 200,000: every one is read once, and only they are read")
    func explicitAudienceReadsItsDevicesOnly() async throws {
        let store = try await Self.freshStore()
        let count = 200_000
        var devices: [ValidatedDevice] = []
        devices.reserveCapacity(count)
        for index in 0..<count {
            devices.append(try Validation.device(DeviceRegistration(deviceID: "d-\(index)", token: String(format: "%064x", index + 1)), now: epochMillis(Date())))
        }
        for start in stride(from: 0, to: count, by: 50_000) {
            _ = try await store.devices.importDevices(app: "big", Array(devices[start..<start + 50_000]))
        }
        let listed = stride(from: 7, to: count, by: 200).map { "d-\($0)" }
        #expect(listed.count == 1_000)
        let campaign = Campaign(id: "listed", app: "big", audience: .devices(listed))
        let app = try #require(try await store.apps.get("big"))
        let keys = try await store.audience.rowKeys(app: "big", deviceIDs: listed, tokens: nil)
        let plan = CampaignPlan(campaign: campaign, app: app, segment: nil, rowKeys: keys)

        let before = store.audience.rowsRead
        var seen: [String] = []
        for task in Self.tasks(for: keys, shards: 16, app: "big") {
            var pages = ShardPages(store: store, plan: plan, task: task, pageSize: 64)
            while let page = try await pages.nextPage() {
                #expect(page.map(\.rowKey) == page.map(\.rowKey).sorted())
                seen += page.map(\.deviceID)
            }
        }
        #expect(seen.count == 1_000 && Set(seen) == Set(listed))
        #expect(store.audience.rowsRead - before == 1_000, "the store returned \(store.audience.rowsRead - before) rows")
    }

    @Test("a segment's shard is paged whole in row-key order, with the segment applied")
    func segmentPagesCoverTheShard() async throws {
        let store = try await Self.freshStore()
        var devices: [ValidatedDevice] = []
        for index in 0..<1_000 {
            var registration = DeviceRegistration(deviceID: "d-\(index)", token: String(format: "%064x", index + 1))
            registration.tags = index % 3 == 0 ? ["vip"] : []
            devices.append(try Validation.device(registration, now: epochMillis(Date())))
        }
        _ = try await store.devices.importDevices(app: "big", devices)
        let plan = CampaignPlan(
            campaign: Campaign(id: "seg", app: "big", audience: .segment("tag:vip")), app: try #require(try await store.apps.get("big")),
            segment: try SegmentParser.parse("tag:vip"), rowKeys: nil)
        let task = TaskRecord(campaign: "seg", app: "big", shard: 0, shards: 1, after: nil, through: nil, estimate: 334, lane: 0, lanes: 1)
        var pages = ShardPages(store: store, plan: plan, task: task, pageSize: 50)
        var seen: [DeviceTarget] = []
        while let page = try await pages.nextPage() { seen += page }
        #expect(seen.count == 334)
        #expect(seen.map(\.rowKey) == seen.map(\.rowKey).sorted())
        #expect(Set(seen.map(\.deviceID)) == Set(stride(from: 0, to: 1_000, by: 3).map { "d-\($0)" }))
    }
}
