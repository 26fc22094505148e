import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// A winner campaign's second phase: its planner sent the variants to the test group and
/// parked the rest as a wave (`winnerWave`, as many shards as the test had) for `after_s`
/// later. When the wave's time comes (not before: the decision reads the events counted until
/// then) the dispatching worker decides: each variant's delivered devices and those that
/// opened (or converted), the best rate wins (`Campaign.decide`). The decision is written
/// into the stored record, so every reader of the campaign (senders, the events' counting,
/// the stats) gives the rest the winner; then the rest's tasks go out. A dispatch run again
/// after a crash keeps the decision it finds.
extension CampaignPlanner {
    /// The rest's wave key.
    static let winnerWave = CampaignWaves.winnerKey

    func dispatchRest(_ wave: CampaignWaves.Wave, campaign stored: Campaign, definition: CampaignDefinition) async throws {
        var campaign = stored
        if campaign.decision == nil {
            let stats = try await store.campaignStats(campaign.key)
            let kind: EngagementEvent.Kind = campaign.winner?.metric == .conversionRate ? .converted : .opened
            var delivered: [String: Int] = [:]
            var engaged: [String: Int] = [:]
            for variant in campaign.variants {
                let group = stats.groups[variant.id]
                delivered[variant.id] = group?.delivered ?? 0
                engaged[variant.id] = Int(group?.engagement.filter { $0.kind == kind }.map(\.devices).reduce(0, +) ?? 0)
            }
            campaign.decision = campaign.decide(delivered: delivered, engaged: engaged, at: clock.wallMillis)
            campaign = try await store(decision: campaign, over: definition.record)
            logger.notice("planner.winner_decided", [
                "campaign.id": campaign.key.stored, "winner": campaign.decision?.variant ?? "",
                "rates": (campaign.decision?.rates ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","),
            ])
        }
        // Exactly the shards the rest was counted with when the test was planned.
        let ranges = try await waveRanges(campaign, definition: definition, count: wave.shards)
        let tickets = try await produceTasks(campaign, ranges, first: wave.firstShard, of: wave.firstShard + wave.shards, notBefore: nil, phase: .rest)
        if let error = await ResultsWriter.firstFailure(tickets) { throw error }
        try await store.waves.produced(wave, now: clock.wallMillis)
        logger.info("planner.wave_dispatched", ["campaign.id": campaign.id, "wave": wave.key, "tasks": String(ranges.count)])
    }

    /// Writes the campaign's decision into its stored record, over the record as read: the
    /// campaign as it then stands. Another worker's decision written first stands (the rest
    /// goes to its winner, as its test said); a record changed otherwise meanwhile (an
    /// erasure took devices out of its lists) gets the decision over its new text.
    private func store(decision decided: Campaign, over read: String) async throws -> Campaign {
        var (campaign, base) = (decided, read)
        for _ in 0..<3 {
            let record = String(decoding: MessageCodec.encode(campaign), as: UTF8.self)
            let standing = try await store.campaigns.decide(campaign.key, record: record, replacing: base, now: clock.wallMillis)
            if standing == record { return campaign }
            let current = try CampaignDefinition(record: standing).accepted(campaign.key)
            if current.decision != nil { return current }
            (campaign, base) = (current, standing)
            campaign.decision = decided.decision
        }
        throw StoreError.conflict("the decision of campaign \(campaign.key.stored): its stored record kept changing")
    }
}
