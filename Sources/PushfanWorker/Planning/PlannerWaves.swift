import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport
import PushfanTopics

/// How the planner lays out a local-time campaign (one zone wave per moment its local time
/// comes, parked in the store) and how a parked wave becomes tasks when its time is near:
/// a zone wave's shards of the app's devices, filtered to its zones, or a quiet-hours hold's
/// one task of listed devices.
extension CampaignPlanner {
    /// Counts the audience, finds its zones and parks one wave per moment, each with the
    /// same number of shards (fixed now, so the campaign's shard count is known before any
    /// task exists), then records the campaign `scheduled` and announces it `accepted`. The
    /// waves are parked before the row is written: a crash in between leaves waves that
    /// nothing sees (the dispatcher joins the campaign) and a record that is planned again,
    /// over the waves parked then (`CampaignWaves.park`).
    func planLocalTime(
        _ campaign: Campaign, _ localTime: LocalTime, app: AppRecord, definition: CampaignDefinition, submission: CampaignEvent.Submission,
        refuse: (String, String) -> Refusal
    ) async throws -> Outcome {
        let audience = try await resolve(campaign, definition: definition, refuse: refuse)
        let zones = try await store.audience.zones(app: campaign.app, segment: audience.segment, tokens: campaign.tokenSelection, now: clock.wallMillis)
        let now = clock.wallMillis
        let waves = ZoneWave.plan(
            localTime: localTime, zones: zones.isEmpty ? [""] : zones, defaultZone: app.defaultZone, now: now, late: campaign.options.latePolicy)
        var devices = audience.rowKeys?.count ?? 0
        if audience.rowKeys == nil { devices = try await store.audience.count(app: campaign.app, segment: nil, now: clock.wallMillis) }
        let size = shardSize(devices: devices)
        let perWave = max(1, (devices + size - 1) / size)
        let parked = waves.enumerated().map { index, wave in
            CampaignWaves.Wave(
                campaign: campaign.key, key: "zone-\(index)", sendAt: wave.sendAt ?? now, firstShard: index * perWave, shards: perWave,
                zones: wave.zones, skip: wave.skip ? LatePolicy.skippedReason : nil)
        }
        let standing = try await store.waves.park(parked)
        let first = waves.compactMap(\.sendAt).min()
        _ = try await store.campaigns.record(
            campaign.key, audience: audience.count, shards: standing.reduce(0) { $0 + $1.shards }, definition: definition,
            status: .scheduled, sendAt: first ?? now, parked: false, now: now)
        let accepted = try await writer.campaign(CampaignEvent(
            campaign: campaign.id, app: campaign.app, event: .accepted, audience: audience.count, submission: submission, at: clock.wallMillis))
        if let error = await ResultsWriter.firstFailure([accepted]) { throw error }
        logger.notice("planner.local_time", [
            "campaign.id": campaign.id, "app": campaign.app, "audience": String(audience.count), "local_time": localTime.description,
            "waves": String(waves.count), "zones": String(zones.count), "late_zones": String(waves.filter { $0.sendAt == nil }.map(\.zones.count).reduce(0, +)),
            "first_wave": String(first ?? now),
        ])
        return .scheduled(campaign: campaign.id, sendAt: first ?? now)
    }

    /// A parked wave whose time is near (the dispatcher took it): its tasks produced with
    /// `not_before` = its time (none for a cancelled campaign: its devices end at once), and
    /// a campaign still `scheduled` moved on to `running`.
    func dispatch(_ wave: CampaignWaves.Wave) async throws {
        guard let row = try await store.campaigns.get(wave.campaign), let definition = try await store.campaigns.stored(wave.campaign),
              let campaign = try? definition.accepted(wave.campaign)
        else {
            throw NotDelivered("the stored definition of campaign \(wave.campaign), for its wave \(wave.key)")
        }
        if wave.key == Self.winnerWave { return try await dispatchRest(wave, campaign: campaign, definition: definition) }
        let notBefore = row.status == .cancelled ? nil : wave.sendAt
        let ranges: [PlannedRange]
        if let rows = wave.rowKeys {
            ranges = [PlannedRange(after: nil, through: nil, estimate: rows.count)]
        } else {
            ranges = try await waveRanges(campaign, definition: definition, count: wave.shards)
        }
        if row.status == .scheduled { _ = try await store.campaigns.transition(campaign.key, from: .scheduled, to: .planning, now: clock.wallMillis) }
        let tickets = try await produceTasks(
            campaign, ranges, first: wave.firstShard, of: max(row.shards, wave.firstShard + wave.shards), notBefore: notBefore,
            zones: wave.zones, skip: wave.skip, lane: wave.lane, rows: wave.rowKeys)
        if let error = await ResultsWriter.firstFailure(tickets) { throw error }
        try await store.waves.produced(wave, now: clock.wallMillis)
        _ = try await store.campaigns.transition(campaign.key, from: .planning, to: .running, now: clock.wallMillis)
        try await CampaignCompletion.completeIfFinished(store: store, writer: writer, logger: logger, campaign: campaign.key)
        logger.info("planner.wave_dispatched", [
            "campaign.id": campaign.id, "wave": wave.key, "tasks": String(ranges.count), "send_at": String(wave.sendAt),
            "ahead_ms": String(wave.sendAt - clock.wallMillis), "zones": wave.zones?.joined(separator: ",") ?? "",
        ])
    }

    /// Exactly `count` ranges over the campaign's audience as it is now: the app's row keys
    /// for a segment, the listed devices' keys for an explicit audience; the last range is
    /// open-ended, and ranges past the end are empty.
    func waveRanges(_ campaign: Campaign, definition: CampaignDefinition, count: Int) async throws -> [PlannedRange] {
        let audience = try await resolve(campaign, definition: definition) { code, reason in
            Refusal(code: code, reason: reason, app: campaign.app, campaign: campaign.id)
        }
        if let keys = audience.rowKeys {
            let size = max(1, (keys.count + count - 1) / count)
            var ranges: [PlannedRange] = []
            var after: Int64?
            for index in 0..<count {
                let (start, end) = (index * size, min((index + 1) * size, keys.count))
                if index == count - 1 {
                    ranges.append(PlannedRange(after: after, through: nil, estimate: max(0, keys.count - start)))
                } else if start >= end {
                    // No keys left for it: an empty range above every key.
                    let top = Int64.max - Int64(count - index)
                    ranges.append(PlannedRange(after: top, through: top + 1, estimate: 0))
                } else {
                    ranges.append(PlannedRange(after: after, through: keys[end - 1], estimate: end - start))
                    after = keys[end - 1]
                }
            }
            return ranges
        }
        let total = try await store.audience.count(app: campaign.app, segment: nil, now: clock.wallMillis)
        let size = shardSize(devices: total)
        let estimate = total == 0 ? 0 : min(size, (audience.count + count - 1) / count)
        return try await store.audience.shards(app: campaign.app, size: size, count: count) { _ in }
            .map { PlannedRange(after: $0.after, through: $0.through, estimate: estimate) }
    }
}
