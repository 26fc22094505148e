import PushfanMessages

/// Single-device registrations, written in groups (`GroupCommit`). Measured with 64 clients
/// registering over the API (scripts/bench-api), one transaction per registration left the
/// 99th percentile near 100 ms while the median was under 10; the waits were writers taking
/// turns at the lock.
enum DeviceRegistrations {
    static func groups(_ executor: StoreExecutor) -> GroupCommit<(app: String, device: ValidatedDevice), RegistrationResult> {
        GroupCommit(executor: executor) { connection, backend, items, now throws(StoreError) in
            // Each app once per group, not once per device.
            for app in Set(items.map(\.app)) { try StoreExecutor.requireApp(connection, app) }
            return try items.map { item throws(StoreError) in try register(connection, backend, app: item.app, item.device, now: now) }
        }
    }

    private static func register(
        _ connection: any SQLConnection, _ backend: any SQLBackend, app: String, _ device: ValidatedDevice, now: Int64
    ) throws(StoreError) -> RegistrationResult {
        let existed = try connection.queryOne("SELECT 1 FROM devices WHERE app = \(app) AND device_id = \(device.deviceID)") { $0.int(0) } != nil
        let written = try backend.upsert(connection, app: app, devices: [device], now: now, returningRowKeys: true)
        guard let rowKey = written.rowKeys[device.deviceID] else { throw StoreError.database("upsert returned no row key") }
        try DeviceTokens.write(connection, app: app, devices: [device], rowKeys: written.rowKeys, now: now)
        return RegistrationResult(rowKey: rowKey, created: !existed, tokenMovedFrom: written.movedFrom[device.deviceID] ?? [])
    }
}
