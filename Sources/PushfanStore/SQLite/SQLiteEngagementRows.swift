import PushfanMessages

/// SQLite's half of `EngagementRows`: statements prepared once per connection, one row bound
/// at a time, whether a row went in read from the change count. The set-based statements'
/// text, their thousands of parameters and their RETURNING rows cost SQLite's own B-tree
/// work twice over (scripts/bench-events: 31 ms per 5,000 events before, the B-trees alone
/// 11 ms).
enum SQLiteEngagementRows {
    static func insertAbsentEvents(_ connection: SQLiteConnection, _ events: [EngagementEvent], now: Int64) throws(StoreError) -> [Bool] {
        let insert = try connection.pinned("""
            INSERT INTO engagement_events (app, id, campaign, kind, at, counted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            ON CONFLICT (app, id) DO NOTHING
            """)
        try insert.bind(6, now)
        return try events.map { event throws(StoreError) -> Bool in
            try insert.bind(1, event.app)
            try insert.bind(2, event.id)
            try insert.bind(3, event.campaignKey?.stored)
            try insert.bind(4, event.kind.rawValue)
            try insert.bind(5, event.at)
            try insert.run()
            return connection.changes == 1
        }
    }

    static func insertAbsentDeviceLines(_ connection: SQLiteConnection, _ lines: [EngagementRows.Line]) throws(StoreError) -> [Bool] {
        let insert = try connection.pinned("""
            INSERT INTO engagement_devices (campaign, variant, kind, detail, device) VALUES (?1, ?2, ?3, ?4, ?5)
            ON CONFLICT (campaign, variant, kind, detail, device) DO NOTHING
            """)
        return try lines.map { line throws(StoreError) -> Bool in
            try insert.bind(1, line.group.campaign)
            try insert.bind(2, line.group.variant)
            try insert.bind(3, line.group.kind)
            try insert.bind(4, line.group.detail)
            try insert.bind(5, line.device)
            try insert.run()
            return connection.changes == 1
        }
    }

    static func knownDevices(_ connection: SQLiteConnection, app: String, _ ids: [String]) throws(StoreError) -> Set<String> {
        let lookup = try connection.pinned("SELECT 1 FROM devices WHERE app = ?1 AND device_id = ?2")
        try lookup.bind(1, app)
        var known: Set<String> = []
        for id in ids {
            try lookup.bind(2, id)
            var found = false
            try lookup.run { _ in found = true }
            if found { known.insert(id) }
        }
        return known
    }
}
