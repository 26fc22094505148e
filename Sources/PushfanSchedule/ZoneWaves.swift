import Foundation
import PushfanSupport

/// What happens to devices whose `options.local_time` has already passed when the campaign
/// is planned (`options.late`).
package enum LatePolicy: String, Sendable, CaseIterable, Codable {
    /// They end `skipped`, reason `local_time_passed`: a "good morning" is not sent at noon.
    /// The default.
    case skip
    /// They are sent at once.
    case sendNow = "send_now"
    /// They wait for the same local time on the next day.
    case nextDay = "next_day"

    package init(from decoder: any Decoder) throws {
        self = try StringEnum.decode(Self.self, from: decoder, what: "late policy")
    }

    package static let skippedReason = "local_time_passed"
}

/// One zone wave of a local-time campaign: the devices in `zones` (the empty name is devices
/// without a zone), sent from `sendAt`, or at once (nil), or ended `skipped` without a send.
package struct ZoneWave: Hashable, Sendable {
    package var sendAt: Int64?
    package var zones: [String]
    package var skip: Bool

    package init(sendAt: Int64?, zones: [String], skip: Bool = false) {
        self.sendAt = sendAt
        self.zones = zones
        self.skip = skip
    }

    /// Splits a local-time campaign by the moment `localTime` comes in each zone: zones that
    /// share the moment share a wave (every zone an hour ahead of UTC, say). Devices without a
    /// zone (`""`), and zones this machine does not know, take `defaultZone`. Zones where the
    /// moment has passed at `now` follow `late`. Waves come in time order, the at-once ones
    /// first.
    package static func plan(localTime: LocalTime, zones: [String], defaultZone: TimeZone, now: Int64, late: LatePolicy) -> [ZoneWave] {
        var waves: [Key: [String]] = [:]
        for name in Set(zones) {
            let zone = name.isEmpty ? defaultZone : TimeZone(identifier: name) ?? defaultZone
            var at = localTime.instant(in: zone)
            var key = Key(sendAt: at, skip: false)
            if at < now {
                switch late {
                case .skip: key = Key(sendAt: nil, skip: true)
                case .sendNow: key = Key(sendAt: nil, skip: false)
                case .nextDay:
                    // The next day's reading that is still ahead (one, unless the campaign was
                    // planned more than a day late in this zone).
                    var day = 1
                    repeat {
                        at = localTime.adding(days: day).instant(in: zone)
                        day += 1
                    } while at < now
                    key = Key(sendAt: at, skip: false)
                }
            }
            waves[key, default: []].append(name)
        }
        return waves.map { ZoneWave(sendAt: $0.key.sendAt, zones: $0.value.sorted(), skip: $0.key.skip) }
            .sorted { ($0.sendAt ?? Int64.min, $0.skip ? 0 : 1) < ($1.sendAt ?? Int64.min, $1.skip ? 0 : 1) }
    }

    private struct Key: Hashable {
        var sendAt: Int64?
        var skip: Bool
    }
}
