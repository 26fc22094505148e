import PushfanMessages

/// Devices as a client SDK describes them (the Notificare-compatible calls): one JSON
/// document per app and device id, kept as the SDK last wrote it so its reads (tags, user
/// data, do-not-disturb) answer in its own terms, also for a temporary device that has no
/// APNs token yet. The device rows campaigns reach are derived from these by the API.
package struct SDKDeviceDocuments: Sendable {
    let executor: StoreExecutor
    /// What `any(app:)` answered lately, so a busy API does not ask the table per message:
    /// a yes for a minute, a no for a second (`any(app:)` says why).
    let recent: RecentReads<Bool>

    init(executor: StoreExecutor) {
        self.executor = executor
        recent = RecentReads(clock: executor.clock) { $0 ? .seconds(60) : .seconds(1) }
    }

    package func get(app: String, deviceID: String) async throws(StoreError) -> String? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT document FROM sdk_devices WHERE app = \(app) AND device_id = \(deviceID)") { $0.text(0) }.flatMap { $0 }
        }
    }

    /// `user`: the user the document names, if any (for a user's erasure and export, which
    /// find a temporary device by it: it has no device row).
    package func put(app: String, deviceID: String, document: String, user: String?, now: Int64) async throws(StoreError) {
        try await executor.run { connection throws(StoreError) in
            try StoreExecutor.requireApp(connection, app)
            try connection.execute("""
                INSERT INTO sdk_devices (app, device_id, document, user_id, updated_at) VALUES (\(app), \(deviceID), \(document), \(.optional(user)), \(now))
                ON CONFLICT (app, device_id) DO UPDATE SET document = excluded.document, user_id = excluded.user_id, updated_at = excluded.updated_at
                """)
        }
        recent.keep(app, true)
    }

    /// Whether any of the app's devices registered through the SDK's calls: its pushes then
    /// carry what that SDK looks for (`NotificareMarker`). A yes is kept for a minute: it
    /// turns into a no only when the app's last SDK device is deleted, and a stale yes only
    /// checks payloads against the SDK's keys too. A no is kept for a second, so a first SDK
    /// device registered through another API process counts within it (through this one, at once).
    package func any(app: String) async throws(StoreError) -> Bool {
        if let known = recent.fresh(app) { return known }
        let readAt = recent.now
        let any = try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT 1 FROM sdk_devices WHERE app = \(app) LIMIT 1") { _ in true } ?? false
        }
        recent.keep(app, any, readAt: readAt)
        return any
    }

    /// Whether a document names this user without a device row of the user behind it (it
    /// may be all that does: `onlyNaming`).
    package func names(app: String, user: String) async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT 1 FROM sdk_devices WHERE app = \(app) AND " + Self.onlyNaming(user) + " LIMIT 1") { _ in true } ?? false
        }
    }

    /// The documents that name `user` with no device row of that user behind them: a
    /// temporary device's (no APNs token yet, so no row), or one whose row has since been
    /// registered to another user through the native API. The user's own devices' documents
    /// go with their rows; these only the document ties to the user.
    static func onlyNaming(_ user: String) -> SQLStatement {
        """
        sdk_devices.user_id = \(user) AND NOT EXISTS (
            SELECT 1 FROM devices d WHERE d.app = sdk_devices.app AND d.device_id = sdk_devices.device_id AND \(userOf: "d") = \(user))
        """
    }

    /// True when there was one.
    package func delete(app: String, deviceID: String) async throws(StoreError) -> Bool {
        defer { recent.forget(app) }
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("DELETE FROM sdk_devices WHERE app = \(app) AND device_id = \(deviceID)") == 1
        }
    }
}
