import Foundation
import PushfanCore

/// The alert pushes each device was admitted to under its app's frequency caps, one row
/// per (device, campaign), and the check that admits more. Admission happens in the
/// transaction that claims a page, for every worker and campaign at once: the devices' rows
/// are locked first (PostgreSQL; SQLite's write transaction already serialises), so two
/// workers admitting the same device for two campaigns take turns and the second sees the
/// first's push.
package struct FrequencyLedger: Sendable {
    let executor: StoreExecutor

    /// One device to admit: its row key and the zone its calendar days are counted in.
    package struct Candidate: Sendable {
        package let rowKey: Int64
        package let zone: TimeZone

        package init(rowKey: Int64, zone: TimeZone) { (self.rowKey, self.zone) = (rowKey, zone) }
    }

    /// What a claim admits under its app's caps: the candidates among the claimed devices.
    package struct Admission: Sendable {
        package let app: String
        package let caps: FrequencyCaps
        /// The devices to admit if claimed, with the zone of each; others are only claimed.
        package let candidates: [Int64: TimeZone]

        package init(app: String, caps: FrequencyCaps, candidates: [Int64: TimeZone]) {
            (self.app, self.caps, self.candidates) = (app, caps, candidates)
        }
    }

    /// Admits `candidates` to one more push of `campaign` under `caps` at `now`, inside the
    /// claim's transaction (`DeliveryLedger.claim(admitting:)`); returns the row keys the caps
    /// hold back. A device already admitted to this campaign (its page
    /// sent again after a crash, a device another worker held) stays admitted and is not
    /// counted twice. Rows too old to count under any rule are removed as they are met.
    static func admit(
        _ connection: any SQLConnection, _ backend: any SQLBackend, app: String, campaign: CampaignKey, _ candidates: [Candidate], caps: FrequencyCaps, now: Int64
    ) throws(StoreError) -> Set<Int64> {
        var capped = Set<Int64>()
        let forgetBefore = now - caps.memory
        var starts: [String: [Int64]] = [:]
        for chunk in StoreExecutor.chunks(candidates) {
            let keys = chunk.map { SQLValue.integer($0.rowKey) }
            try backend.lockDevices(connection, app: app, keys)
            var pushes: [Int64: [Int64]] = [:]
            var admittedBefore = Set<Int64>()
            var stale = false
            try connection.query("SELECT row_key, campaign, sent_at FROM frequency_sends WHERE row_key" + backend.isIn(keys, type: "bigint")) { row throws(StoreError) in
                let key = row.int(0) ?? 0, at = row.int(2) ?? 0
                if row.text(1) == campaign.stored {
                    admittedBefore.insert(key)
                } else if at < forgetBefore {
                    stale = true
                } else {
                    pushes[key, default: []].append(at)
                }
            }
            var admitted: [Int64] = []
            for candidate in chunk where !admittedBefore.contains(candidate.rowKey) {
                let zoneStarts = starts[candidate.zone.identifier] ?? caps.starts(now: now, zone: candidate.zone)
                starts[candidate.zone.identifier] = zoneStarts
                if caps.admits(pushes[candidate.rowKey] ?? [], starts: zoneStarts) {
                    admitted.append(candidate.rowKey)
                } else {
                    capped.insert(candidate.rowKey)
                }
            }
            if !admitted.isEmpty {
                var insert: SQLStatement = "INSERT INTO frequency_sends (row_key, campaign, sent_at) VALUES "
                for (index, key) in admitted.enumerated() { insert.append(index == 0 ? "(\(key), \(campaign), \(now))" : ", (\(key), \(campaign), \(now))") }
                insert.append(" ON CONFLICT (row_key, campaign) DO NOTHING")
                try connection.execute(insert)
            }
            if stale {
                try connection.execute("DELETE FROM frequency_sends WHERE sent_at < \(forgetBefore) AND row_key" + backend.isIn(keys, type: "bigint"))
            }
        }
        return capped
    }

    /// Takes back the admissions of devices that did not receive `campaign` after all
    /// (rejected, invalid, failed, expired, cancelled): only pushes that reached APNs' accept
    /// count against the caps.
    package func forget(campaign: CampaignKey, rowKeys: [Int64]) async throws(StoreError) {
        guard !rowKeys.isEmpty else { return }
        let backend = executor.backend
        _ = try await executor.run { connection throws(StoreError) in
            var removed = 0
            for chunk in StoreExecutor.chunks(rowKeys) {
                removed += try connection.execute(
                    "DELETE FROM frequency_sends WHERE campaign = \(campaign) AND row_key" + backend.isIn(chunk.map { .integer($0) }, type: "bigint"))
            }
            return removed
        }
    }

    /// A device's admitted pushes, oldest first: `(campaign, at)`.
    package func pushes(rowKey: Int64) async throws(StoreError) -> [(campaign: CampaignKey, at: Int64)] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("SELECT campaign, sent_at FROM frequency_sends WHERE row_key = \(rowKey) ORDER BY sent_at, campaign") { row throws(StoreError) in (try row.campaign(0), row.int(1) ?? 0)
            }
        }
    }
}
