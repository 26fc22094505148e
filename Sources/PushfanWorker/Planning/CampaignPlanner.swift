import Foundation
import PushfanAPNsModel
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// The planner role: turns a campaign record into tasks (audience shards) on the tasks
/// topic, records the campaign with its audience size, and announces it as `accepted`.
///
/// Idempotent by campaign id: the campaign row is written as `planning` before any task is
/// produced and becomes `running` once every task is on the topic, so a crash in between
/// re-plans (the duplicate tasks are harmless: the ledger claims each device once), and a
/// record for a campaign that is already `running` or `completed` is skipped. A campaign
/// whose `send_at` is further ahead than `CampaignDispatcher.lead` is counted and parked as
/// `scheduled`; `dispatch` plans it when its time comes.
package struct CampaignPlanner: Sendable {
    package let store: DeviceStore
    package let writer: ResultsWriter
    package let settings: PushfanConfiguration.Worker
    /// Wall time for schedules: when `send_at` and local times come.
    package let clock: any ServiceClock
    package let logger: Logger

    package init(store: DeviceStore, writer: ResultsWriter, settings: PushfanConfiguration.Worker, clock: any ServiceClock, logger: Logger) {
        self.store = store
        self.writer = writer
        self.settings = settings
        self.clock = clock
        self.logger = logger
    }

    /// A record the planner refuses: it goes to the deadletter topic.
    struct Refusal: Error {
        let code: String
        let reason: String
        /// The app key, when the record was readable enough to have one.
        let app: String?
        let campaign: String?
        /// The campaign exists (the record reused its id): after the `failed` answer to the
        /// record, its real state is announced again, so the latest event stays true.
        var restate: CampaignRegistry.Row? = nil
    }

    /// What became of one record.
    package enum Outcome: Sendable, Equatable {
        case planned(campaign: String, audience: Int, tasks: Int)
        /// Counted and parked in the store until `send_at` comes near (`CampaignDispatcher`).
        case scheduled(campaign: String, sendAt: Int64)
        case duplicate(campaign: String)
        case deadLettered(code: String)
    }

    /// Handles one record of the campaigns topic. Throws only when the store or Kafka is
    /// unavailable (the caller retries the record later); everything wrong with the record
    /// itself is dead-lettered.
    package func handle(_ record: KafkaRecord) async throws -> Outcome {
        do {
            return try await plan(record)
        } catch let refusal as Refusal {
            try await deadLetter(record, refusal)
            return .deadLettered(code: refusal.code)
        }
    }

    /// Produces the dead letter, then (for a readable campaign) the `failed` event its
    /// submitter waits for. A dead letter Kafka refuses for itself (too large for the
    /// topic) is sent again without the original's bytes; one refused even so is logged and
    /// passed over: retrying a record that can never be written would hold up every
    /// record after it.
    private func deadLetter(_ record: KafkaRecord, _ refusal: Refusal) async throws {
        var letter = ResultsWriter.deadLetter(for: record, code: refusal.code, reason: refusal.reason, at: clock.wallMillis)
        var failure = await ResultsWriter.firstFailure([try await writer.deadLetter(letter)])
        if let error = failure, error.isRecordRejected {
            logger.warning("planner.dead_letter_too_large", ["kafka.offset": String(record.offset), "error": error.description])
            letter.original = ""
            letter.originalSize = record.value.count
            letter.originalSHA256 = letter.originalSHA256 ?? ResultsWriter.sha256Hex(Array(record.value))
            failure = await ResultsWriter.firstFailure([try await writer.deadLetter(letter)])
        }
        if let error = failure {
            guard error.isRecordRejected else { throw error }
            logger.error("planner.dead_letter_refused", [
                "kafka.topic": record.topic, "kafka.partition": String(record.partition), "kafka.offset": String(record.offset),
                "error": refusal.code, "reason": refusal.reason, "kafka.error": error.description,
            ])
        }
        // A readable campaign that cannot run is also reported where its submitter waits.
        if let campaign = refusal.campaign, let app = refusal.app {
            var tickets = [try await writer.campaign(CampaignEvent(
                campaign: campaign, app: app, event: .failed, error: refusal.reason, submission: Self.submission(of: record), at: clock.wallMillis))]
            if let existing = refusal.restate { tickets.append(try await writer.campaign(try await currentState(of: existing, submission: nil))) }
            if let error = await ResultsWriter.firstFailure(tickets) { throw error }
        }
        logger.warning("planner.dead_letter", ["campaign.id": refusal.campaign ?? "", "error": refusal.code, "reason": refusal.reason, "kafka.offset": String(record.offset)])
    }

    static func submission(of record: KafkaRecord) -> CampaignEvent.Submission {
        CampaignEvent.Submission(partition: Int(record.partition), offset: record.offset)
    }

    /// The event that tells a campaign's state now: `completed` with its final counts,
    /// `paused` by an operator, or `progress` with the totals so far (a cancelled campaign's
    /// last task produces the `cancelled` event when every device is final).
    private func currentState(of existing: CampaignRegistry.Row, submission: CampaignEvent.Submission?) async throws -> CampaignEvent {
        switch existing.status {
        case .completed:
            try await CampaignTotals.final(.completed, store, campaign: existing.key, submission: submission, at: clock.wallMillis)
        case .paused:
            try await CampaignTotals.running(
                .paused, store, campaign: existing.key, audience: existing.audience, error: OperatorCommand.pausedReason,
                submission: submission, at: clock.wallMillis)
        case .scheduled, .planning, .running, .cancelled:
            try await CampaignTotals.running(.progress, store, campaign: existing.key, audience: existing.audience, submission: submission, at: clock.wallMillis)
        }
    }

    private func plan(_ record: KafkaRecord) async throws -> Outcome {
        let started = clock.now
        let campaign: Campaign
        do {
            campaign = try Campaign.decodeRecord(record.value)
        } catch let failure {
            throw Refusal(code: failure.code, reason: failure.description, app: nil, campaign: nil)
        }
        func refuse(_ code: String, _ reason: String) -> Refusal { Refusal(code: code, reason: reason, app: campaign.app, campaign: campaign.id) }

        // The id first: a record reusing a taken id is about that campaign, whatever else is
        // wrong with it, and must not leave a `failed` event as its latest state.
        let existing = try await store.campaigns.get(campaign.key)
        if let existing {
            // The id is taken: the same campaign resent is acknowledged; a different one is
            // refused, visibly, and never mistaken for the first.
            if let stored = try await store.campaigns.stored(campaign.key),
               let first = try? stored.accepted(campaign.key), !campaign.isResubmission(of: first) {
                var refusal = refuse(
                    "conflicting_campaign",
                    "campaign id \(campaign.id) is already taken by a different campaign (\(existing.status.rawValue)); submit the new one under its own id")
                refusal.restate = existing.status == .planning ? nil : existing
                throw refusal
            }
            if existing.status != .planning {
                logger.info("planner.duplicate", ["campaign.id": campaign.id, "campaign.status": existing.status.rawValue])
                let answer = try await currentState(of: existing, submission: Self.submission(of: record))
                if let error = await ResultsWriter.firstFailure([try await writer.campaign(answer)]) { throw error }
                return .duplicate(campaign: campaign.id)
            }
        }
        guard let app = try await store.apps.get(campaign.app) else {
            throw refuse("unknown_app", "app \(campaign.app.debugDescription) is not registered (pushfan apps add)")
        }
        // The payloads were built when the record was read (`Campaign.validate`); what
        // only the app can tell is whether its bundle id makes a topic APNs takes.
        do { _ = try APNsNotification.requestTopic(app.topic, pushType: campaign.notification.pushType) } catch {
            throw refuse(error.code, "app \(campaign.app)'s bundle id cannot carry this campaign: \(error.description)")
        }
        do { try campaign.checkSchedule(now: clock.wall) } catch { throw refuse(error.code, error.description) }
        if let missing = try await store.missingReference(in: campaign) { throw refuse(missing.code, missing.description) }
        let definition = try await self.definition(of: campaign, recorded: existing != nil, refuse: refuse)
        let submission = Self.submission(of: record)
        if let localTime = campaign.options.localTime {
            return try await planLocalTime(campaign, localTime, app: app, definition: definition, submission: submission, refuse: refuse)
        }
        if let sendAt = campaign.options.sendAt, sendAt > clock.wallMillis + CampaignDispatcher.lead.milliseconds {
            let audience = try await resolve(campaign, definition: definition, refuse: refuse)
            _ = try await store.campaigns.record(
                campaign.key, audience: audience.count, shards: 0, definition: definition, status: .scheduled, sendAt: sendAt, now: clock.wallMillis)
            let accepted = try await writer.campaign(CampaignEvent(
                campaign: campaign.id, app: campaign.app, event: .accepted, audience: audience.count, submission: submission, at: clock.wallMillis))
            if let error = await ResultsWriter.firstFailure([accepted]) { throw error }
            logger.notice("planner.scheduled", ["campaign.id": campaign.id, "app": campaign.app, "audience": String(audience.count), "send_at": String(sendAt)])
            return .scheduled(campaign: campaign.id, sendAt: sendAt)
        }
        let audience: Int
        let tasks: Int
        var tickets: [DeliveryTicket]
        var firstTask = clock.now
        if campaign.audience.readsTheAppsDevices {
            let segment = try await segment(of: campaign, definition: definition, refuse: refuse)
            (audience, tasks, tickets, firstTask) = try await planSegment(campaign, segment: segment, definition: definition, submission: submission)
        } else {
            let listed = try await resolve(campaign, definition: definition, refuse: refuse)
            var ranges = try await shardRanges(campaign, audience: listed)
            let first = try await store.campaigns.record(
                campaign.key, audience: listed.count, shards: ranges.count, definition: definition,
                status: .planning, sendAt: campaign.options.sendAt, now: clock.wallMillis)
            // Planned again after a planner died: as many shards as the first try recorded.
            if !first, let recorded = try await store.campaigns.recordedShards(campaign.key), recorded != ranges.count {
                ranges = try await waveRanges(campaign, definition: definition, count: recorded)
            }
            (audience, tasks) = (listed.count, ranges.count)
            tickets = [try await writer.campaign(CampaignEvent(
                campaign: campaign.id, app: campaign.app, event: .accepted, audience: audience, submission: submission, at: clock.wallMillis))]
            tickets += try await produceTasks(campaign, ranges, notBefore: campaign.options.sendAt, phase: campaign.winner == nil ? nil : .test)
            firstTask = clock.now
        }
        if let error = await ResultsWriter.firstFailure(tickets) { throw error }
        if let winner = campaign.winner {
            // The rest: as many shards again, parked until the decision (PlannerWinner.swift).
            _ = try await store.waves.append(CampaignWaves.Wave(
                campaign: campaign.key, key: Self.winnerWave, sendAt: clock.wallMillis + Int64(winner.afterSeconds) * 1_000, firstShard: 0, shards: tasks))
        }
        _ = try await store.campaigns.transition(campaign.key, from: .planning, to: .running, now: clock.wallMillis)
        // Its senders may all have finished before this (the last of them left the completion
        // to the planner, or met a pause): then the completion is ours to tell, whether this
        // moved the row or an operator's pause or cancel did.
        try await CampaignCompletion.completeIfFinished(store: store, writer: writer, logger: logger, campaign: campaign.key)
        logger.notice("planner.planned", [
            "campaign.id": campaign.id, "app": campaign.app, "audience": String(audience), "tasks": String(tasks),
            "first_task_ms": String((firstTask - started).milliseconds), "elapsed_ms": String((clock.now - started).milliseconds),
        ])
        return .planned(campaign: campaign.id, audience: audience, tasks: tasks)
    }

    /// The store's copy of the campaign: the one kept with its row when an earlier try
    /// recorded it (a record handled again keeps the template and segment it was accepted
    /// with), else a new one (`DeviceStore.definition(of:)`), or the refusal of a template or
    /// saved segment it cannot have.
    private func definition(of campaign: Campaign, recorded: Bool, refuse: (String, String) -> Refusal) async throws -> CampaignDefinition {
        if recorded, let kept = try await store.campaigns.stored(campaign.key) { return kept }
        do { return try await store.definition(of: campaign) } catch let missing as MissingReference {
            // A template's own problem is told by its reason (which names the template);
            // everything else by its field and reason.
            throw refuse(missing.code, missing.code == "unknown_template" || missing.code.hasSuffix("_segment") ? missing.description : missing.reason)
        }
    }

    /// A parked campaign whose time has come (the dispatcher took it): its audience counted
    /// again, its tasks produced with `not_before` = its `send_at` (as many as a first try
    /// recorded, when this one takes over a dispatch whose worker died), and the row moved on
    /// from `scheduled`. A campaign paused or cancelled while parked gets its tasks too (they
    /// wait, or end every device `cancelled`). What can no longer run (its app is gone, or,
    /// for a campaign stored before saved segments were kept with it, its saved segment)
    /// ends with a `failed` event, its row `cancelled`.
    package func dispatch(_ row: CampaignRegistry.Row) async throws {
        guard let definition = try await store.campaigns.stored(row.key),
              let campaign = try? definition.accepted(row.key) else {
            throw NotDelivered("the stored definition of scheduled campaign \(row.id)")
        }
        if campaign.options.localTime != nil { return try await settleLocalTime(campaign.key) }
        do {
            guard try await store.apps.get(campaign.app) != nil else {
                throw Refusal(code: "unknown_app", reason: "app \(campaign.app) is not registered any more", app: campaign.app, campaign: campaign.id)
            }
            let audience = try await resolve(campaign, definition: definition) { code, reason in
                Refusal(code: code, reason: reason, app: campaign.app, campaign: campaign.id)
            }
            var ranges = try await shardRanges(campaign, audience: audience)
            let shards = try await store.campaigns.dispatchShards(campaign.key, cut: ranges.count, now: clock.wallMillis)
            if shards != ranges.count { ranges = try await waveRanges(campaign, definition: definition, count: shards) }
            try await store.campaigns.planned(campaign.key, audience: audience.count, now: clock.wallMillis)
            // Whatever status the row was read in: a parked campaign paused then resumed
            // meanwhile is `scheduled` again, and must not stay so with its tasks out.
            _ = try await store.campaigns.transition(campaign.key, from: .scheduled, to: .planning, now: clock.wallMillis)
            // A cancelled one's devices end at once, whatever its time was.
            let tickets = try await produceTasks(campaign, ranges, notBefore: row.status == .cancelled ? nil : campaign.options.sendAt)
            if let error = await ResultsWriter.firstFailure(tickets) { throw error }
            _ = try await store.campaigns.transition(campaign.key, from: .planning, to: .running, now: clock.wallMillis)
            try await CampaignCompletion.completeIfFinished(store: store, writer: writer, logger: logger, campaign: campaign.key)
            logger.notice("planner.dispatched", [
                "campaign.id": campaign.id, "audience": String(audience.count), "tasks": String(ranges.count),
                "send_at": String(row.sendAt ?? 0), "ahead_ms": String((row.sendAt ?? 0) - clock.wallMillis),
            ])
        } catch let refusal as Refusal {
            for status in [CampaignStatus.scheduled, .planning, .paused] where try await store.campaigns.transition(campaign.key, from: status, to: .cancelled, now: clock.wallMillis) { break }
            let failed = try await writer.campaign(CampaignEvent(campaign: campaign.id, app: campaign.app, event: .failed, error: refusal.reason, at: clock.wallMillis))
            if let error = await ResultsWriter.firstFailure([failed]) { throw error }
            logger.error("planner.dispatch_failed", ["campaign.id": campaign.id, "error": refusal.code, "reason": refusal.reason])
        }
    }

    /// A local-time campaign listed as a stale dispatch: its row is `planning` while its
    /// first wave's tasks are produced (or were, by a worker that died before moving it on),
    /// and its own dispatch time is when it was recorded. Its waves are its dispatches
    /// (`dispatch(_ wave:)`, taken over on their own when stale), so this only moves it on
    /// to `running` and ends it if every task finished; cutting shards here would send its
    /// devices at the first wave's time, whatever their zone.
    private func settleLocalTime(_ campaign: CampaignKey) async throws {
        _ = try await store.campaigns.transition(campaign, from: .planning, to: .running, now: clock.wallMillis)
        try await CampaignCompletion.completeIfFinished(store: store, writer: writer, logger: logger, campaign: campaign)
    }
}
