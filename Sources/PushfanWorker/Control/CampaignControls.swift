import PushfanMessages
import PushfanStore
import PushfanSupport

/// What this worker knows of operators' commands, per campaign: the status a control
/// record or the store last said. Senders ask it before every batch (`statusStopping`), so a cancel
/// or pause stops new requests as soon as the record is read; the store's row is the
/// durable truth, read again by `refresh` at most every `refreshInterval`, so a worker that
/// started after the command, or missed its record, obeys too.
///
/// It also measures the bound it keeps: from the control record (its `at`) to the last
/// request this worker started for the campaign, logged once per command as
/// `control.obeyed`.
package final class CampaignControls: Sendable {
    private struct Entry {
        var status: CampaignStatus
        var checked: ContinuousClock.Instant
        /// The command that set `status`, if a record did, with its time (ms since the epoch).
        var command: (action: ControlRecord.Action, at: Int64)?
        /// When this worker last started a batch of requests for the campaign (wall ms).
        var lastStart: Int64?
        var obeyedLogged = false
        /// How many commands have been read for the campaign: a store read that started
        /// before the latest does not overwrite it.
        var commands = 0
    }

    private struct State {
        var entries: [CampaignKey: Entry] = [:]
        /// Records read per campaign whose store write has not been answered yet: while
        /// there are any, what they said here stands over what the store says.
        var unwritten: [CampaignKey: Int] = [:]
    }

    private let store: DeviceStore
    private let logger: Logger
    private let clock: any ServiceClock
    private let refreshInterval: Duration
    private let state = Locked(State())
    /// Records read, in order, with when they were read (wall ms), for `runWrites`.
    private let writes: AsyncStream<(record: ControlRecord, readAt: Int64)>
    private let writesInput: AsyncStream<(record: ControlRecord, readAt: Int64)>.Continuation

    package init(store: DeviceStore, logger: Logger, clock: any ServiceClock, refreshInterval: Duration = .seconds(1)) {
        self.store = store
        self.logger = logger
        self.clock = clock
        self.refreshInterval = refreshInterval
        (writes, writesInput) = AsyncStream.makeStream(of: (record: ControlRecord, readAt: Int64).self)
    }

    /// The status that stops a batch of the campaign from starting now (paused, cancelled),
    /// or nil when it may start, which counts it as this worker's latest start for the
    /// campaign. An unknown campaign may start: its task reads the store before each page.
    package func statusStopping(batchOf campaign: CampaignKey) -> CampaignStatus? {
        let now = clock.wallMillis
        return state.withLock { state in
            guard var entry = state.entries[campaign] else { return nil }
            if entry.status.sends {
                entry.lastStart = now
                state.entries[campaign] = entry
                return nil
            }
            return entry.status
        }
    }

    /// The campaign's status as last known, without asking the store; nil if unknown.
    package func current(_ campaign: CampaignKey) -> CampaignStatus? {
        state.withLock { $0.entries[campaign]?.status }
    }

    /// The campaign's status as last known, read from the store if older than the refresh
    /// interval (or never read).
    package func refresh(_ campaign: CampaignKey) async throws(StoreError) -> CampaignStatus {
        if let entry = state.withLock({ $0.entries[campaign] }), clock.now - entry.checked < refreshInterval { return entry.status }
        return try await reread(campaign)
    }

    private func reread(_ campaign: CampaignKey) async throws(StoreError) -> CampaignStatus {
        let commandsBefore = state.withLock { $0.entries[campaign]?.commands ?? 0 }
        guard let status = try await store.campaigns.get(campaign)?.status else { return .running }
        let newer = state.withLock { state in
            state.entries[campaign].flatMap { entry in
                entry.commands != commandsBefore || state.unwritten[campaign, default: 0] > 0 ? entry.status : nil
            }
        }
        if let newer { return newer }
        update(campaign, status: status, command: nil)
        return status
    }

    // MARK: control records

    /// A control record read from the topic. A cancel or pause of a campaign this worker
    /// is sending stops its batches now, before the store is asked: that write may wait
    /// behind the senders' own (a busy SQLite file, a PostgreSQL restart), and stopping is
    /// right whatever the store answers, since a campaign that refuses the command has
    /// ended. The record is then queued for `runWrites`; a resume waits for the store's word.
    package func read(_ record: ControlRecord) {
        writesInput.yield((record, stopAtOnce(record)))
    }

    /// No more records will be read: `runWrites` ends after the last queued one.
    package func finishReading() {
        writesInput.finish()
    }

    /// Applies the records read to the store, in order (every worker does it, so a record
    /// produced straight onto the topic lands too; repeats change nothing), each retried
    /// while the store is unavailable, until the queue ends or `stopping` is raised.
    package func runWrites(until stopping: StopSignal) async {
        for await (record, readAt) in writes {
            await write(record, readAt: readAt, until: stopping)
            if stopping.isRaised { return }
        }
    }

    /// Counts the record as unwritten and stops a sending campaign for a cancel or pause;
    /// returns when it was read.
    private func stopAtOnce(_ record: ControlRecord) -> Int64 {
        let readAt = clock.wallMillis
        let sending = state.withLock { state in
            state.unwritten[record.campaignKey, default: 0] += 1
            return state.entries[record.campaignKey]?.status.sends ?? false
        }
        if record.action != .resume && sending {
            update(record.campaignKey, status: record.action.target(), command: (record.action, record.at))
        }
        return readAt
    }

    private func write(_ record: ControlRecord, readAt: Int64, until stopping: StopSignal) async {
        var backoff = Backoff(first: .milliseconds(500), longest: .seconds(30))
        while true {
            let decision: ControlDecision?
            do {
                decision = try await store.campaigns.control(record.campaignKey, record.action, now: clock.wallMillis)
            } catch {
                // The store is unavailable: obey the record here meanwhile and write it once
                // the store is back (a record produced straight onto the topic has no other
                // writer). Reads of the store do not undo it while it is unwritten.
                update(record.campaignKey, status: record.action.target(), command: (record.action, record.at))
                let delay = backoff.next()
                logger.warning("control.store_unavailable", [
                    "campaign.id": record.campaignKey.stored, "control.action": record.action.rawValue,
                    "error": error.description, "retry_in_ms": String(delay.milliseconds),
                ])
                await stopping.sleep(for: delay)
                if stopping.isRaised { return written(record.campaignKey) }
                continue
            }
            let status: CampaignStatus
            switch decision {
            case nil:
                logger.warning("control.unknown_campaign", ["campaign.id": record.campaignKey.stored, "control.action": record.action.rawValue])
                return written(record.campaignKey)
            case .move(_, let to)?: status = to
            case .already(let current)?: status = current
            case .refused(let reason)?:
                logger.info("control.refused", ["campaign.id": record.campaignKey.stored, "control.action": record.action.rawValue, "reason": reason])
                // The campaign had ended: what this worker stopped at once takes the store's status.
                written(record.campaignKey)
                _ = try? await reread(record.campaignKey)
                return
            }
            update(record.campaignKey, status: status, command: (record.action, record.at))
            written(record.campaignKey)
            logger.info("control.received", [
                "campaign.id": record.campaignKey.stored, "control.action": record.action.rawValue, "campaign.status": status.rawValue,
                "record_to_read_ms": String(max(0, readAt - record.at)),
            ])
            return
        }
    }

    private func written(_ campaign: CampaignKey) {
        state.withLock { state in
            let left = state.unwritten[campaign, default: 0] - 1
            state.unwritten[campaign] = left > 0 ? left : nil
        }
    }

    /// Called by a sender that stopped because of the campaign's status: logs, once per
    /// command, how long after the control record this worker's last request started.
    package func obeyed(_ campaign: CampaignKey) {
        let now = clock.wallMillis
        let report = state.withLock { state -> (action: ControlRecord.Action, lastRequest: Int64, stop: Int64)? in
            guard var entry = state.entries[campaign], let command = entry.command, !entry.obeyedLogged else { return nil }
            entry.obeyedLogged = true
            state.entries[campaign] = entry
            return (command.action, max(0, (entry.lastStart ?? command.at) - command.at), max(0, now - command.at))
        }
        if let report {
            logger.notice("control.obeyed", [
                "campaign.id": campaign.stored, "control.action": report.action.rawValue,
                "record_to_last_request_ms": String(report.lastRequest), "record_to_stop_ms": String(report.stop),
            ])
        }
    }

    /// Forgets a campaign that ended.
    package func forget(_ campaign: CampaignKey) {
        _ = state.withLock { $0.entries.removeValue(forKey: campaign) }
    }

    /// Sets what this worker knows. A new command (from a record) restarts its
    /// measurement, the same one again does not; a status from the store that no record
    /// announced has none to measure from.
    private func update(_ campaign: CampaignKey, status: CampaignStatus, command: (action: ControlRecord.Action, at: Int64)?) {
        let now = clock.now
        state.withLock { state in
            var entry = state.entries[campaign] ?? Entry(status: status, checked: now)
            if let command {
                if entry.command?.action != command.action || entry.command?.at != command.at {
                    entry.obeyedLogged = false
                    entry.commands += 1
                }
                entry.command = command
            } else if entry.status != status {
                entry.command = nil
            }
            entry.status = status
            entry.checked = now
            state.entries[campaign] = entry
        }
    }
}
