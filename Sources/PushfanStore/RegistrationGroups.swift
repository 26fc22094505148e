import PushfanCore

/// Group commit for single-device registrations. Registrations that arrive while one group
/// is being written wait and go together in the next transaction, on the first connection:
/// one commit (and one write lock) per group instead of per device, and no two connections
/// contending for SQLite's single writer. Measured with 64 clients registering over the
/// API (scripts/bench-api), one transaction per registration left the 99th percentile near
/// 100 ms while the median was under 10; the waits were writers taking turns at the lock.
///
/// Each registration inside a group is the same statements it would be alone, in arrival
/// order, so a device registered twice in one group ends as the later call says. When a
/// group's transaction fails (an unknown app, a constraint), every registration in it runs
/// again in a transaction of its own, so one bad call never fails its neighbours.
final class RegistrationGroups: Sendable {
    private struct Waiting {
        let app: String
        let device: ValidatedDevice
        let continuation: CheckedContinuation<Result<RegistrationResult, StoreError>, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var writing = false
    }

    /// Most registrations per transaction: keeps the write lock short for other processes.
    static let largestGroup = 128

    private let executor: StoreExecutor
    private let state = Locked(State())

    init(executor: StoreExecutor) {
        self.executor = executor
    }

    func register(app: String, _ device: ValidatedDevice) async throws(StoreError) -> RegistrationResult {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<RegistrationResult, StoreError>, Never>) in
            let startWriter = state.withLock { state in
                state.waiting.append(Waiting(app: app, device: device, continuation: continuation))
                guard !state.writing else { return false }
                state.writing = true
                return true
            }
            if startWriter { Task { await self.writeGroups() } }
        }
        return try result.get()
    }

    /// Writes groups until nobody is waiting.
    private func writeGroups() async {
        while true {
            let group: [Waiting] = state.withLock { state in
                let taken = Array(state.waiting.prefix(Self.largestGroup))
                state.waiting.removeFirst(taken.count)
                if taken.isEmpty { state.writing = false }
                return taken
            }
            if group.isEmpty { return }
            let results = await write(group)
            for (waiting, result) in zip(group, results) { waiting.continuation.resume(returning: result) }
        }
    }

    private func write(_ group: [Waiting]) async -> [Result<RegistrationResult, StoreError>] {
        let backend = executor.backend
        let now = executor.clock.wallMillis
        let items = group.map { ($0.app, $0.device) }
        do throws(StoreError) {
            return try await executor.run(lane: 0) { connection throws(StoreError) in
                if items.count > 1, let together = try? connection.transaction({ () throws(StoreError) in
                    // Each app once per group, not once per device.
                    for app in Set(items.map(\.0)) { try StoreExecutor.requireApp(connection, app) }
                    return try items.map { (app, device) throws(StoreError) in try Self.registerOne(connection, backend, app: app, device, now: now, appChecked: true) }
                }) {
                    return together.map { .success($0) }
                }
                return items.map { (app, device) in
                    do throws(StoreError) {
                        return .success(try connection.transaction { () throws(StoreError) in try Self.registerOne(connection, backend, app: app, device, now: now) })
                    } catch { return .failure(error) }
                }
            }
        } catch {
            return group.map { _ in .failure(error) }
        }
    }

    private static func registerOne(
        _ connection: any SQLConnection, _ backend: any SQLBackend, app: String, _ device: ValidatedDevice, now: Int64, appChecked: Bool = false
    ) throws(StoreError) -> RegistrationResult {
        if !appChecked { try StoreExecutor.requireApp(connection, app) }
        let existed = try connection.queryOne("SELECT 1 FROM devices WHERE app = \(app) AND device_id = \(device.deviceID)") { $0.int(0) } != nil
        let written = try backend.upsert(connection, app: app, devices: [device], now: now, returningRowKeys: true)
        guard let rowKey = written.rowKeys[device.deviceID] else { throw StoreError.database("upsert returned no row key") }
        try DeviceTokens.write(connection, app: app, devices: [device], rowKeys: written.rowKeys, now: now)
        return RegistrationResult(rowKey: rowKey, created: !existed, tokenMovedFrom: written.movedFrom[device.deviceID] ?? [])
    }
}
