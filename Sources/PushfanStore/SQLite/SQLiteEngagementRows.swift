import PushfanMessages

/// SQLite's half of `EngagementRows`: statements prepared once per connection, one row bound
/// at a time in nearly the key's order (`KeyOrder`), whether a row went in read from the
/// change count. The set-based statements' text, their thousands of parameters and their
/// RETURNING rows cost SQLite's own B-tree work twice over (scripts/bench-events: 31 ms per
/// 5,000 events before, the B-trees alone 11 ms).
enum SQLiteEngagementRows {
    static func insertAbsentEvents(_ connection: SQLiteConnection, _ events: [EngagementEvent], now: Int64) throws(StoreError) -> [Bool] {
        let insert = try connection.pinned("""
            INSERT INTO engagement_events (app, id, campaign, kind, at, counted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            ON CONFLICT (app, id) DO NOTHING
            """)
        try insert.bind(6, now)
        let order = KeyOrder.indices(events, group: \.app, by: <, text: \.id)
        return try inOrder(events, order) { event throws(StoreError) -> Bool in
            try insert.bind(1, event.app)
            try insert.bind(2, event.id)
            try insert.bind(3, event.campaignKey?.stored)
            try insert.bind(4, event.kind.rawValue)
            try insert.bind(5, event.at)
            try insert.run()
            return connection.changes == 1
        }
    }

    /// In the key's order: integers, so sorting them outright is cheap.
    static func insertAbsentGroupDevices(_ connection: SQLiteConnection, _ devices: [EngagementRows.GroupDevice]) throws(StoreError) -> [Bool] {
        let insert = try connection.pinned("""
            INSERT INTO engagement_group_devices (group_id, row_key) VALUES (?1, ?2) ON CONFLICT (group_id, row_key) DO NOTHING
            """)
        let order = devices.indices.sorted { (devices[$0].group, devices[$0].rowKey, $0) < (devices[$1].group, devices[$1].rowKey, $1) }
        return try inOrder(devices, order) { device throws(StoreError) -> Bool in
            try insert.bind(1, device.group)
            try insert.bind(2, device.rowKey)
            try insert.run()
            return connection.changes == 1
        }
    }

    /// `insert` of each item in `order`, its results in the items' order.
    private static func inOrder<Item>(_ items: [Item], _ order: [Int], _ insert: (Item) throws(StoreError) -> Bool) throws(StoreError) -> [Bool] {
        var results = [Bool](repeating: false, count: items.count)
        for index in order { results[index] = try insert(items[index]) }
        return results
    }

    /// A row-id lookup each: cheaper than one statement listing thousands of keys.
    static func liveDevices(_ connection: SQLiteConnection, _ rowKeys: [Int64]) throws(StoreError) -> [Int64: String] {
        let lookup = try connection.pinned("SELECT device_id FROM devices WHERE row_key = ?1")
        var live: [Int64: String] = [:]
        for rowKey in rowKeys.sorted() {
            try lookup.bind(1, rowKey)
            try lookup.run { row in live[rowKey] = row.text(0) }
        }
        return live
    }

    static func knownDevices(_ connection: SQLiteConnection, app: String, _ ids: [String]) throws(StoreError) -> [String: Int64] {
        let lookup = try connection.pinned("SELECT row_key FROM devices WHERE app = ?1 AND device_id = ?2")
        try lookup.bind(1, app)
        var known: [String: Int64] = [:]
        for id in ids {
            try lookup.bind(2, id)
            try lookup.run { row in known[id] = row.int(0) }
        }
        return known
    }
}

/// The order a poll's rows go into their B-tree: close to their key's order, so that random
/// keys reach the key's pages mostly in order instead of at random again and again
/// (counting 20,000 events inserts 25-30 % faster in key order). Only close: a key's group
/// (an event id's app) in full, then 8 bytes of its text from where
/// the poll's texts first differ, as one integer; sorting the keys themselves cost more than
/// it saved. Groups are ordered as Swift orders strings, which differs from SQLite's byte
/// order only for text that is not ASCII, and only in speed.
enum KeyOrder {
    static func indices<Item, Group: Hashable>(
        _ items: [Item], group: (Item) -> Group, by precedes: (Group, Group) -> Bool, text: (Item) -> String
    ) -> [Int] {
        let groups = items.map(group)
        let ranks = Dictionary(uniqueKeysWithValues: Set(groups).sorted(by: precedes).enumerated().map { ($1, $0) })
        let texts = items.map(text)
        let skip = commonPrefix(texts)
        let keys = zip(groups, texts).map { (ranks[$0]!, eightBytes($1, from: skip)) }
        return items.indices.sorted { (keys[$0].0, keys[$0].1, $0) < (keys[$1].0, keys[$1].1, $1) }
    }

    /// How many leading UTF-8 bytes all `texts` share.
    static func commonPrefix(_ texts: [String]) -> Int {
        guard var first = texts.first else { return 0 }
        return first.withUTF8 { head in
            var length = head.count
            for var text in texts.dropFirst() where length > 0 {
                length = text.withUTF8 { bytes in
                    var same = 0
                    while same < min(length, bytes.count), bytes[same] == head[same] { same += 1 }
                    return same
                }
            }
            return length
        }
    }

    /// Bytes `offset..<offset + 8` of `text` (zero past its end), big-endian: their order is
    /// the bytes' order.
    static func eightBytes(_ text: String, from offset: Int) -> UInt64 {
        var text = text
        return text.withUTF8 { bytes in
            var value: UInt64 = 0
            for position in offset..<(offset + 8) { value = value << 8 | UInt64(position < bytes.count ? bytes[position] : 0) }
            return value
        }
    }
}
