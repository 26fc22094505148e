import PushfanCore

/// Campaigns as the store keeps them: the definition as accepted, the audience size and
/// shard count, the lifecycle status, and the shards whose every device is final.
package struct CampaignRegistry: Sendable {
    let executor: StoreExecutor

    /// A campaign's row.
    package struct Row: Sendable, Equatable {
        package let id: String
        package let app: String
        package let status: CampaignStatus
        package let audience: Int
        package let shards: Int
    }

    /// Records a campaign once; false when its id was already known (the same id twice is
    /// one campaign).
    package func record(
        id: String, app: String, audience: Int, shards: Int, definition: String? = nil, status: CampaignStatus = .running,
        now: Int64 = DeviceStore.now()
    ) async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                INSERT INTO campaigns (id, app, status, audience, shards, definition, created_at, updated_at)
                VALUES (\(id), \(app), \(status.rawValue), \(audience), \(shards), \(.optional(definition)), \(now), \(now)) ON CONFLICT (id) DO NOTHING
                """) == 1
        }
    }

    /// The campaign as accepted (its JSON record), for senders that only got a task.
    package func definition(_ id: String) async throws(StoreError) -> String? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT definition FROM campaigns WHERE id = \(id)") { $0.text(0) }.flatMap { $0 }
        }
    }

    package func get(_ id: String) async throws(StoreError) -> Row? {
        let row = try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT id, app, status, audience, shards FROM campaigns WHERE id = \(id)") { row in
                (id: row.text(0) ?? "", app: row.text(1) ?? "", status: row.text(2) ?? "", audience: Int(row.int(3) ?? 0), shards: Int(row.int(4) ?? 0))
            }
        }
        guard let row else { return nil }
        guard let status = CampaignStatus(rawValue: row.status) else {
            throw StoreError.database("campaign \(id) has the unknown status '\(row.status)'")
        }
        return Row(id: row.id, app: row.app, status: status, audience: row.audience, shards: row.shards)
    }

    /// Moves a campaign from `from` to `to`; true for the one caller that made the change,
    /// so exactly one worker announces a campaign's completion. A step the lifecycle does not
    /// allow is refused before the database is asked.
    package func transition(_ id: String, from: CampaignStatus, to: CampaignStatus, now: Int64 = DeviceStore.now()) async throws(StoreError) -> Bool {
        guard from.canMove(to: to) else { throw StoreError.invalidInput("a campaign cannot go from \(from.rawValue) to \(to.rawValue)") }
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE campaigns SET status = \(to.rawValue), updated_at = \(now) WHERE id = \(id) AND status = \(from.rawValue)") == 1
        }
    }

    /// Marks one task (shard) of a campaign finished; returns how many of its shards are
    /// finished now. Idempotent: a task processed twice counts once. Finishers of one
    /// campaign take turns (`SQLBackend.lockCampaign`), so the last one counts every shard.
    package func finishTask(campaign: String, shard: Int, now: Int64 = DeviceStore.now()) async throws(StoreError) -> Int {
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                try backend.lockCampaign(connection, campaign)
                try connection.execute("""
                    INSERT INTO campaign_tasks (campaign, shard, finished_at) VALUES (\(campaign), \(shard), \(now))
                    ON CONFLICT (campaign, shard) DO NOTHING
                    """)
                let count: Int64?? = try connection.queryOne("SELECT COUNT(*) FROM campaign_tasks WHERE campaign = \(campaign)") { $0.int(0) }
                return Int((count ?? nil) ?? 0)
            }
        }
    }
}
