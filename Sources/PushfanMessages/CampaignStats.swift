import Foundation
import PushfanSupport

/// One line of a campaign's engagement counts: per variant (`holdout` for the holdout, empty
/// for a campaign without variants), kind and detail (the action's id, the custom event's
/// name, the conversion's currency), the events, the distinct devices and the values' sum.
package struct EngagementCount: Sendable, Hashable {
    package let variant: String
    package let kind: EngagementEvent.Kind
    package let detail: String
    package let events: Int64
    package let devices: Int64
    package let value: Double

    package init(variant: String, kind: EngagementEvent.Kind, detail: String, events: Int64, devices: Int64, value: Double) {
        (self.variant, self.kind, self.detail, self.events, self.devices, self.value) = (variant, kind, detail, events, devices, value)
    }
}

/// A campaign's outcomes and engagement, per variant, as `GET …/campaigns/{id}/stats` and
/// `pushfan campaigns stats` show them (docs/api.md, "Campaign stats"). Pure: the counts go
/// in, the rates and the holdout's lift come out.
///
/// Rates are per device: opened devices over delivered devices (a device opening twice is
/// one open), converting devices over delivered devices, and for the holdout converting
/// devices over the devices it held out. The lift compares like with like: the variants' converting
/// devices over every device a request went to (delivered or not: the holdout too holds
/// devices whose tokens APNs would have refused) minus the holdout's rate, with the 95 % interval of a
/// difference of two proportions by Newcombe's method from Wilson's score intervals, which
/// stays an interval at rates of 0 and 1; nil until both groups have devices.
package struct CampaignStats: Sendable {
    /// The name a campaign without variants shows its one group under.
    package static let allDevices = "all"

    package struct Group: Sendable {
        package var outcomes: [String: Int] = [:]
        package var engagement: [EngagementCount] = []

        /// Devices APNs accepted for this group.
        package var delivered: Int { outcomes["delivered"] ?? 0 }
        /// Devices of the group with a final outcome (the holdout's are `skipped`).
        package var devices: Int { outcomes.values.reduce(0, +) }
        /// The holdout's devices held out (`skipped`): not those that ended `cancelled` or
        /// `expired` because the campaign was cancelled or expired first, whose conversions
        /// cannot count for it.
        package var heldOut: Int { outcomes[DeviceOutcome.skipped.rawValue] ?? 0 }
        /// Devices a request went to: delivered, or refused or failed at APNs; not those
        /// skipped, expired or cancelled before one.
        package var sentTo: Int {
            [DeviceOutcome.delivered, .rejected, .invalidToken, .failed].map { outcomes[$0.rawValue] ?? 0 }.reduce(0, +)
        }

        func devices(of kind: EngagementEvent.Kind) -> Int64 {
            engagement.filter { $0.kind == kind }.map(\.devices).reduce(0, +)
        }
    }

    package struct Lift: Sendable, Equatable {
        package let treatedRate: Double
        package let holdoutRate: Double
        package let absolute: Double
        package let low: Double
        package let high: Double
    }

    package let groups: [String: Group]
    /// A winner campaign's setting and, once made, its decision.
    package var winner: Campaign.Winner?
    package var decision: Campaign.Decision?

    /// `outcomes`: final outcome counts per variant (`holdout` included); `engagement` the
    /// store's counts.
    package init(outcomes: [String: [String: Int]], engagement: [EngagementCount]) {
        var groups: [String: Group] = [:]
        for (variant, counts) in outcomes { groups[Self.name(variant), default: Group()].outcomes = counts }
        for count in engagement { groups[Self.name(count.variant), default: Group()].engagement.append(count) }
        self.groups = groups
    }

    private static func name(_ variant: String) -> String { variant.isEmpty ? allDevices : variant }

    /// The variants' conversion rate against the holdout's: the variants' over the devices
    /// a request went to, the holdout's over the devices it held out.
    package var holdoutLift: Lift? {
        guard let holdout = groups[Campaign.holdoutReason] else { return nil }
        let treated = groups.filter { $0.key != Campaign.holdoutReason }.values
        let (treatedDevices, treatedConverted) = (treated.map(\.sentTo).reduce(0, +), treated.map { $0.devices(of: .converted) }.reduce(0, +))
        let (holdoutDevices, holdoutConverted) = (holdout.heldOut, holdout.devices(of: .converted))
        guard treatedDevices > 0, holdoutDevices > 0 else { return nil }
        let p1 = min(1, Double(treatedConverted) / Double(treatedDevices))
        let p2 = min(1, Double(holdoutConverted) / Double(holdoutDevices))
        let (l1, u1) = Self.wilson(p1, Double(treatedDevices))
        let (l2, u2) = Self.wilson(p2, Double(holdoutDevices))
        let low = p1 - p2 - ((p1 - l1) * (p1 - l1) + (u2 - p2) * (u2 - p2)).squareRoot()
        let high = p1 - p2 + ((u1 - p1) * (u1 - p1) + (p2 - l2) * (p2 - l2)).squareRoot()
        return Lift(treatedRate: p1, holdoutRate: p2, absolute: p1 - p2, low: low, high: high)
    }

    /// Wilson's 95 % score interval of a proportion `p` of `n`.
    static func wilson(_ p: Double, _ n: Double) -> (low: Double, high: Double) {
        let z = 1.96
        let scale = 1 + z * z / n
        let center = (p + z * z / (2 * n)) / scale
        let half = z * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot() / scale
        return (max(0, center - half), min(1, center + half))
    }

    /// The answer's JSON: per group its outcomes, each kind's events and devices, actions by
    /// id, conversions (value per currency), custom events by name, and its rates.
    package var jsonValue: JSONValue {
        var variants: [String: JSONValue] = [:]
        for (name, group) in groups {
            var object: [String: JSONValue] = ["outcomes": .object(group.outcomes.mapValues { .int(Int64($0)) }), "delivered": .int(Int64(group.delivered))]
            var actions: [String: JSONValue] = [:], custom: [String: JSONValue] = [:], values: [String: JSONValue] = [:]
            var conversions: (events: Int64, devices: Int64) = (0, 0)
            for count in group.engagement {
                let tally: JSONValue = ["events": .int(count.events), "devices": .int(count.devices)]
                switch count.kind {
                case .received, .opened, .dismissed: object[count.kind.rawValue] = tally
                case .action: actions[count.detail] = tally
                case .custom: custom[count.detail] = tally
                case .converted:
                    conversions.events += count.events
                    conversions.devices += count.devices
                    if count.detail.isEmpty && count.value == 0 { continue }
                    values[count.detail.isEmpty ? "none" : count.detail] = .number(count.value)
                }
            }
            for kind in [EngagementEvent.Kind.received, .opened, .dismissed] where object[kind.rawValue] == nil {
                object[kind.rawValue] = ["events": 0, "devices": 0]
            }
            object["actions"] = .object(actions)
            object["custom"] = .object(custom)
            object["conversions"] = ["events": .int(conversions.events), "devices": .int(conversions.devices), "value": .object(values)]
            let base = name == Campaign.holdoutReason ? group.heldOut : group.delivered
            object["open_rate"] = Self.rate(group.devices(of: .opened), base)
            object["conversion_rate"] = Self.rate(conversions.devices, base)
            variants[name] = .object(object)
        }
        var answer: [String: JSONValue] = ["variants": .object(variants)]
        if let winner {
            var object: [String: JSONValue] = [
                "test_percent": .int(Int64(winner.testPercent)), "after_s": .int(Int64(winner.afterSeconds)), "metric": .string(winner.metric.rawValue),
                "decision": .null,
            ]
            if let decision {
                object["decision"] = [
                    "variant": .string(decision.variant), "metric": .string(decision.metric.rawValue), "at": .int(decision.at),
                    "rates": .object(decision.rates.mapValues { .number($0) }), "devices": .object(decision.devices.mapValues { .int(Int64($0)) }),
                ]
            }
            answer["winner"] = .object(object)
        }
        if let lift = holdoutLift {
            answer["holdout_lift"] = [
                "treated_rate": .number(lift.treatedRate), "holdout_rate": .number(lift.holdoutRate), "absolute": .number(lift.absolute),
                "ci95": .array([.number(lift.low), .number(lift.high)]),
            ]
        }
        return .object(answer)
    }

    private static func rate(_ part: Int64, _ whole: Int) -> JSONValue {
        whole > 0 ? .number((Double(part) / Double(whole) * 10_000).rounded() / 10_000) : .null
    }
}
