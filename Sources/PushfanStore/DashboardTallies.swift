import Foundation
import PushfanMessages

/// The live dashboard's aggregates, kept so that a restarted API goes on from where it was:
/// per results-topic partition, the next offset to read and each campaign's tally of the
/// records before it, written together in one transaction so they always agree; and the
/// latest dead letters. Any of it can be dropped (`clear`) and rebuilt from the topics.
package struct DashboardTallies: Sendable {
    let executor: StoreExecutor

    /// Dead letters kept for the dashboard.
    package static let deadLettersKept = 100

    /// What one partition's reader has counted up to `nextOffset`.
    package struct PartitionProgress: Sendable {
        package var topic: String
        package var partition: Int
        package var nextOffset: Int64
        /// Tallies changed since the last save, by campaign.
        package var tallies: [String: CampaignTally] = [:]
        /// Dead letters read since the last save.
        package var deadLetters: [DashboardSnapshot.DeadLetter] = []

        package init(topic: String, partition: Int, nextOffset: Int64) {
            (self.topic, self.partition, self.nextOffset) = (topic, partition, nextOffset)
        }
    }

    /// The saved next offset of each of these partitions that has one. For the consumer's
    /// rebalance callback, which runs on a thread of its own.
    package func nextOffsets(_ partitions: [(topic: String, partition: Int)]) throws(StoreError) -> [String: [Int: Int64]] {
        try executor.runBlocking { connection throws(StoreError) in
            var offsets: [String: [Int: Int64]] = [:]
            for (topic, partition) in partitions {
                if let next = try connection.queryOne(
                    "SELECT next_offset FROM dashboard_offsets WHERE topic = \(topic) AND kafka_partition = \(partition)", { $0.int(0) }), let next {
                    offsets[topic, default: [:]][partition] = next
                }
            }
            return offsets
        }
    }

    /// The saved tallies of these campaigns on one partition.
    package func tallies(topic: String, partition: Int, campaigns: [String]) async throws(StoreError) -> [String: CampaignTally] {
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            var found: [String: CampaignTally] = [:]
            for chunk in StoreExecutor.chunks(campaigns) {
                let list = backend.isIn(chunk.map(SQLValue.text), type: "text")
                try connection.query("SELECT campaign, tally FROM dashboard_tallies WHERE topic = \(topic) AND kafka_partition = \(partition) AND campaign" + list) { row throws(StoreError) in
                    found[row.text(0) ?? ""] = try Self.decode(row.text(1))
                }
            }
            return found
        }
    }

    /// Saves what partitions' readers counted, each partition's tallies with its offset.
    package func save(_ progress: [PartitionProgress], now: Int64) async throws(StoreError) {
        try await executor.run { connection throws(StoreError) in try Self.save(progress, connection, now: now) }
    }

    /// `save`, from a thread of its own (the consumer's rebalance callback).
    package func saveBlocking(_ progress: [PartitionProgress], now: Int64) throws(StoreError) {
        try executor.runBlocking { connection throws(StoreError) in try Self.save(progress, connection, now: now) }
    }

    private static func save(_ progress: [PartitionProgress], _ connection: any SQLConnection, now: Int64) throws(StoreError) {
        try connection.transaction { () throws(StoreError) in
            for part in progress {
                try connection.execute("""
                    INSERT INTO dashboard_offsets (topic, kafka_partition, next_offset) VALUES (\(part.topic), \(part.partition), \(part.nextOffset))
                    ON CONFLICT (topic, kafka_partition) DO UPDATE SET next_offset = excluded.next_offset
                    """)
                for (campaign, tally) in part.tallies {
                    let updated = tally.lastAt ?? now
                    try connection.execute("""
                        INSERT INTO dashboard_tallies (topic, kafka_partition, campaign, tally) VALUES (\(part.topic), \(part.partition), \(campaign), \(try encode(tally)))
                        ON CONFLICT (topic, kafka_partition, campaign) DO UPDATE SET tally = excluded.tally
                        """)
                    try connection.execute("""
                        INSERT INTO dashboard_campaigns (campaign, updated_at, saved_at) VALUES (\(campaign), \(updated), \(now))
                        ON CONFLICT (campaign) DO UPDATE SET saved_at = excluded.saved_at, updated_at = CASE
                            WHEN excluded.updated_at > dashboard_campaigns.updated_at THEN excluded.updated_at ELSE dashboard_campaigns.updated_at END
                        """)
                }
                for letter in part.deadLetters {
                    try connection.execute("""
                        INSERT INTO dashboard_dead_letters (topic, kafka_partition, kafka_offset, record, at)
                        VALUES (\(letter.topic), \(letter.partition), \(letter.offset), \(try encode(letter)), \(letter.at))
                        ON CONFLICT (topic, kafka_partition, kafka_offset) DO NOTHING
                        """)
                }
            }
            if progress.contains(where: { !$0.deadLetters.isEmpty }) {
                try connection.execute("""
                    DELETE FROM dashboard_dead_letters WHERE at < (SELECT MIN(at) FROM
                        (SELECT at FROM dashboard_dead_letters ORDER BY at DESC LIMIT \(deadLettersKept)) AS kept)
                    """)
            }
        }
    }

    /// The most recently active campaigns, most recent first, each with when its tallies
    /// were last saved (a reader re-reads only those saved since it last looked).
    package func recentCampaigns(limit: Int) async throws(StoreError) -> [(campaign: String, savedAt: Int64)] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("SELECT campaign, saved_at FROM dashboard_campaigns ORDER BY updated_at DESC, campaign LIMIT \(limit)") { row in
                (row.text(0) ?? "", row.int(1) ?? 0)
            }
        }
    }

    /// These campaigns' tallies, every partition's merged.
    package func merged(_ campaigns: [String]) async throws(StoreError) -> [String: CampaignTally] {
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            var merged: [String: CampaignTally] = [:]
            for chunk in StoreExecutor.chunks(campaigns) {
                try connection.query("SELECT campaign, tally FROM dashboard_tallies WHERE campaign" + backend.isIn(chunk.map(SQLValue.text), type: "text")) { row throws(StoreError) in
                    merged[row.text(0) ?? "", default: CampaignTally()].merge(try Self.decode(row.text(1)))
                }
            }
            return merged
        }
    }

    /// The latest dead letters, newest first.
    package func deadLetters(limit: Int) async throws(StoreError) -> [DashboardSnapshot.DeadLetter] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("SELECT record FROM dashboard_dead_letters ORDER BY at DESC, kafka_offset DESC LIMIT \(limit)") { row throws(StoreError) in
                try Self.decode(row.text(0))
            }
        }
    }

    /// Forgets everything, so the next reader counts the topics again from their start.
    package func clear() async throws(StoreError) {
        try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                for table in ["dashboard_offsets", "dashboard_tallies", "dashboard_campaigns", "dashboard_dead_letters"] {
                    _ = try connection.execute("DELETE FROM \(raw: table)")
                }
            }
        }
    }

    private static func encode(_ value: some Encodable) throws(StoreError) -> String {
        do { return String(decoding: try JSONEncoder().encode(value), as: UTF8.self) } catch {
            throw StoreError.database("cannot encode a dashboard row: \(error)")
        }
    }

    private static func decode<T: Decodable>(_ text: String?) throws(StoreError) -> T {
        do { return try JSONDecoder().decode(T.self, from: Data((text ?? "").utf8)) } catch {
            throw StoreError.database("a dashboard row cannot be read (\(error)); `pushfan api --dashboard-rebuild` counts again from the topics")
        }
    }
}
