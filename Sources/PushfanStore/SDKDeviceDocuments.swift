import PushfanCore

/// Devices as a client SDK describes them (the Notificare-compatible calls): one JSON
/// document per app and device id, kept as the SDK last wrote it so its reads (tags, user
/// data, do-not-disturb) answer in its own terms, also for a temporary device that has no
/// APNs token yet. The device rows campaigns reach are derived from these by the API.
package struct SDKDeviceDocuments: Sendable {
    let executor: StoreExecutor

    package func get(app: String, deviceID: String) async throws(StoreError) -> String? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT document FROM sdk_devices WHERE app = \(app) AND device_id = \(deviceID)") { $0.text(0) }.flatMap { $0 }
        }
    }

    package func put(app: String, deviceID: String, document: String, now: Int64 = DeviceStore.now()) async throws(StoreError) {
        try await executor.run { connection throws(StoreError) in
            try StoreExecutor.requireApp(connection, app)
            try connection.execute("""
                INSERT INTO sdk_devices (app, device_id, document, updated_at) VALUES (\(app), \(deviceID), \(document), \(now))
                ON CONFLICT (app, device_id) DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at
                """)
        }
    }

    /// Whether any of the app's devices registered through the SDK's calls: its pushes then
    /// carry what that SDK looks for (`NotificareMarker`).
    package func any(app: String) async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT 1 FROM sdk_devices WHERE app = \(app) LIMIT 1") { _ in true } ?? false
        }
    }

    /// True when there was one.
    package func delete(app: String, deviceID: String) async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.execute("DELETE FROM sdk_devices WHERE app = \(app) AND device_id = \(deviceID)") == 1
        }
    }
}
