import PushfanKafka
import PushfanMessages

/// Doubling waits between tries of something that is down (the store, Kafka): the one
/// backoff of the worker's retry loops.
package struct Backoff: Sendable, Equatable {
    package private(set) var current: Duration
    package let longest: Duration

    package init(first: Duration, longest: Duration) {
        current = first
        self.longest = longest
    }

    /// The wait now; the next one doubles, up to `longest`.
    package mutating func next() -> Duration {
        defer { current = min(current * 2, longest) }
        return current
    }
}

/// What a rate bucket or circuit belongs to: one lane of an app's rate, or one lane of a
/// campaign that asks for less than its app's rate.
package struct LaneKey: Sendable, Hashable, CustomStringConvertible {
    package enum Owner: Sendable, Hashable {
        case app(String)
        case campaign(CampaignKey)
    }

    package let owner: Owner
    package let lane: Int

    package static func app(_ app: String, lane: Int) -> LaneKey { LaneKey(owner: .app(app), lane: lane) }
    package static func campaign(_ campaign: CampaignKey, lane: Int) -> LaneKey { LaneKey(owner: .campaign(campaign), lane: lane) }

    /// `<app>#<lane>` (the lane's Kafka key on the tasks topic) or `campaign:<id>#<lane>`,
    /// for logs.
    package var description: String {
        switch owner {
        case .app(let app): "\(app)#\(lane)"
        case .campaign(let campaign): "campaign:\(campaign)#\(lane)"
        }
    }
}
