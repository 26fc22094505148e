import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanWorker
import Testing

/// A worker's view of operators' commands against a real SQLite store, whose file another
/// process holds locked: a cancel or pause stops the campaign's batches as soon as its
/// record is read, not once the store's write gets through.
@Suite(.timeLimit(.minutes(2)))
struct CampaignControlsTests {
    struct Fixture {
        let store: DeviceStore
        let path: String
        let controls: CampaignControls
        /// The worker's writer of control records to the store, as `Worker` runs it.
        let writer: Task<Void, Never>
        let logged = Locked<[String]>([])

        /// `refreshInterval` zero: every `refresh` reads the store, as after a second's wait.
        /// `options` go on the store's address (`?busy_timeout_ms=`).
        init(refreshInterval: Duration = .seconds(1), options: String = "") async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-controls-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            path = directory.appendingPathComponent("store.db").path
            store = try await DeviceStore.open("sqlite:" + path + options, logger: Logger(label: "test", threshold: .error), clock: SystemClock())
            _ = try await store.apps.add(AppRegistration(
                app: "shop", topic: "com.example.shop", credentials: .token(teamID: "TEAM000001", keyID: "KEY0000001", keyFile: "/k.p8"), ratePerSecond: 100))
            let logged = logged
            controls = CampaignControls(
                store: store, logger: Logger(label: "test", threshold: .warning) { line in logged.withLock { $0.append(line) } },
                clock: store.clock, refreshInterval: refreshInterval)
            let stop = StopSignal(clock: store.clock)
            writer = Task { [controls] in await controls.runWrites(until: stop) }
        }

        /// Ends the writer once every record read is written.
        func finish() async {
            controls.finishReading()
            await writer.value
        }

        func stored(_ id: String) async throws -> CampaignStatus? {
            try await store.campaigns.get(CampaignKey(app: "shop", id: id))?.status
        }

        /// A campaign in `status` that this worker has read, as a sending task does.
        func campaign(_ id: String, _ status: CampaignStatus) async throws {
            let key = CampaignKey(app: "shop", id: id)
            #expect(try await store.campaigns.record(key, audience: 10, shards: 1, status: status, now: store.clock.wallMillis))
            #expect(try await controls.refresh(key) == status)
        }

        /// `sqlite3` holding the store's write lock until `release`.
        func lock() async throws -> ManagedProcess {
            let locker = try ManagedProcess("sqlite3", [path], name: "sqlite3")
            locker.send(".timeout 10000")
            locker.send("BEGIN EXCLUSIVE;")
            locker.send("SELECT 'locked';")
            #expect(await locker.waitForOutput(timeout: .seconds(15)) { $0.contains("locked") } != nil, "sqlite3 could not lock: \(locker.standardError)")
            return locker
        }

        func release(_ locker: ManagedProcess) async {
            locker.send("COMMIT;")
            locker.closeInput()
            _ = await locker.waitForExit()
        }
    }

    static var nowMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1_000) }

    /// The campaign the tests command: "c" of app "shop".
    static let c = CampaignKey(app: "shop", id: "c")

    static func record(_ action: ControlRecord.Action) -> ControlRecord {
        ControlRecord(campaign: c, action: action, at: nowMillis)
    }

    static func eventually(_ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await !condition() {
            if ContinuousClock.now > deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    @Test("cancel and pause stop a running campaign's batches while the store is locked; the store records the command once it is free")
    func stopBeforeTheStoreAnswers() async throws {
        for action in [ControlRecord.Action.cancel, .pause] {
            let fixture = try await Fixture(refreshInterval: .zero)
            try await fixture.campaign("c", .running)
            #expect(fixture.controls.statusStopping(batchOf: Self.c) == nil, "a running campaign's batch may start")

            let locker = try await fixture.lock()
            fixture.controls.read(Self.record(action))
            let expected = action.target()
            #expect(await Self.eventually { fixture.controls.statusStopping(batchOf: Self.c) == expected }, "\(action) did not stop the batches")
            // A task's refresh reads the store (readable beside the lock), which still says
            // running, so the write has not landed: what the record said stands.
            #expect(try await fixture.stored("c") == .running)
            #expect(try await fixture.controls.refresh(Self.c) == expected)

            await fixture.release(locker)
            #expect(try await Self.eventually { try await fixture.stored("c") == expected }, "the store never recorded \(action)")
            #expect(fixture.controls.statusStopping(batchOf: Self.c) == expected)
            await fixture.finish()
        }
    }

    @Test("a cancel whose store write fails is obeyed meanwhile and written once the store is back, so a record produced straight onto the topic is not lost")
    func failedWriteIsRetried() async throws {
        // Each write gives up after about 0.3 s of a held lock (0.1 s, retried twice).
        let fixture = try await Fixture(refreshInterval: .zero, options: "?busy_timeout_ms=100")
        try await fixture.campaign("c", .running)
        let locker = try await fixture.lock()
        fixture.controls.read(Self.record(.cancel))
        let failed = await Self.eventually { fixture.logged.withLock { $0.contains { $0.contains("event=control.store_unavailable") } } }
        #expect(failed, "no write failed while the lock was held: the test proves nothing")
        #expect(fixture.logged.withLock { $0.first { $0.contains("control.store_unavailable") } ?? "" }.contains("retry_in_ms="))
        // The store still says running; this worker keeps to the record.
        #expect(try await fixture.stored("c") == .running)
        #expect(try await fixture.controls.refresh(Self.c) == .cancelled)
        #expect(fixture.controls.statusStopping(batchOf: Self.c) == .cancelled)

        await fixture.release(locker)
        #expect(try await Self.eventually { try await fixture.stored("c") == .cancelled }, "the cancel never reached the store")
        #expect(try await fixture.controls.refresh(Self.c) == .cancelled)
        await fixture.finish()
    }

    @Test("a resume waits for the store: a paused campaign sends nothing until the store has it running")
    func resumeWaitsForTheStore() async throws {
        let fixture = try await Fixture()
        try await fixture.campaign("c", .running)
        fixture.controls.read(Self.record(.pause))
        #expect(try await Self.eventually { try await fixture.stored("c") == .paused })
        #expect(fixture.controls.statusStopping(batchOf: Self.c) == .paused)

        let locker = try await fixture.lock()
        fixture.controls.read(Self.record(.resume))
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await fixture.stored("c") == .paused, "the store answered through a held lock: the test proves nothing")
        #expect(fixture.controls.statusStopping(batchOf: Self.c) == .paused, "resumed before the store said so")

        await fixture.release(locker)
        #expect(await Self.eventually { fixture.controls.statusStopping(batchOf: Self.c) == nil }, "never resumed")
        #expect(try await fixture.stored("c") == .running)
        await fixture.finish()
    }

    @Test("a pause of a campaign the store has as cancelled is refused: the worker's view takes the store's status, not the pause")
    func refusedCommandTakesTheStoresStatus() async throws {
        let fixture = try await Fixture()
        try await fixture.campaign("c", .running)
        // Another worker or the API cancelled it; this worker has not read that record yet.
        #expect(try await fixture.store.campaigns.control(Self.c, .cancel, now: fixture.store.clock.wallMillis) == .move(from: .running, to: .cancelled))
        fixture.controls.read(Self.record(.pause))
        await fixture.finish()
        #expect(fixture.controls.current(Self.c) == .cancelled)
        #expect(fixture.controls.statusStopping(batchOf: Self.c) == .cancelled)
    }
}
