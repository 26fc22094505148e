import Foundation
import PushfanMessages
import PushfanSchedule

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
        if caps.perUser { return try admitPerUser(connection, backend, app: app, campaign: campaign, candidates, caps: caps, now: now) }
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

    /// One admitted push as counted: which device, for which campaign, when.
    private struct Push: Hashable {
        let rowKey: Int64
        let campaign: String
        let at: Int64
    }

    /// `admit` for caps counted per user: a candidate's earlier pushes are every push to any
    /// device of its user (its `user_id` now), and its own device's rows from before it had
    /// one; a device without a user counts alone. Admitting one device of a user counts for
    /// the next, within the page too. The candidates' rows and every device of their users
    /// are locked in one ordered statement (PostgreSQL), so admitters of two devices of one
    /// user take turns without deadlocking.
    private static func admitPerUser(
        _ connection: any SQLConnection, _ backend: any SQLBackend, app: String, campaign: CampaignKey, _ candidates: [Candidate], caps: FrequencyCaps, now: Int64
    ) throws(StoreError) -> Set<Int64> {
        var capped = Set<Int64>()
        let forgetBefore = now - caps.memory
        var starts: [String: [Int64]] = [:]
        for chunk in StoreExecutor.chunks(candidates) {
            let keys = chunk.map { SQLValue.integer($0.rowKey) }
            var userOf: [Int64: String] = [:]
            try connection.query("SELECT d.row_key, \(userOf: "d") FROM devices d WHERE d.app = \(app) AND d.row_key" + backend.isIn(keys, type: "bigint")) {
                row throws(StoreError) in
                if let user = row.text(1) { userOf[row.int(0) ?? 0] = user }
            }
            let users = Array(Set(userOf.values)).sorted()
            var locked = keys
            for part in StoreExecutor.chunks(users) {
                try connection.query(
                    "SELECT d.row_key FROM devices d WHERE d.app = \(app) AND \(userOf: "d")" + backend.isIn(part.map { .text($0) }, type: "text")
                ) { row throws(StoreError) in locked.append(.integer(row.int(0) ?? 0)) }
            }
            try backend.lockDevices(connection, app: app, locked)
            var byUser: [String: Set<Push>] = [:]
            var byDevice: [Int64: Set<Push>] = [:]
            var stale = false
            let userKeys = users.map { SQLValue.text(Self.userKey(app: app, user: $0)) }
            var condition: SQLStatement = "row_key" + backend.isIn(keys, type: "bigint")
            if !userKeys.isEmpty { condition = "(" + condition + " OR user_key" + backend.isIn(userKeys, type: "text") + ")" }
            try connection.query("SELECT row_key, campaign, sent_at, user_key FROM frequency_sends WHERE " + condition) { row throws(StoreError) in
                let push = Push(rowKey: row.int(0) ?? 0, campaign: row.text(1) ?? "", at: row.int(2) ?? 0)
                guard push.at >= forgetBefore else {
                    stale = true
                    return
                }
                byDevice[push.rowKey, default: []].insert(push)
                if let key = row.text(3) { byUser[key, default: []].insert(push) }
            }
            var admitted: [(rowKey: Int64, userKey: String?)] = []
            for candidate in chunk {
                let userKey = userOf[candidate.rowKey].map { Self.userKey(app: app, user: $0) }
                let own = byDevice[candidate.rowKey] ?? []
                // Admitted to this campaign before: stays admitted, counted once.
                if own.contains(where: { $0.campaign == campaign.stored }) { continue }
                let earlier = userKey.map { own.union(byUser[$0] ?? []) } ?? own
                let zoneStarts = starts[candidate.zone.identifier] ?? caps.starts(now: now, zone: candidate.zone)
                starts[candidate.zone.identifier] = zoneStarts
                guard caps.admits(earlier.map(\.at), starts: zoneStarts) else {
                    capped.insert(candidate.rowKey)
                    continue
                }
                let push = Push(rowKey: candidate.rowKey, campaign: campaign.stored, at: now)
                byDevice[candidate.rowKey, default: []].insert(push)
                if let userKey { byUser[userKey, default: []].insert(push) }
                admitted.append((candidate.rowKey, userKey))
            }
            if !admitted.isEmpty {
                var insert: SQLStatement = "INSERT INTO frequency_sends (row_key, campaign, sent_at, user_key) VALUES "
                for (index, entry) in admitted.enumerated() {
                    insert.append(index == 0 ? "" : ", ")
                    insert.append("(\(entry.rowKey), \(campaign), \(now), \(.optional(entry.userKey)))")
                }
                insert.append(" ON CONFLICT (row_key, campaign) DO NOTHING")
                try connection.execute(insert)
            }
            if stale {
                try connection.execute("DELETE FROM frequency_sends WHERE sent_at < \(forgetBefore) AND " + condition)
            }
        }
        return capped
    }

    /// A user as `frequency_sends` names it: `<app>/<user>` (user ids are per app).
    static func userKey(app: String, user: String) -> String { app + "/" + user }

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
