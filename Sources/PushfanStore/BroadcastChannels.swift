import PushfanAPNsModel
import PushfanMessages

/// Apps' broadcast channels (iOS 18), as APNs made them: kept so that the API can list
/// them and a campaign addressed to one can be checked against its app. APNs holds the
/// channel itself; a row is written after APNs created it and removed after APNs deleted it.
package struct BroadcastChannels: Sendable {
    let executor: StoreExecutor

    package struct Row: Sendable, Equatable {
        package let app: String
        package let id: String
        package let environment: APNsEnvironment
        package let policy: BroadcastChannel.StoragePolicy
        package let createdAt: Int64

        package init(app: String, id: String, environment: APNsEnvironment, policy: BroadcastChannel.StoragePolicy, createdAt: Int64) {
            (self.app, self.id, self.environment, self.policy, self.createdAt) = (app, id, environment, policy, createdAt)
        }
    }

    package func add(_ row: Row) async throws(StoreError) {
        try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                try StoreExecutor.requireApp(connection, row.app)
                try connection.execute("""
                    INSERT INTO broadcast_channels (app, channel_id, environment, storage_policy, created_at)
                    VALUES (\(row.app), \(row.id), \(row.environment.rawValue), \(row.policy.name), \(row.createdAt))
                    ON CONFLICT (app, channel_id) DO NOTHING
                    """)
            }
        }
    }

    /// The app's channel of that id; nil when the app has none (another app's id included).
    package func get(app: String, id: String) async throws(StoreError) -> Row? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("""
                SELECT channel_id, environment, storage_policy, created_at FROM broadcast_channels WHERE app = \(app) AND channel_id = \(id)
                """) { Self.row(app: app, $0) }.flatMap { $0 }
        }
    }

    /// Every channel of the app, oldest first.
    package func list(app: String) async throws(StoreError) -> [Row] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("""
                SELECT channel_id, environment, storage_policy, created_at FROM broadcast_channels WHERE app = \(app) ORDER BY created_at, channel_id
                """) { Self.row(app: app, $0) }.compactMap { $0 }
        }
    }

    /// True when the app had it.
    package func remove(app: String, id: String) async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.execute("DELETE FROM broadcast_channels WHERE app = \(app) AND channel_id = \(id)") == 1
        }
    }

    private static func row(app: String, _ cursor: any SQLRow) -> Row? {
        guard let id = cursor.text(0), let environment = cursor.text(1).flatMap(APNsEnvironment.init(rawValue:)),
              let policy = cursor.text(2).flatMap(BroadcastChannel.StoragePolicy.init(name:))
        else { return nil }
        return Row(app: app, id: id, environment: environment, policy: policy, createdAt: cursor.int(3) ?? 0)
    }
}
