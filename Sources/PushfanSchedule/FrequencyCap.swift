import Foundation

/// One of an app's frequency caps: at most `pushes` alert pushes to a device within
/// `window`. Minute and hour windows are rolling (the last 60 minutes); day windows are
/// calendar days in the device's time zone (`1d` is today, `7d` today and the six days
/// before), as Braze counts them. Written `2/1d`, `1/1h`, `5/30m`.
package struct FrequencyCap: Hashable, Sendable, CustomStringConvertible {
    package enum Window: Hashable, Sendable {
        case minutes(Int), hours(Int), days(Int)
    }

    package let pushes: Int
    package let window: Window

    /// Longest window: 30 days (or as many hours or minutes).
    package static let maxWindowDays = 30
    package static let maxPushes = 1_000
    /// Most rules an app may have.
    package static let maxRules = 10

    package init(pushes: Int, window: Window) throws(FrequencyCapError) {
        guard (1...Self.maxPushes).contains(pushes) else {
            throw FrequencyCapError("the number of pushes must be from 1 to \(Self.maxPushes), got \(pushes)")
        }
        let (count, limit) = switch window {
        case .minutes(let count): (count, Self.maxWindowDays * 1_440)
        case .hours(let count): (count, Self.maxWindowDays * 24)
        case .days(let count): (count, Self.maxWindowDays)
        }
        guard (1...limit).contains(count) else {
            throw FrequencyCapError("a window is at most \(Self.maxWindowDays) days (\(limit) of its unit), at least 1; got \(Self.describe(window))")
        }
        self.pushes = pushes
        self.window = window
    }

    /// `PUSHES/WINDOW`, the window a number and `m`, `h` or `d`: `2/1d`.
    package init(parsing text: String) throws(FrequencyCapError) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let pushes = Int(parts[0]) else {
            throw FrequencyCapError("\(text.debugDescription) is not PUSHES/WINDOW, like 2/1d (2 per calendar day) or 1/1h")
        }
        try self.init(pushes: pushes, window: try Self.window(String(parts[1])))
    }

    /// `1d`, `6h`, `30m`.
    package static func window(_ text: String) throws(FrequencyCapError) -> Window {
        guard let unit = text.last, let count = Int(text.dropLast()), count > 0 else {
            throw FrequencyCapError("window \(text.debugDescription) is not a number and a unit (m, h or d), like 1d or 6h")
        }
        switch unit {
        case "m": return .minutes(count)
        case "h": return .hours(count)
        case "d": return .days(count)
        default: throw FrequencyCapError("window \(text.debugDescription) has unit \(String(unit).debugDescription); use m, h or d")
        }
    }

    static func describe(_ window: Window) -> String {
        switch window {
        case .minutes(let count): "\(count)m"
        case .hours(let count): "\(count)h"
        case .days(let count): "\(count)d"
        }
    }

    package var windowText: String { Self.describe(window) }
    package var description: String { "\(pushes)/\(windowText)" }

    /// Where the window that ends at `now` (ms) begins: a push at or after it counts.
    package func windowStart(now: Int64, zone: TimeZone) -> Int64 {
        switch window {
        case .minutes(let count): return now - Int64(count) * 60_000 + 1
        case .hours(let count): return now - Int64(count) * 3_600_000 + 1
        case .days(let count):
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            let today = calendar.startOfDay(for: Date(timeIntervalSince1970: Double(now) / 1_000))
            let first = calendar.date(byAdding: .day, value: -(count - 1), to: today) ?? today
            return Int64((first.timeIntervalSince1970 * 1_000).rounded())
        }
    }
}

/// An app's caps together: a push is allowed only if every rule allows it. They count per
/// device, or per user (`perUser`): then every push to any device of the user counts, so a
/// user with three devices gets the cap, not three times it; a device without a user counts
/// alone.
package struct FrequencyCaps: Hashable, Sendable {
    package let rules: [FrequencyCap]
    package let perUser: Bool

    package init(_ rules: [FrequencyCap], perUser: Bool = false) { (self.rules, self.perUser) = (rules, perUser && !rules.isEmpty) }

    /// The prefix of caps counted per user in their text: `user:1/1h,3/1d`.
    package static let perUserPrefix = "user:"

    package var isEmpty: Bool { rules.isEmpty }

    /// Pushes older than this (ms before now) can no longer count under any rule: the
    /// longest window, with a day to spare for the widest zone offsets.
    package var memory: Int64 { Int64(FrequencyCap.maxWindowDays + 2) * 86_400_000 }

    /// Each rule's window start at `now` for a device in `zone`.
    package func starts(now: Int64, zone: TimeZone) -> [Int64] {
        rules.map { $0.windowStart(now: now, zone: zone) }
    }

    /// True when one more push fits every rule, given the device's earlier pushes (ms) and
    /// the rules' window starts.
    package func admits(_ pushes: [Int64], starts: [Int64]) -> Bool {
        for (rule, start) in zip(rules, starts) where pushes.count(where: { $0 >= start }) >= rule.pushes { return false }
        return true
    }

    /// `2/1d,1/1h`, or `user:2/1d,1/1h` counted per user; empty for none.
    package var description: String { (perUser ? Self.perUserPrefix : "") + rules.map(\.description).joined(separator: ",") }

    /// Reads `2/1d,1/1h` (commas or spaces between rules), `user:` first to count per user; an
    /// empty text is no caps.
    package init(parsing text: String) throws(FrequencyCapError) {
        let perUser = text.hasPrefix(Self.perUserPrefix)
        let parts = text.dropFirst(perUser ? Self.perUserPrefix.count : 0).split(whereSeparator: { $0 == "," || $0 == " " })
        var rules: [FrequencyCap] = []
        for part in parts { rules.append(try FrequencyCap(parsing: String(part))) }
        guard rules.count <= FrequencyCap.maxRules else {
            throw FrequencyCapError("at most \(FrequencyCap.maxRules) rules, got \(rules.count)")
        }
        self.init(rules, perUser: perUser)
    }
}

package struct FrequencyCapError: Error, Equatable, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
