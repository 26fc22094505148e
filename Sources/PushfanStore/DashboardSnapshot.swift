import PushfanMessages
import PushfanSupport

/// What the live dashboard shows at one moment, built from the campaigns' tallies: a pure
/// function of its inputs, so the page, its event stream and the tests see the same thing.
package struct DashboardSnapshot: Codable, Sendable, Equatable {
    /// When it was built, in milliseconds since the epoch.
    package var at: Int64
    /// The most recently active campaigns, newest first.
    package var campaigns: [CampaignRow]
    /// The chosen campaign's sends per second, over the seconds it has been sending.
    package var selected: Series?
    /// Each app's sends per second over the last minute, against its limit.
    package var apps: [AppRate]
    /// The latest dead letters, newest first (only the admin sees them).
    package var deadLetters: [DeadLetter]
    /// The chosen campaign's engagement per variant, as its stats call answers it
    /// (`CampaignStats`), read from the store by the page and state routes (the event stream
    /// leaves it out; the page asks for it again every few seconds).
    package var engagement: JSONValue? = nil

    package struct CampaignRow: Codable, Sendable, Equatable {
        /// The campaign's `<app>/<id>` (`CampaignKey.stored`): ids are named within their app.
        package var id: String
        package var app: String?
        /// `running`, `paused`, `completed`, `cancelled`, `failed`, or `sending` while only
        /// device results (no lifecycle event yet) have been read.
        package var status: String
        package var audience: Int?
        /// Devices with a final outcome: the ledger's count once the campaign ended, else
        /// the device results read.
        package var done: Int
        /// Device results by outcome.
        package var outcomes: [String: Int]
        /// The most frequent reasons, most frequent first.
        package var reasons: [Reason]
        /// Outcomes per A/B variant (and `holdout`), from the latest lifecycle event (the
        /// ledger's counts); nil for a campaign without variants.
        package var variants: [String: [String: Int]]? = nil
        /// Sends per second over the last `rateWindow` complete seconds.
        package var rate: Int
        package var error: String?
        /// First and latest record, in milliseconds since the epoch.
        package var startedAt: Int64?
        package var updatedAt: Int64?
    }

    package struct Reason: Codable, Sendable, Equatable {
        package var outcome: String
        package var reason: String
        package var count: Int
    }

    /// Counts per second from `start` (seconds since the epoch), one per second, of the
    /// campaign or app `name`.
    package struct Series: Codable, Sendable, Equatable {
        package var name: String
        package var start: Int64
        package var counts: [Int]
    }

    package struct AppRate: Codable, Sendable, Equatable {
        package var app: String
        /// The app's rate limit, per second (nil: unknown to the store).
        package var limit: Int?
        /// Sends per second, oldest first, ending at the last complete second.
        package var series: Series
    }

    /// A dead letter as the dashboard lists it (the original record is not shown).
    package struct DeadLetter: Codable, Sendable, Equatable {
        package var topic: String
        package var partition: Int
        package var offset: Int64
        package var key: String?
        package var error: String
        package var reason: String
        package var at: Int64

        package init(_ record: DeadLetterRecord) {
            (topic, partition, offset, key, error, reason, at) = (record.topic, record.partition, record.offset, record.key, record.error, record.reason, record.at)
        }
    }

    /// Complete seconds the current send rate is averaged over.
    package static let rateWindow: Int64 = 5
    /// Seconds of each app's rate chart.
    package static let appSeconds: Int64 = 60
    /// Reasons listed per campaign.
    package static let reasonsShown = 8

    /// Seconds a second's results may still be arriving: a round's results are written when
    /// its last batch is answered, so rates end this long before now.
    package static let settleSeconds: Int64 = 2

    /// Builds the snapshot at `now` (milliseconds) from merged tallies by `<app>/<id>`, the
    /// apps' limits, the recent dead letters and the chosen campaign (nil: the most recently
    /// active). Rates end `settleSeconds` before the second `now` falls in.
    package static func build(
        tallies: [String: CampaignTally], limits: [String: Int], deadLetters: [DeadLetter], selected: String?, now: Int64, maxCampaigns: Int = 50
    ) -> DashboardSnapshot {
        let current = now / 1000 - settleSeconds
        let ordered = tallies.sorted { ($0.value.lastAt ?? 0, $0.key) > ($1.value.lastAt ?? 0, $1.key) }.prefix(maxCampaigns)
        let rows = ordered.map { id, tally in row(id: id, tally: tally, currentSecond: current) }
        var byApp: [String: [Int64: Int]] = [:]
        for (_, tally) in tallies {
            guard let app = tally.app else { continue }
            byApp[app, default: [:]].merge(tally.perSecond.filter { $0.key >= current - appSeconds && $0.key < current }, uniquingKeysWith: +)
        }
        let apps = byApp.keys.sorted().map { app in
            AppRate(app: app, limit: limits[app], series: series(app, byApp[app] ?? [:], from: current - appSeconds, to: current - 1))
        }
        let chosen = (selected ?? rows.first?.id).flatMap { id in tallies[id].map { (id, $0) } }.flatMap { id, tally -> Series? in
            guard let first = tally.perSecond.keys.min(), let last = tally.perSecond.keys.max() else { return nil }
            return series(id, tally.perSecond, from: first, to: last)
        }
        return DashboardSnapshot(at: now, campaigns: Array(rows), selected: chosen, apps: apps, deadLetters: deadLetters)
    }

    static func row(id: String, tally: CampaignTally, currentSecond: Int64) -> CampaignRow {
        let status: String
        var done = tally.results
        switch tally.event?.event {
        case nil: status = "sending"
        case .accepted?, .progress?, .resumed?: status = "running"
        case .paused?: status = "paused"
        case .failed?: status = "failed"
        case .completed?, .cancelled?:
            status = tally.event!.event.rawValue
            if let counts = tally.event?.counts, !counts.isEmpty { done = counts.values.reduce(0, +) }
        }
        let reasons = tally.reasons.map { key, count -> Reason in
            let parts = key.split(separator: "/", maxSplits: 1)
            return Reason(outcome: String(parts.first ?? ""), reason: parts.count > 1 ? String(parts[1]) : "", count: count)
        }.sorted { ($0.count, $1.outcome, $1.reason) > ($1.count, $0.outcome, $0.reason) }.prefix(reasonsShown)
        let recent = tally.perSecond.reduce(0) { sum, entry in
            entry.key >= currentSecond - rateWindow && entry.key < currentSecond ? sum + entry.value : sum
        }
        return CampaignRow(
            id: id, app: tally.app, status: status, audience: tally.event?.audience, done: done, outcomes: tally.outcomes,
            reasons: Array(reasons), variants: tally.event?.variants, rate: Int(Int64(recent) / rateWindow), error: tally.event?.error,
            startedAt: tally.firstAt, updatedAt: tally.lastAt)
    }

    static func series(_ name: String, _ counts: [Int64: Int], from first: Int64, to last: Int64) -> Series {
        let start = max(first, last - Int64(CampaignTally.secondsKept) + 1)
        return Series(name: name, start: start, counts: start > last ? [] : (start...last).map { counts[$0] ?? 0 })
    }
}
