import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// The events role: reads the events topic in its own group (`<group>-events`), checks each
/// poll's events against the store and counts them there (`EngagementTallies`), then stores
/// their offsets. Counting is keyed by event id in the same transaction as the counts, so a
/// record read again after a crash or a rebalance, or the whole topic replayed, counts
/// nothing twice: the counts are exact under at-least-once reading. A record that does not
/// decode, or whose device, campaign or send id the store does not know (a direct
/// producer's mistake), goes to the deadletter topic with the reason, before its offset is
/// stored.
struct EventCounter {
    let store: DeviceStore
    let writer: ResultsWriter
    let logger: Logger
    let clock: any ServiceClock
    let counted: @Sendable (_ app: String, _ kind: EngagementEvent.Kind) -> Void

    private func decode(_ record: KafkaRecord) throws(MessageDecodingError) -> EngagementEvent {
        try MessageCodec.decode(EngagementEvent.self, from: Data(record.value))
    }

    /// One poll's records read and checked against the store: the events to count, and a
    /// dead letter for each of the others.
    struct Checked: Sendable {
        let toCount: [EngagementTallies.Counted]
        let letters: [DeadLetterRecord]
        let now: Int64
    }

    /// Reads one poll's records and checks them against the store (read only, so it may run
    /// while the poll before is being counted). Throws a store error, after which the caller
    /// tries the same records again.
    func check(_ records: [KafkaRecord]) async throws -> Checked {
        var valid: [String: [(KafkaRecord, EngagementEvent)]] = [:]
        var letters: [DeadLetterRecord] = []
        for record in records {
            do throws(MessageDecodingError) {
                // The form the API writes is read directly; any other goes through the decoder.
                let event: EngagementEvent
                if let fast = record.withValueBytes({ EngagementEvent(canonicalJSON: $0) }) {
                    event = fast
                } else {
                    do throws(MessageDecodingError) { event = try decode(record) } catch {
                        // A tombstone for the topic's keepers is not an event: nothing to count.
                        if (try? MessageCodec.decode(ErasureRecord.self, from: Data(record.value))) != nil { continue }
                        throw error
                    }
                }
                valid[event.app, default: []].append((record, event))
            } catch {
                letters.append(ResultsWriter.deadLetter(for: record, code: error.code, reason: error.description, at: clock.wallMillis))
            }
        }
        let now = clock.wallMillis
        var toCount: [EngagementTallies.Counted] = []
        for (app, entries) in valid.sorted(by: { $0.key < $1.key }) {
            let resolved = try await store.engagement.resolve(entries.map(\.1), app: app, now: now)
            for ((record, _), result) in zip(entries, resolved) {
                switch result {
                case .success(let counted): toCount.append(counted)
                case .failure(let refusal):
                    letters.append(ResultsWriter.deadLetter(for: record, code: "invalid_event", reason: "\(refusal.field): \(refusal.reason)", at: clock.wallMillis))
                }
            }
        }
        return Checked(toCount: toCount, letters: letters, now: now)
    }

    /// Sends the dead letters of the checked records. Throws a Kafka error, after which the
    /// caller tries again: the letters sent before the one that failed go again. A separate
    /// step from `count`, so a store error there sends none again.
    func deadLetter(_ checked: Checked) async throws {
        var tickets: [DeliveryTicket] = []
        for letter in checked.letters {
            logger.warning("events.dead_letter", ["error": letter.error, "reason": letter.reason])
            tickets.append(try await writer.deadLetter(letter))
        }
        if let failure = await ResultsWriter.firstFailure(tickets) { throw failure }
    }

    /// Counts the checked events; returns how many were new. Throws a store error, after
    /// which the caller tries the same again (the counts are keyed by event id, so nothing
    /// counts twice).
    func count(_ checked: Checked) async throws -> Int {
        let new = try await store.engagement.count(checked.toCount, now: checked.now)
        for counted in new { self.counted(counted.event.app, counted.event.kind) }
        return new.count
    }
}
