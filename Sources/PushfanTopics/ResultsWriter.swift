import Foundation
import PushfanCrypto
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport

/// Writes to the results and deadletter topics. Producing is asynchronous; callers keep
/// the returned tickets and wait for them before storing the offset of the record whose
/// work the results describe, so a crash never leaves a committed task without its results.
package struct ResultsWriter: Sendable {
    package let producer: KafkaProducer
    package let topics: TopicNames

    package init(producer: KafkaProducer, topics: TopicNames) {
        self.producer = producer
        self.topics = topics
    }

    /// One record per device outcome, keyed `<campaign>/<device>`.
    package func devices(_ results: [DeviceResult]) async throws(KafkaError) -> DeliveryTicket? {
        guard !results.isEmpty else { return nil }
        var batch = ProducerBatch(topic: topics.results, capacity: results.count, bytesPerRecord: 200)
        for result in results {
            batch.append(key: Array(result.kafkaKey.utf8), value: result.encodedJSON())
        }
        return try await producer.enqueue(batch)
    }

    /// A campaign lifecycle event, keyed by campaign id.
    package func campaign(_ event: CampaignEvent) async throws(KafkaError) -> DeliveryTicket {
        try await producer.enqueue([campaignRecord(event)])
    }

    /// The record of a campaign lifecycle event, for a caller that produces it with others.
    package func campaignRecord(_ event: CampaignEvent) -> ProducerRecord {
        ProducerRecord(topic: topics.results, key: event.kafkaKey, value: MessageCodec.encode(ResultRecord.campaign(event)))
    }

    /// Engagement events, keyed `<app>/<device>`; returns once every one is on the topic.
    package func events(_ events: [EngagementEvent]) async throws(KafkaError) {
        guard !events.isEmpty else { return }
        var batch = ProducerBatch(topic: topics.events, capacity: events.count, bytesPerRecord: 300)
        for event in events { batch.append(key: Array(event.kafkaKey.utf8), value: Array(MessageCodec.encode(event))) }
        if let failure = await Self.firstFailure([try await producer.enqueue(batch)]) { throw failure }
    }

    /// The original record with the reason it could not be processed.
    package func deadLetter(_ record: DeadLetterRecord) async throws(KafkaError) -> DeliveryTicket {
        try await producer.enqueue([ProducerRecord(topic: topics.deadletter, key: record.kafkaKey, value: MessageCodec.encode(record))])
    }

    /// The dead letter of a record read from `record.topic`: its whole bytes, or a bounded
    /// prefix with its size and SHA-256 when it is too large to carry.
    package static func deadLetter(for record: KafkaRecord, code: String, reason: String, at: Int64) -> DeadLetterRecord {
        DeadLetterRecord(
            topic: record.topic, partition: Int(record.partition), offset: record.offset, key: record.keyString,
            error: code, reason: reason, originalBytes: Array(record.value), at: at,
            sha256: sha256Hex)
    }

    /// SHA-256 in lowercase hex, as `sha256sum` prints it.
    package static func sha256Hex(_ bytes: [UInt8]) -> String {
        Crypto.sha256(bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// Waits for tickets; true when every record was delivered.
    package static func delivered(_ tickets: [DeliveryTicket]) async -> Bool {
        await firstFailure(tickets) == nil
    }

    /// Waits for tickets; nil when every record was delivered, else the first failure.
    package static func firstFailure(_ tickets: [DeliveryTicket]) async -> KafkaError? {
        var first: KafkaError?
        for ticket in tickets {
            let delivery = await ticket.delivery()
            if first == nil, let failure = delivery.failures.first { first = failure.error }
        }
        return first
    }
}

/// Campaign events that carry the store's counts, built in one place for every producer of
/// them (the sender's completion and pause, the progress reporter, the planner's answers).
package enum CampaignTotals {
    /// `completed` or `cancelled`, the last event: counted from the ledger itself (exact,
    /// once per campaign); the audience is their sum.
    package static func final(
        _ event: CampaignEvent.Event, _ store: DeviceStore, campaign: CampaignKey, submission: CampaignEvent.Submission? = nil, at: Int64
    ) async throws(StoreError) -> CampaignEvent {
        let counts = DeviceOutcome.counts(fromLedger: try await store.ledger.outcomeCounts(campaign: campaign))
        var final = CampaignEvent(
            campaign: campaign.id, app: campaign.app, event: event, audience: counts.values.reduce(0, +), outcomeCounts: counts, submission: submission, at: at)
        final.variants = try await variants(store, campaign)
        return final
    }

    /// `progress`: the running totals, or nil once the campaign has ended. The status is
    /// read after the totals, in the same read as the audience: another worker changes it
    /// before it writes the last event, so a progress event built here never follows
    /// `completed` or `cancelled` (but for the moment between this read and the write).
    package static func progress(_ store: DeviceStore, campaign: CampaignKey, at: Int64) async throws(StoreError) -> CampaignEvent? {
        let counts = DeviceOutcome.counts(fromLedger: try await store.ledger.progressCounts(campaign: campaign))
        guard let row = try await store.campaigns.get(campaign), row.status != .completed, row.status != .cancelled else { return nil }
        var progress = CampaignEvent(campaign: campaign.id, app: campaign.app, event: .progress, audience: row.audience, outcomeCounts: counts, at: at)
        progress.variants = try await variants(store, campaign)
        return progress
    }

    /// `progress`, `paused` or `resumed`: the running totals (constant cost however large the campaign)
    /// and the audience planned, read from the store unless given.
    package static func running(
        _ event: CampaignEvent.Event, _ store: DeviceStore, campaign: CampaignKey, audience: Int? = nil, error: String? = nil,
        submission: CampaignEvent.Submission? = nil, at: Int64
    ) async throws(StoreError) -> CampaignEvent {
        let counts = DeviceOutcome.counts(fromLedger: try await store.ledger.progressCounts(campaign: campaign))
        let planned: Int?
        if let audience { planned = audience } else { planned = try await store.campaigns.get(campaign)?.audience }
        var running = CampaignEvent(
            campaign: campaign.id, app: campaign.app, event: event, audience: planned, outcomeCounts: counts, error: error, submission: submission, at: at)
        running.variants = try await variants(store, campaign)
        return running
    }

    /// The per-variant running totals, as outcome counts.
    private static func variants(_ store: DeviceStore, _ campaign: CampaignKey) async throws(StoreError) -> [String: [String: Int]] {
        try await store.ledger.variantCounts(campaign: campaign).mapValues { states in
            Dictionary(uniqueKeysWithValues: DeviceOutcome.counts(fromLedger: states).map { ($0.key.rawValue, $0.value) })
        }
    }
}

extension DeviceOutcome {
    /// Final ledger states as outcomes (they share their names); `claimed` is left out.
    package static func counts(fromLedger counts: [LedgerState: Int]) -> [DeviceOutcome: Int] {
        var outcomes: [DeviceOutcome: Int] = [:]
        for (state, count) in counts where state.isFinal {
            if let outcome = DeviceOutcome(rawValue: state.rawValue) { outcomes[outcome] = count }
        }
        return outcomes
    }
}

