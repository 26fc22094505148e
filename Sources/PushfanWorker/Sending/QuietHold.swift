import Foundation
import PushfanMessages
import PushfanStore

/// Which of a page's devices quiet hours hold back, and until when: the pure decision behind
/// the sender's quiet-hours step. Only alert pushes are held (a background push is silent),
/// and a campaign may ignore quiet hours (transactional sends).
struct QuietHold {
    static let expiredReason = "quiet hours last past the expiration"

    /// The devices to send now, those held until a moment (their window's end, ms since the
    /// epoch), and those whose window outlasts the campaign's expiration (they end `expired`
    /// now: they could never be sent outside their quiet hours in time).
    struct Split {
        var send: [DeviceTarget] = []
        var held: [Int64: [DeviceTarget]] = [:]
        var expired: [DeviceTarget] = []
    }

    static func applies(to campaign: Campaign) -> Bool {
        campaign.notification.pushType == .alert && !campaign.options.ignoreQuietHours
    }

    /// `expiration`: the campaign's `apns-expiration` in seconds (0: now or never). `zones`
    /// caches the zones by name across pages (building one is slow).
    static func split(
        _ devices: [DeviceTarget], now: Int64, defaultZone: TimeZone, expiration: Int64?, zones: inout DeviceZones
    ) -> Split {
        var split = Split()
        for device in devices {
            guard let quiet = device.quietHours else {
                split.send.append(device)
                continue
            }
            let zone = zones.zone(of: device, defaultZone: defaultZone)
            guard let until = quiet.end(containing: now, in: zone) else {
                split.send.append(device)
                continue
            }
            if let expiration, expiration * 1000 <= until {
                split.expired.append(device)
            } else {
                split.held[until, default: []].append(device)
            }
        }
        return split
    }
}

/// Devices' time zones by name, kept across a task's pages: building a `TimeZone` is slow.
struct DeviceZones {
    private var known: [String: TimeZone] = [:]

    /// The device's own zone, else (none, or a name this system does not know) its app's.
    mutating func zone(of device: DeviceTarget, defaultZone: TimeZone) -> TimeZone {
        guard let name = device.timezone else { return defaultZone }
        if let zone = known[name] { return zone }
        let zone = TimeZone(identifier: name) ?? defaultZone
        known[name] = zone
        return zone
    }
}
