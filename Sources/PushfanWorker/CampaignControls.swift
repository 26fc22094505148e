import PushfanCore
import PushfanStore

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
    /// What a `paused` event says when an operator paused the campaign.
    package static let pausedReason = "paused by an operator; pushfan campaigns resume continues it"

    private struct Entry {
        var status: CampaignStatus
        var checked: ContinuousClock.Instant
        /// The command that set `status`, if a record did, with its time (ms since the epoch).
        var command: (action: ControlRecord.Action, at: Int64)?
        /// When this worker last started a batch of requests for the campaign (wall ms).
        var lastStart: Int64?
        var obeyedLogged = false
    }

    private let store: DeviceStore
    private let logger: Logger
    private let clock: any WorkerClock
    private let refreshInterval: Duration
    private let entries = Locked<[String: Entry]>([:])

    package init(store: DeviceStore, logger: Logger, clock: any WorkerClock = SystemClock(), refreshInterval: Duration = .seconds(1)) {
        self.store = store
        self.logger = logger
        self.clock = clock
        self.refreshInterval = refreshInterval
    }

    /// The status that stops a batch of the campaign from starting now (paused, cancelled),
    /// or nil when it may start, which counts it as this worker's latest start for the
    /// campaign. An unknown campaign may start: its task reads the store before each page.
    package func statusStopping(batchOf campaign: String) -> CampaignStatus? {
        let now = clock.wallMillis
        return entries.withLock { entries in
            guard var entry = entries[campaign] else { return nil }
            if entry.status.sends {
                entry.lastStart = now
                entries[campaign] = entry
                return nil
            }
            return entry.status
        }
    }

    /// The campaign's status as last known, without asking the store; nil if unknown.
    package func current(_ campaign: String) -> CampaignStatus? {
        entries.withLock { $0[campaign]?.status }
    }

    /// The campaign's status as last known, read from the store if older than the refresh
    /// interval (or never read).
    package func refresh(_ campaign: String) async throws(StoreError) -> CampaignStatus {
        if let entry = entries.withLock({ $0[campaign] }), clock.now - entry.checked < refreshInterval { return entry.status }
        guard let status = try await store.campaigns.get(campaign)?.status else { return .running }
        update(campaign, status: status, command: nil)
        return status
    }

    /// A control record read from the topic: applied to the store (every worker does it, so
    /// a record produced straight onto the topic lands too; repeats change nothing) and to
    /// this worker's view at once.
    package func apply(_ record: ControlRecord) async {
        let received = clock.wallMillis
        var status: CampaignStatus?
        do {
            switch try await store.campaigns.control(record.campaign, record.action) {
            case nil:
                logger.warning("control.unknown_campaign", ["campaign.id": record.campaign, "control.action": record.action.rawValue])
                return
            case .move(_, let to)?: status = to
            case .already(let current)?: status = current
            case .refused(let reason)?:
                logger.info("control.refused", ["campaign.id": record.campaign, "control.action": record.action.rawValue, "reason": reason])
                return
            }
        } catch {
            // The store is unavailable: obey the record here anyway; `refresh` reads the
            // truth once the store is back.
            logger.warning("control.store_unavailable", ["campaign.id": record.campaign, "error": error.description])
            status = switch record.action {
            case .cancel: .cancelled
            case .pause: .paused
            case .resume: .running
            }
        }
        guard let status else { return }
        update(record.campaign, status: status, command: (record.action, record.at))
        logger.info("control.received", [
            "campaign.id": record.campaign, "control.action": record.action.rawValue, "campaign.status": status.rawValue,
            "record_to_read_ms": String(max(0, received - record.at)),
        ])
    }

    /// Called by a sender that stopped because of the campaign's status: logs, once per
    /// command, how long after the control record this worker's last request started.
    package func obeyed(_ campaign: String) {
        let now = clock.wallMillis
        let report = entries.withLock { entries -> (action: ControlRecord.Action, lastRequest: Int64, stop: Int64)? in
            guard var entry = entries[campaign], let command = entry.command, !entry.obeyedLogged else { return nil }
            entry.obeyedLogged = true
            entries[campaign] = entry
            return (command.action, max(0, (entry.lastStart ?? command.at) - command.at), max(0, now - command.at))
        }
        if let report {
            logger.notice("control.obeyed", [
                "campaign.id": campaign, "control.action": report.action.rawValue,
                "record_to_last_request_ms": String(report.lastRequest), "record_to_stop_ms": String(report.stop),
            ])
        }
    }

    /// Forgets a campaign that ended.
    package func forget(_ campaign: String) {
        _ = entries.withLock { $0.removeValue(forKey: campaign) }
    }

    /// Sets what this worker knows. A command (from a record) restarts its measurement; a
    /// status from the store that no record announced has none to measure from.
    private func update(_ campaign: String, status: CampaignStatus, command: (action: ControlRecord.Action, at: Int64)?) {
        let now = clock.now
        entries.withLock { entries in
            var entry = entries[campaign] ?? Entry(status: status, checked: now)
            if let command {
                entry.command = command
                entry.obeyedLogged = false
            } else if entry.status != status {
                entry.command = nil
            }
            entry.status = status
            entry.checked = now
            entries[campaign] = entry
        }
    }
}
