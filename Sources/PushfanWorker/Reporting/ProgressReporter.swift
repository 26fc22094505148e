import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// Produces a campaign's `progress` events while this worker sends for it: at most one per
/// campaign per interval, with the store's running totals (so they count every worker's
/// outcomes, not only this one's). Progress is advisory: a lost event is replaced by the next.
package final class ProgressReporter: Sendable {
    private struct Entry {
        var last: ContinuousClock.Instant
        var busy: Bool
    }

    private let clock: any ServiceClock
    private let store: DeviceStore
    private let writer: ResultsWriter
    private let interval: Duration
    private let logger: Logger
    private let campaigns = Locked<[CampaignKey: Entry]>([:])

    package init(store: DeviceStore, writer: ResultsWriter, interval: Duration, clock: any ServiceClock, logger: Logger) {
        self.store = store
        self.clock = clock
        self.writer = writer
        self.interval = interval
        self.logger = logger
    }

    /// Called after each round of outcomes; emits when the interval has passed.
    package func touch(campaign: CampaignKey) {
        let now = clock.now
        let due = campaigns.withLock { campaigns -> Bool in
            guard var entry = campaigns[campaign] else {
                // The first round only starts the clock: `accepted` was just announced.
                campaigns[campaign] = Entry(last: now, busy: false)
                return false
            }
            guard !entry.busy, now - entry.last >= interval else { return false }
            entry.busy = true
            entry.last = now
            campaigns[campaign] = entry
            return true
        }
        guard due else { return }
        Task { await emit(campaign: campaign) }
    }

    package func forget(campaign: CampaignKey) {
        _ = campaigns.withLock { $0.removeValue(forKey: campaign) }
    }

    private func emit(campaign: CampaignKey) async {
        defer { campaigns.withLock { $0[campaign]?.busy = false } }
        do {
            // Nil once another worker has ended the campaign.
            guard let event = try await CampaignTotals.progress(store, campaign: campaign, at: clock.wallMillis) else { return }
            _ = try await writer.campaign(event)
        } catch {
            logger.info("progress.skipped", ["campaign.id": campaign.stored, "error": "\(error)"])
        }
    }
}
