import Foundation
import PushfanMessages

/// Engagement events checked against the store and counted exactly: per campaign, variant
/// (`holdout` for the holdout, empty for a campaign without variants), kind and detail (the
/// action's id, the custom event's name, the conversion's currency), the events and the
/// distinct devices, and the sum of conversion values. Each event id counts once per app,
/// in the same transaction as its counts, so a replayed topic or a retried batch changes
/// nothing (docs/store.md).
package struct EngagementTallies: Sendable {
    let executor: StoreExecutor

    /// Newest events accepted, against the server's clock: a client's clock may run a little
    /// ahead, not more.
    package static let futureAllowance: Int64 = 15 * 60 * 1_000

    /// Oldest events accepted, against when the API took them (`received_at`): a client may
    /// send what it buffered offline for weeks, not longer. Event ids are remembered this
    /// long and a day more (for clocks and a lagging count), then `prune`
    /// forgets them: an event read again after that is refused as too old, so it still
    /// cannot count twice.
    package static let pastHorizon: Int64 = 30 * 86_400_000
    static let pruneMargin: Int64 = 86_400_000

    /// The longest a campaign's attribution window may be, in milliseconds: how far back
    /// the campaigns a conversion may count for are looked up.
    static let longestAttributionWindow = Campaign.maxAttributionWindow * 1_000

    /// A campaign an event counts for, and the variant it counts under there: the variant's
    /// id, `holdout`, or empty for a campaign without variants.
    package struct Attribution: Sendable, Hashable {
        package let campaign: CampaignKey
        package let variant: String
    }

    /// An event as it is counted: the campaigns it counts for, resolved against the store.
    /// An event that names its campaign counts for it; a conversion that names none counts
    /// for every campaign of the app that reached the device (delivered, or held out) within
    /// that campaign's attribution window before it (`options.attribution_window_s`, default
    /// 24 h), so a holdout's conversions are its own.
    package struct Counted: Sendable, Hashable {
        package let event: EngagementEvent
        /// The device's row: its distinct-device counts are kept by it.
        package let rowKey: Int64
        package let attributions: [Attribution]
    }

    /// Why an event cannot be counted: the field and what is wrong with it.
    package struct Refusal: Error, Sendable, Hashable {
        package let field: String
        package let reason: String
    }

    /// Checks events of one app against the store, in order: the device is the app's, the
    /// campaign is the app's and took the device (`unreached`), the send id is the one its
    /// marker gave the device, the
    /// variant is the device's, and `at` is not ahead of `now` by more than
    /// `futureAllowance`. Returns each event counted or refused.
    package func resolve(_ events: [EngagementEvent], app: String, now: Int64) async throws(StoreError) -> [Result<Counted, Refusal>] {
        let deviceIDs = Array(Set(events.map(\.device)))
        let campaignKeys = Array(Set(events.compactMap(\.campaignKey)))
        let unattributed = events.filter { $0.kind == .converted && $0.campaign == nil }
        let (known, campaigns, reached, ledger) = try await executor.run {
            connection throws(StoreError) -> ([String: Int64], [CampaignKey: Campaign], [String: [Reach]], [EngagementRows.Push: EngagementRows.PushState]) in
            let known = try executor.backend.knownDevices(connection, app: app, deviceIDs)
            let reached = try Self.reaches(connection, executor.backend, app: app, of: unattributed)
            var campaigns: [CampaignKey: Campaign] = [:]
            for key in Set(campaignKeys + reached.values.flatMap { $0.map(\.campaign) }) {
                let record = try connection.queryOne("SELECT definition FROM campaigns WHERE id = \(key)") { $0.text(0) }.flatMap { $0 }
                if let record, let campaign = try? CampaignDefinition(record: record).accepted(key) { campaigns[key] = campaign }
            }
            var pushes: [CampaignKey: Set<Int64>] = [:]
            for event in events {
                if let key = event.campaignKey, campaigns[key] != nil, let rowKey = known[event.device] { pushes[key, default: []].insert(rowKey) }
            }
            return (known, campaigns, reached, try EngagementRows.pushStates(connection, executor.backend, pushes))
        }
        // Keyed as the events name their campaigns, as each send id was checked before.
        let sendIDs = Dictionary(uniqueKeysWithValues: campaigns.keys.map { ($0, EngagementMarker.SendIDs($0)) })
        return events.map { event in
            Result { () throws(Refusal) -> Counted in
                guard event.app == app else { throw Refusal(field: "app", reason: "the event is for app \(event.app), not \(app)") }
                guard let rowKey = known[event.device] else { throw Refusal(field: "device_id", reason: "app \(app) has no device \(event.device)") }
                guard event.at <= now + Self.futureAllowance else {
                    throw Refusal(field: "at", reason: "is \((event.at - now) / 1_000) s ahead of the server's clock; at most \(Self.futureAllowance / 60_000) minutes ahead are taken")
                }
                // Judged at the API's taking (a count lagging behind keeps what the API took),
                // but never past half the day more that counted ids are remembered (`prune`):
                // the other half is for clocks, so a replayed record cannot count twice.
                let taken = min(event.receivedAt ?? now, now)
                guard event.at >= taken - Self.pastHorizon, event.at >= now - Self.pastHorizon - Self.pruneMargin / 2 else {
                    throw Refusal(field: "at", reason: "is \((now - event.at) / 86_400_000) days ago; events are counted up to \(Self.pastHorizon / 86_400_000) days after they happen")
                }
                guard let key = event.campaignKey else {
                    // Another kind of event naming no campaign counts under none.
                    guard event.kind == .converted else { return Counted(event: event, rowKey: rowKey, attributions: []) }
                    // A conversion of the campaigns that reached the device shortly before it.
                    let attributions = (reached[event.device] ?? []).filter { $0.at <= event.at }.compactMap { reach -> Attribution? in
                        guard let campaign = campaigns[reach.campaign], event.at <= reach.at + campaign.options.attributionWindowMillis else { return nil }
                        return Attribution(campaign: reach.campaign, variant: campaign.countedName(of: campaign.share(of: event.device)) ?? "")
                    }
                    return Counted(event: event, rowKey: rowKey, attributions: attributions)
                }
                guard let campaign = campaigns[key] else { throw Refusal(field: "campaign", reason: "app \(app) has no campaign \(key.id)") }
                if let refusal = Self.unreached(event, campaign: key, ledger[EngagementRows.Push(campaign: key, rowKey: rowKey)]) { throw refusal }
                if let sendID = event.sendID, sendID != sendIDs[key]?.sendID(device: event.device) {
                    throw Refusal(field: "send_id", reason: "is not the send id of campaign \(key.id)'s push to device \(event.device)")
                }
                let variant = campaign.countedName(of: campaign.share(of: event.device)) ?? ""
                if let given = event.variant, given != variant {
                    throw Refusal(field: "variant", reason: "device \(event.device) is in \(variant.isEmpty ? "no variant" : variant.debugDescription) of campaign \(key.id), not \(given.debugDescription)")
                }
                return Counted(event: event, rowKey: rowKey, attributions: [Attribution(campaign: key, variant: variant)])
            }
        }
    }

    /// Why an event naming `campaign` cannot count, given the campaign's ledger row for its
    /// device (nil: the campaign never took the device); nil when it can. Engagement comes
    /// from pushes: an event is taken for a push that reached the device or may have (under
    /// way; or failed, or expired or cancelled between retries, after a request went out
    /// whose answer was lost though APNs took it), and a conversion also from a device held
    /// out (the lift is measured against it). So the application secret,
    /// which every app ships, cannot count events for devices a campaign never sent to: a
    /// device registered with a made-up token is sent nothing that counts.
    static func unreached(_ event: EngagementEvent, campaign: CampaignKey, _ push: EngagementRows.PushState?) -> Refusal? {
        guard let push else {
            return Refusal(field: "campaign", reason: "campaign \(campaign.id) has sent nothing to device \(event.device)")
        }
        switch push.state {
        case .delivered, .claimed, .failed: return nil
        case .expired where push.attempts > 0, .cancelled where push.attempts > 0: return nil
        case .skipped where push.reason == Campaign.holdoutReason:
            if event.kind == .converted { return nil }
            return Refusal(field: "campaign", reason: "device \(event.device) is in campaign \(campaign.id)'s holdout, which is sent nothing: only its conversions count")
        default:
            return Refusal(field: "campaign", reason: "campaign \(campaign.id)'s push to device \(event.device) never reached it (\(push.state.rawValue))")
        }
    }

    /// When a campaign reached a device: delivered, or held out.
    struct Reach {
        let campaign: CampaignKey
        let at: Int64
    }

    /// For conversions that name no campaign: the app's campaigns that may have reached a
    /// device within the longest attribution window before one of them (created before the
    /// latest, and still sending or ended within that window before the earliest: a campaign
    /// may send long after it was created, and its row's `updated_at` is its end once it
    /// ended), and when each reached each device (each campaign's own window is applied to
    /// the reaches).
    private static func reaches(_ connection: any SQLConnection, _ backend: any SQLBackend, app: String, of events: [EngagementEvent]) throws(StoreError) -> [String: [Reach]] {
        guard let earliest = events.map(\.at).min(), let latest = events.map(\.at).max() else { return [:] }
        var candidates: [CampaignKey] = []
        let ended = CampaignStatus.allCases.filter(\.isFinal).map { "'\($0.rawValue)'" }.joined(separator: ", ")
        try connection.query("""
            SELECT id FROM campaigns WHERE app = \(app) AND created_at <= \(latest)
            AND (updated_at >= \(earliest - longestAttributionWindow) OR status NOT IN (\(raw: ended)))
            """) { row in
            if let stored = row.text(0), let key = CampaignKey(stored: stored) { candidates.append(key) }
        }
        var reached: [String: [Reach]] = [:]
        let devices = Array(Set(events.map(\.device)))
        for campaign in candidates {
            for chunk in StoreExecutor.chunks(devices) {
                let list = backend.isIn(chunk.map(SQLValue.text), type: "text")
                try connection.query("""
                    SELECT d.device_id, l.finished_at FROM devices d JOIN deliveries l ON l.campaign = \(campaign) AND l.row_key = d.row_key
                    WHERE d.app = \(app) AND (l.state = 'delivered' OR (l.state = 'skipped' AND l.reason = \(Campaign.holdoutReason))) AND d.device_id
                    """ + list) { row in
                    if let device = row.text(0), let at = row.int(1) { reached[device, default: []].append(Reach(campaign: campaign, at: at)) }
                }
            }
        }
        return reached
    }

    /// Counts what it has not counted before; returns the events that were new. An event
    /// that counts for no campaign is remembered (its id) but counted under none. Each
    /// event's id and each first device of a group (by number and row, if the device is
    /// still there) are rows (`EngagementRows`, written the backend's fastest way); each
    /// (campaign, variant, kind, detail) then gets one update.
    package func count(_ events: [Counted], now: Int64) async throws(StoreError) -> [Counted] {
        var seen: Set<EngagementRows.EventKey> = []
        let unique = events.filter { seen.insert(EngagementRows.EventKey(app: $0.event.app, id: $0.event.id)).inserted }
        guard !unique.isEmpty else { return [] }
        let backend = executor.backend
        return try await executor.run { connection throws(StoreError) -> [Counted] in
            try connection.transaction { () throws(StoreError) -> [Counted] in
                let isNew = try backend.insertAbsentEvents(connection, unique.map(\.event), now: now)
                let new = zip(unique, isNew).filter(\.1).map(\.0)
                let lines = new.flatMap { counted in counted.attributions.map { EngagementRows.Line(counted, $0) } }
                let numbers = try EngagementRows.groupNumbers(connection, Set(lines.map(\.deviceGroup)))
                let live = try backend.liveDevices(connection, Array(Set(lines.map(\.rowKey))))
                let alive = lines.map { live[$0.rowKey] == $0.device }
                let pairs = zip(lines, alive).filter(\.1).map { EngagementRows.GroupDevice(group: numbers[$0.0.deviceGroup] ?? 0, rowKey: $0.0.rowKey) }
                var firsts = try backend.insertAbsentGroupDevices(connection, pairs).makeIterator()
                // A device removed since the check still has its events counted, not itself.
                let isFirst = alive.map { $0 && (firsts.next() ?? false) }
                var tallies: [EngagementRows.Line.Group: EngagementRows.Tally] = [:]
                for (line, first) in zip(lines, isFirst) { tallies[line.group, default: EngagementRows.Tally()].add(line, first: first) }
                // In one order for every writer: two counting at once on PostgreSQL then wait
                // for each other's rows instead of deadlocking.
                for (group, tally) in tallies.sorted(by: { EngagementRows.Line.Group.precedes($0.key, $1.key) }) {
                    try connection.execute("""
                        INSERT INTO engagement_counts (campaign, variant, kind, detail, events, devices, value) VALUES
                        (\(group.campaign), \(group.variant), \(group.kind), \(group.detail), \(tally.events), \(tally.devices), \(SQLValue.real(tally.value)))
                        ON CONFLICT (campaign, variant, kind, detail) DO UPDATE SET
                        events = engagement_counts.events + excluded.events, devices = engagement_counts.devices + excluded.devices,
                        value = engagement_counts.value + excluded.value
                        """)
                }
                return new
            }
        }
    }

    /// Forgets the ids of events older than `pastHorizon` and a day that were also counted
    /// that long ago: `resolve` refuses such an event now, so its id no longer guards
    /// anything, and an id first sent late (its `at` already old) is kept as long after it
    /// was counted, against a resend under the same id with a newer time. Returns how many
    /// were forgotten.
    @discardableResult
    package func prune(now: Int64) async throws(StoreError) -> Int {
        let before = now - Self.pastHorizon - Self.pruneMargin
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("DELETE FROM engagement_events WHERE at < \(before) AND counted_at < \(before)")
        }
    }

    /// A campaign's counts, every variant, kind and detail.
    package func counts(campaign: CampaignKey) async throws(StoreError) -> [EngagementCount] {
        try await executor.run { connection throws(StoreError) -> [EngagementCount] in
            var rows: [EngagementCount] = []
            try connection.query("""
                SELECT variant, kind, detail, events, devices, value FROM engagement_counts WHERE campaign = \(campaign)
                ORDER BY variant, kind, detail
                """) { row in
                guard let kind = row.text(1).flatMap(EngagementEvent.Kind.init(rawValue:)) else { return }
                rows.append(EngagementCount(
                    variant: row.text(0) ?? "", kind: kind, detail: row.text(2) ?? "", events: row.int(3) ?? 0, devices: row.int(4) ?? 0,
                    value: row.double(5) ?? 0))
            }
            return rows
        }
    }
}

extension DeviceStore {
    /// A campaign's final outcomes per variant (the ledger's running totals; the whole
    /// ledger for a campaign without variants) beside its engagement counts.
    package func campaignStats(_ campaign: CampaignKey) async throws(StoreError) -> CampaignStats {
        var outcomes = try await ledger.variantCounts(campaign: campaign)
        if outcomes.isEmpty { outcomes[""] = try await ledger.progressCounts(campaign: campaign) }
        let finals = outcomes.mapValues { states in
            Dictionary(uniqueKeysWithValues: states.filter { $0.key.isFinal && $0.value > 0 }.map { ($0.key.rawValue, $0.value) })
        }
        var stats = CampaignStats(outcomes: finals, engagement: try await engagement.counts(campaign: campaign))
        if let definition = try await campaigns.stored(campaign), let stored = try? definition.accepted(campaign) {
            (stats.winner, stats.decision) = (stored.winner, stored.decision)
        }
        return stats
    }
}
