import PushfanMessages

/// What the dashboard counts of one campaign from results-topic records: device results by
/// outcome and reason, sends per second, and the latest lifecycle event.
///
/// A tally covers the records of one topic partition (a campaign's device results are spread
/// over every partition by their keys); the partitions' tallies `merge` into the campaign's.
/// Records are counted as they come: a result written twice (sends are at-least-once, so a
/// crash can repeat a page) counts twice, while a terminal event's counts come from the
/// ledger and are exact.
package struct CampaignTally: Codable, Sendable, Equatable {
    /// Seconds of send rate kept per campaign (older seconds are dropped).
    package static let secondsKept = 900

    /// The app, once a lifecycle event has named it.
    package var app: String?
    /// Device results by outcome (`DeviceOutcome` raw values).
    package var outcomes: [String: Int] = [:]
    /// Device results by outcome and reason, keyed `outcome/reason`.
    package var reasons: [String: Int] = [:]
    /// Device results per second of their `at` (seconds since the epoch), the last `secondsKept`.
    package var perSecond: [Int64: Int] = [:]
    /// The latest lifecycle event.
    package var event: Event?
    /// Earliest and latest `at` (milliseconds) of the records counted.
    package var firstAt: Int64?
    package var lastAt: Int64?

    /// A lifecycle event as the dashboard shows it.
    package struct Event: Codable, Sendable, Equatable {
        package var event: CampaignEvent.Event
        package var audience: Int?
        package var counts: [String: Int]
        package var error: String?
        package var at: Int64
        /// Counts per A/B variant (and holdout), from the ledger; nil without variants.
        package var variants: [String: [String: Int]]?

        package init(_ event: CampaignEvent) {
            (self.event, audience, counts, error, at) = (event.event, event.audience, event.counts, event.error, event.at)
            variants = event.variants.isEmpty ? nil : event.variants
        }
    }

    package init() {}

    /// Device results counted.
    package var results: Int { outcomes.values.reduce(0, +) }

    package mutating func apply(_ record: ResultRecord) {
        switch record {
        case .device(let result):
            app = result.app
            outcomes[result.outcome.rawValue, default: 0] += 1
            if let reason = result.reason { reasons["\(result.outcome.rawValue)/\(reason)", default: 0] += 1 }
            perSecond[result.at / 1000, default: 0] += 1
            noteTime(result.at)
            if perSecond.count > Self.secondsKept + 60 { trimSeconds() }
        case .campaign(let event):
            app = event.app
            // A refused resubmission's answer is not the campaign's state.
            guard !(event.event == .failed && self.event.map({ $0.event != .failed }) == true && event.submission != nil) else { return }
            if self.event.map({ event.at >= $0.at }) ?? true { self.event = Event(event) }
            noteTime(event.at)
        }
    }

    /// Adds another partition's tally of the same campaign.
    package mutating func merge(_ other: CampaignTally) {
        app = app ?? other.app
        outcomes.merge(other.outcomes, uniquingKeysWith: +)
        reasons.merge(other.reasons, uniquingKeysWith: +)
        perSecond.merge(other.perSecond, uniquingKeysWith: +)
        if let theirs = other.event, event.map({ theirs.at >= $0.at }) ?? true { event = theirs }
        if let first = other.firstAt { firstAt = min(firstAt ?? first, first) }
        if let last = other.lastAt { lastAt = max(lastAt ?? last, last) }
        if perSecond.count > Self.secondsKept { trimSeconds() }
    }

    private mutating func noteTime(_ at: Int64) {
        firstAt = min(firstAt ?? at, at)
        lastAt = max(lastAt ?? at, at)
    }

    private mutating func trimSeconds() {
        guard let latest = perSecond.keys.max() else { return }
        perSecond = perSecond.filter { $0.key > latest - Int64(Self.secondsKept) }
    }

    // Seconds are written as a JSON object keyed by the second, not as the key/value array
    // Codable makes of a dictionary with integer keys.
    private enum CodingKeys: String, CodingKey { case app, outcomes, reasons, perSecond = "per_second", event, firstAt = "first_at", lastAt = "last_at" }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        app = try container.decodeIfPresent(String.self, forKey: .app)
        outcomes = try container.decode([String: Int].self, forKey: .outcomes)
        reasons = try container.decode([String: Int].self, forKey: .reasons)
        let seconds = try container.decode([String: Int].self, forKey: .perSecond)
        perSecond = Dictionary(uniqueKeysWithValues: seconds.compactMap { key, count in Int64(key).map { ($0, count) } })
        event = try container.decodeIfPresent(Event.self, forKey: .event)
        firstAt = try container.decodeIfPresent(Int64.self, forKey: .firstAt)
        lastAt = try container.decodeIfPresent(Int64.self, forKey: .lastAt)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(app, forKey: .app)
        try container.encode(outcomes, forKey: .outcomes)
        try container.encode(reasons, forKey: .reasons)
        try container.encode(Dictionary(uniqueKeysWithValues: perSecond.map { (String($0.key), $0.value) }), forKey: .perSecond)
        try container.encodeIfPresent(event, forKey: .event)
        try container.encodeIfPresent(firstAt, forKey: .firstAt)
        try container.encodeIfPresent(lastAt, forKey: .lastAt)
    }
}
