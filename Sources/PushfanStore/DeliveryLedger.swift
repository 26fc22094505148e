import PushfanMessages
import PushfanSupport

/// The delivery ledger: one row per (campaign, device). A row is either claimed (leased to
/// the worker sending it) or final with its outcome, and a final row is never overwritten,
/// which is what makes each device end with exactly one outcome through crashes.
package struct DeliveryLedger: Sendable {
    let executor: StoreExecutor

    /// The result of claiming a page.
    package struct Claim: Sendable, Equatable {
        /// Devices this owner must send now: newly claimed, already its own, or taken over
        /// from an owner whose lease ran out.
        package let toSend: [DeviceTarget]
        /// Devices of the page with a final outcome already (nothing to do).
        package let alreadyFinal: Int
        /// Devices claimed by another owner whose lease has not run out (retry later).
        package let heldElsewhere: Int
        /// When the claims on `toSend` run out (wall ms): no request may start after it.
        package let leaseUntil: Int64
        /// Devices of `toSend` that the app's frequency caps hold back (with `admitting`).
        package var capped: Set<Int64> = []
    }

    /// Claims a page's devices for a campaign: insert-if-absent, so re-processing a page
    /// after a crash never claims a device that already has its final outcome. A claim is
    /// leased to `owner`; after `lease` another owner may take it over. `admitting`: the
    /// claimed devices among its candidates are admitted under the app's frequency caps in
    /// the same transaction (`FrequencyLedger`), one store call per page instead of two.
    package func claim(
        campaign: CampaignKey, targets: [DeviceTarget], owner: String, lease: Duration = .seconds(60), now: Int64,
        admitting admission: FrequencyLedger.Admission? = nil
    ) async throws(StoreError) -> Claim {
        let leaseUntil = now + lease.milliseconds
        guard let low = targets.map(\.rowKey).min(), let high = targets.map(\.rowKey).max() else {
            return Claim(toSend: [], alreadyFinal: 0, heldElsewhere: 0, leaseUntil: leaseUntil)
        }
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Claim in
                var claim = try Self.claim(connection, backend, campaign: campaign, targets: targets, owner: owner, leaseUntil: leaseUntil, now: now, low: low, high: high)
                if let admission {
                    let candidates = claim.toSend.compactMap { target in
                        admission.candidates[target.rowKey].map { FrequencyLedger.Candidate(rowKey: target.rowKey, zone: $0) }
                    }
                    claim.capped = try FrequencyLedger.admit(connection, backend, app: admission.app, campaign: campaign, candidates, caps: admission.caps, now: now)
                }
                return claim
            }
        }
    }

    /// Inside the caller's transaction: the claim itself.
    private static func claim(
        _ connection: any SQLConnection, _ backend: any SQLBackend, campaign: CampaignKey, targets: [DeviceTarget], owner: String, leaseUntil: Int64, now: Int64,
        low: Int64, high: Int64
    ) throws(StoreError) -> Claim {
        var inserted = 0
        // Set-based: one statement per chunk, not one per device (the worker's hot path).
        for chunk in StoreExecutor.chunks(targets) {
            var insert: SQLStatement = "INSERT INTO deliveries (campaign, row_key, device_id, state, attempts, claimed_by, lease_until, claimed_at)"
            insert.append(backend.claimRows(campaign: campaign, chunk, owner: owner, leaseUntil: leaseUntil, now: now))
            insert.append(" ON CONFLICT (campaign, row_key) DO NOTHING")
            inserted += try connection.execute(insert)
        }
        // The usual case, a page seen for the first time: every device is new and ours.
        if inserted == targets.count { return Claim(toSend: targets, alreadyFinal: 0, heldElsewhere: 0, leaseUntil: leaseUntil) }
        // Only the page's own devices: its key range also holds other waves' and holds'
        // devices, whose stale claims are their own tasks' to take back.
        for chunk in StoreExecutor.chunks(targets.map(\.rowKey).sorted()) {
            var update: SQLStatement = """
                UPDATE deliveries SET claimed_by = \(owner), lease_until = \(leaseUntil)
                WHERE campaign = \(campaign) AND state = 'claimed' AND (claimed_by = \(owner) OR lease_until < \(now)) AND row_key
                """
            update.append(backend.isIn(chunk.map(SQLValue.integer), type: "bigint"))
            try connection.execute(update)
        }
        var mine = Set<Int64>()
        var final = 0, elsewhere = 0
        let wanted = Set(targets.map(\.rowKey))
        try connection.query("""
            SELECT row_key, state, claimed_by FROM deliveries
            WHERE campaign = \(campaign) AND row_key >= \(low) AND row_key <= \(high)
            """) { row throws(StoreError) in
            let key = row.int(0) ?? 0
            guard wanted.contains(key) else { return }
            if row.text(1) != LedgerState.claimed.rawValue {
                final += 1
            } else if row.text(2) == owner {
                mine.insert(key)
            } else {
                elsewhere += 1
            }
        }
        return Claim(toSend: targets.filter { mine.contains($0.rowKey) }, alreadyFinal: final, heldElsewhere: elsewhere, leaseUntil: leaseUntil)
    }

    /// Extends this owner's claims on `rowKeys` to `now + lease`; returns the keys that are
    /// still its own (claimed by it, not final), now renewed. A claim whose lease ran out is
    /// renewed too if no other owner took it over meanwhile: the row says who holds it, and a
    /// takeover and a renewal of one row go one after the other.
    package func renew(campaign: CampaignKey, owner: String, rowKeys: [Int64], lease: Duration, now: Int64) async throws(StoreError) -> Set<Int64> {
        guard !rowKeys.isEmpty else { return [] }
        let leaseUntil = now + lease.milliseconds
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Set<Int64> in
                var kept = Set<Int64>()
                // In key order, as claims lock their rows: two writers never wait on each other in a cycle.
                for chunk in StoreExecutor.chunks(rowKeys.sorted()) {
                    let keys = chunk.map { SQLValue.integer($0) }
                    var update: SQLStatement = """
                        UPDATE deliveries SET lease_until = \(leaseUntil)
                        WHERE campaign = \(campaign) AND state = 'claimed' AND claimed_by = \(owner) AND row_key
                        """
                    update.append(backend.isIn(keys, type: "bigint"))
                    var query: SQLStatement = "SELECT row_key FROM deliveries WHERE campaign = \(campaign) AND state = 'claimed' AND claimed_by = \(owner) AND row_key"
                    query.append(backend.isIn(keys, type: "bigint"))
                    try connection.execute(update)
                    try connection.query(query) { row throws(StoreError) in
                        if let key = row.int(0) { kept.insert(key) }
                    }
                }
                return kept
            }
        }
    }

    /// Records final outcomes of claimed devices. A device that already has a final outcome
    /// keeps it (the first outcome wins).
    ///
    /// With `owner`, an outcome without an APNs status (decided without an answer: cancelled,
    /// expired, skipped, a request never built or never answered) is recorded only on a row
    /// `owner` still holds: another worker that took the device over may have sent it, and
    /// its answer is the truth. An outcome with APNs' status is a fact about a request that
    /// reached APNs, recorded whoever holds the row.
    ///
    /// Returns the row keys finalised now: the others kept another outcome, or are held by
    /// another owner.
    @discardableResult
    package func record(campaign: CampaignKey, _ outcomes: [LedgerOutcome], owner: String? = nil, now: Int64) async throws(StoreError) -> Set<Int64> {
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Set<Int64> in
                var total = Set<Int64>()
                // Per state and variant, so the rows that really changed can be added to the
                // running totals.
                let groups = Dictionary(grouping: outcomes.filter(\.state.isFinal)) { outcome in
                    ShareState(state: outcome.state, variant: outcome.variant, holder: outcome.status == nil ? owner : nil)
                }
                for (group, outcomes) in groups {
                    let changed = try Self.finalize(connection, backend, campaign: campaign, outcomes, holder: group.holder, now: now)
                    guard !changed.isEmpty else { continue }
                    try connection.execute("""
                        INSERT INTO campaign_counts (campaign, state, count) VALUES (\(campaign), \(group.state.rawValue), \(changed.count))
                        ON CONFLICT (campaign, state) DO UPDATE SET count = campaign_counts.count + excluded.count
                        """)
                    if let variant = group.variant {
                        try connection.execute("""
                            INSERT INTO campaign_variant_counts (campaign, variant, state, count) VALUES (\(campaign), \(variant), \(group.state.rawValue), \(changed.count))
                            ON CONFLICT (campaign, variant, state) DO UPDATE SET count = campaign_variant_counts.count + excluded.count
                            """)
                    }
                    total.formUnion(changed)
                }
                return total
            }
        }
    }

    /// Sets final outcomes of claimed rows (only those `holder` holds, if given); returns the
    /// keys of those that changed. One `UPDATE … FROM … RETURNING` per chunk (SQLite 3.35+
    /// and PostgreSQL both have it).
    private static func finalize(
        _ connection: any SQLConnection, _ backend: any SQLBackend, campaign: CampaignKey, _ final: [LedgerOutcome], holder: String?, now: Int64
    ) throws(StoreError) -> Set<Int64> {
        var changed = Set<Int64>()
        for chunk in StoreExecutor.chunks(final) {
            var update: SQLStatement = """
                UPDATE deliveries SET state = v.s, attempts = v.a, apns_id = v.i, status = v.st, reason = v.re, finished_at = \(now) FROM
                """
            update.append(backend.outcomeRows(chunk))
            update.append(" WHERE deliveries.campaign = \(campaign) AND deliveries.row_key = v.r AND deliveries.state = 'claimed'")
            if let holder { update.append(" AND deliveries.claimed_by = \(holder)") }
            update.append(" RETURNING deliveries.row_key")
            try connection.query(update) { row in if let key = row.int(0) { changed.insert(key) } }
        }
        return changed
    }

    /// Gives back claims this owner holds but did not finish (a graceful hand-over), so the
    /// next owner takes them at once instead of waiting for the lease to run out.
    package func release(campaign: CampaignKey, owner: String, rowKeys: [Int64]) async throws(StoreError) {
        guard !rowKeys.isEmpty else { return }
        _ = try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Int in
                var released = 0
                for key in rowKeys {
                    released += try connection.execute("""
                        UPDATE deliveries SET lease_until = 0
                        WHERE campaign = \(campaign) AND row_key = \(key) AND state = 'claimed' AND claimed_by = \(owner)
                        """)
                }
                return released
            }
        }
    }

    /// Final outcomes so far per state, from the running totals `record` keeps: constant
    /// cost however large the campaign (`outcomeCounts` counts the ledger itself).
    package func progressCounts(campaign: CampaignKey) async throws(StoreError) -> [LedgerState: Int] {
        try await stateCounts("SELECT state, count FROM campaign_counts WHERE campaign = \(campaign)")
    }

    /// Final outcomes so far per A/B variant (and `holdout`) and state, from the running
    /// totals `record` keeps; empty for a campaign without variants.
    package func variantCounts(campaign: CampaignKey) async throws(StoreError) -> [String: [LedgerState: Int]] {
        try await executor.run { connection throws(StoreError) in
            var counts: [String: [LedgerState: Int]] = [:]
            try connection.query("SELECT variant, state, count FROM campaign_variant_counts WHERE campaign = \(campaign)") { row throws(StoreError) in
                if let state = LedgerState(rawValue: row.text(1) ?? "") { counts[row.text(0) ?? "", default: [:]][state] = Int(row.int(2) ?? 0) }
            }
            return counts
        }
    }

    /// Ledger rows per state for a campaign.
    package func outcomeCounts(campaign: CampaignKey) async throws(StoreError) -> [LedgerState: Int] {
        try await stateCounts("SELECT state, COUNT(*) FROM deliveries WHERE campaign = \(campaign) GROUP BY state")
    }

    /// Every ledger row of a campaign, claimed or final, by device id: what `pushfan audit`
    /// compares with the results topic.
    package func facts(campaign: CampaignKey) async throws(StoreError) -> [String: CampaignAudit.LedgerFact] {
        try await executor.run { connection throws(StoreError) in
            var facts: [String: CampaignAudit.LedgerFact] = [:]
            try connection.query("SELECT device_id, state, attempts FROM deliveries WHERE campaign = \(campaign)") { row throws(StoreError) in
                facts[row.text(0) ?? ""] = CampaignAudit.LedgerFact(state: row.text(1) ?? "", attempts: Int(row.int(2) ?? 0))
            }
            return facts
        }
    }

    /// Final entries with row keys in `(after, through]`, for re-emitting results.
    package func finished(campaign: CampaignKey, after: Int64, through: Int64) async throws(StoreError) -> [LedgerEntry] {
        try await entries("""
            SELECT row_key, device_id, state, attempts, apns_id, status, reason FROM deliveries
            WHERE campaign = \(campaign) AND state <> 'claimed' AND row_key > \(after) AND row_key <= \(through) ORDER BY row_key
            """)
    }

    /// Final ledger rows per (state, reason) for a campaign, most frequent first: why
    /// devices were rejected, invalid or failed.
    package func outcomeReasons(campaign: CampaignKey) async throws(StoreError) -> [(state: LedgerState, reason: String?, count: Int)] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("""
                SELECT state, reason, COUNT(*) FROM deliveries WHERE campaign = \(campaign) AND state <> 'claimed'
                GROUP BY state, reason ORDER BY COUNT(*) DESC
                """) { row in (LedgerState(rawValue: row.text(0) ?? "") ?? .failed, row.text(1), Int(row.int(2) ?? 0)) }
        }
    }

    func entries(_ statement: SQLStatement) async throws(StoreError) -> [LedgerEntry] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll(statement) { row in
                LedgerEntry(
                    rowKey: row.int(0) ?? 0, deviceID: row.text(1) ?? "", state: LedgerState(rawValue: row.text(2) ?? "") ?? .claimed,
                    attempts: Int(row.int(3) ?? 0), apnsID: row.text(4), status: row.int(5).map { Int($0) }, reason: row.text(6))
            }
        }
    }

    /// Rows of (state, count) as a dictionary.
    private func stateCounts(_ statement: SQLStatement) async throws(StoreError) -> [LedgerState: Int] {
        try await executor.run { connection throws(StoreError) in
            var counts: [LedgerState: Int] = [:]
            try connection.query(statement) { row throws(StoreError) in
                if let state = LedgerState(rawValue: row.text(0) ?? "") { counts[state] = Int(row.int(1) ?? 0) }
            }
            return counts
        }
    }
}

/// A group of outcomes whose changed rows add to one running total each.
private struct ShareState: Hashable {
    let state: LedgerState
    let variant: String?
    /// Recorded only where this owner holds the row.
    let holder: String?
}
