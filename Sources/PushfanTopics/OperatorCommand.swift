import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport

/// An operator's cancel, pause or resume, as `pushfan campaigns` gives it (and the API will):
/// the store's campaign row moves first (the durable truth a worker that starts later reads),
/// then the control record tells every sender at once, and a `paused` or `resumed` event
/// tells whoever follows the campaign (a cancel is announced by its last task, with counts).
package struct OperatorCommand: Sendable {
    /// What the command did.
    package enum Answer: Sendable, Equatable {
        case unknownCampaign
        case decided(ControlDecision)
    }

    package let store: DeviceStore
    package let writer: ResultsWriter

    /// What a `paused` event says when an operator paused the campaign.
    package static let pausedReason = "paused by an operator; pushfan campaigns resume continues it"

    package init(store: DeviceStore, writer: ResultsWriter) {
        self.store = store
        self.writer = writer
    }

    /// Applies `action` to `campaign`. Throws when the store cannot be changed (nothing
    /// changed) or when the change is stored but the control record could not be produced
    /// (`NotDelivered`: senders still obey at their next look at the store).
    package func run(_ action: ControlRecord.Action, campaign: CampaignKey) async throws -> Answer {
        let now = store.clock.wallMillis
        guard let decision = try await store.campaigns.control(campaign, action, now: now) else { return .unknownCampaign }
        guard case .move = decision else { return .decided(decision) }
        let record = ControlRecord(campaign: campaign, action: action, at: now)
        var tickets = [try await writer.producer.enqueue([
            ProducerRecord(topic: writer.topics.control, key: record.kafkaKey, value: MessageCodec.encode(record)),
        ])]
        if action != .cancel, let row = try await store.campaigns.get(campaign) {
            let event: CampaignEvent.Event = action == .pause ? .paused : .resumed
            tickets.append(try await writer.campaign(try await CampaignTotals.running(
                event, store, campaign: campaign, audience: row.audience,
                error: action == .pause ? Self.pausedReason : nil, at: now)))
        }
        if let failure = await ResultsWriter.firstFailure(tickets) {
            throw NotDelivered("the records announcing the \(action.rawValue) of \(campaign) (the store has it)", cause: failure)
        }
        return .decided(decision)
    }
}
