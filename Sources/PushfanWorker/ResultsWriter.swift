import Foundation
import PushfanCore
import PushfanKafka
import PushfanStore

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
        try await producer.enqueue([ProducerRecord(topic: topics.results, key: event.kafkaKey, value: MessageCodec.encode(ResultRecord.campaign(event)))])
    }

    /// The original record with the reason it could not be processed.
    package func deadLetter(_ record: DeadLetterRecord) async throws(KafkaError) -> DeliveryTicket {
        try await producer.enqueue([ProducerRecord(topic: topics.deadletter, key: record.kafkaKey, value: MessageCodec.encode(record))])
    }

    /// Waits for tickets; true when every record was delivered.
    package static func delivered(_ tickets: [DeliveryTicket]) async -> Bool {
        var ok = true
        for ticket in tickets where await !ticket.delivery().allDelivered { ok = false }
        return ok
    }
}

extension DeviceOutcome {
    /// Final ledger states as outcomes (they share their names); `claimed` is left out.
    static func counts(fromLedger counts: [LedgerState: Int]) -> [DeviceOutcome: Int] {
        var outcomes: [DeviceOutcome: Int] = [:]
        for (state, count) in counts where state.isFinal {
            if let outcome = DeviceOutcome(rawValue: state.rawValue) { outcomes[outcome] = count }
        }
        return outcomes
    }
}

/// Milliseconds since the epoch, the time unit of every record.
package func epochMillis(_ date: Date = Date()) -> Int64 { Int64(date.timeIntervalSince1970 * 1000) }
