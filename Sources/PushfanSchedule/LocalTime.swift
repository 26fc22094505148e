import Foundation
import PushfanSupport

/// A wall-clock date and time with no zone (`2026-03-08T09:00`): `options.local_time`, sent at
/// that reading of each device's own clock. Turned into an instant per zone with one rule for
/// the days clocks change: a time that does not exist (skipped when clocks go forward) moves
/// forward by the gap (02:30 becomes 03:30), and a time that happens twice (clocks go back)
/// is its first occurrence.
package struct LocalTime: Hashable, Sendable, CustomStringConvertible {
    package let year: Int
    package let month: Int
    package let day: Int
    package let hour: Int
    package let minute: Int
    package let second: Int

    package init(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int = 0) throws(MessageDecodingError) {
        guard (2000...2200).contains(year), (1...12).contains(month), (1...Self.days(inMonth: month, year: year)).contains(day) else {
            throw .invalidField("options.local_time", "\(year)-\(month)-\(day) is not a date")
        }
        guard (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second) else {
            throw .invalidField("options.local_time", "\(hour):\(minute):\(second) is not a time of day")
        }
        self.init(checked: (year, month, day, hour, minute, second))
    }

    private init(checked parts: (Int, Int, Int, Int, Int, Int)) {
        (year, month, day, hour, minute, second) = parts
    }

    /// `YYYY-MM-DDTHH:MM` or `YYYY-MM-DDTHH:MM:SS`, without a zone or offset.
    package init(parsing text: String) throws(MessageDecodingError) {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[range] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        func at(_ index: Int, _ character: Character) -> Bool { index < bytes.count && bytes[index] == character.asciiValue }
        guard bytes.count == 16 || bytes.count == 19, at(4, "-"), at(7, "-"), at(10, "T"), at(13, ":"), bytes.count == 16 || at(16, ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
              let minute = number(14..<16), let second = bytes.count == 19 ? number(17..<19) : 0
        else {
            throw .invalidField(
                "options.local_time", "must be a local date and time like \"2026-03-08T09:00\" (no zone: each device's own is used), got \(Quote.clip(text, max: 40))")
        }
        try self.init(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    package var description: String {
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)-\(two(month))-\(two(day))T\(two(hour)):\(two(minute))" + (second == 0 ? "" : ":\(two(second))")
    }

    /// The instant this reading happens in `zone`, in milliseconds since the epoch.
    package func instant(in zone: TimeZone) -> Int64 {
        let (occurrences, fallback) = occurrences(in: zone)
        // Twice: the first. Never (a gap): read with the offset before the change, which
        // lands as far after the change as the reading was into the gap.
        return (occurrences.first ?? fallback) * 1000
    }

    /// The reading's first instant after `moment` (ms since the epoch), as `instant(in:)`
    /// otherwise: on the night clocks go back it happens twice, and while the hour repeats
    /// the first is past and the second still ahead.
    package func instant(in zone: TimeZone, after moment: Int64) -> Int64 {
        let (occurrences, fallback) = occurrences(in: zone)
        return (occurrences.first { $0 * 1000 > moment } ?? occurrences.first ?? fallback) * 1000
    }

    /// The seconds since the epoch at which the zone's clocks read this, in order (none in a
    /// gap, two in a repeated hour), and the reading with the offset before a change.
    private func occurrences(in zone: TimeZone) -> (occurrences: [Int64], beforeChange: Int64) {
        let naive = naiveSeconds
        // The zone's offset a day either side: around a change these differ, and exactly the
        // readings between them are skipped or repeated.
        let before = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(naive - 86_400))))
        let after = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(naive + 86_400))))
        let candidates = Set([naive - before, naive - after]).filter { candidate in
            Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(candidate)))) == naive - candidate
        }
        return (candidates.sorted(), naive - before)
    }

    /// The same time of day `days` later (a calendar day, whatever its length in the zone).
    package func adding(days: Int) -> LocalTime {
        let shifted = Date(timeIntervalSince1970: Double(naiveSeconds + Int64(days) * 86_400))
        let parts = Self.utc.dateComponents([.year, .month, .day], from: shifted)
        // Valid by construction: a day moved within the Gregorian calendar.
        return LocalTime(checked: (parts.year ?? year, parts.month ?? month, parts.day ?? day, hour, minute, second))
    }

    /// This reading taken as UTC, in seconds since the epoch.
    private var naiveSeconds: Int64 {
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        return Int64(Self.utc.date(from: components)?.timeIntervalSince1970 ?? 0)
    }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? TimeZone(secondsFromGMT: 0)!
        return calendar
    }()

    private static func days(inMonth month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The local reading of `instant` (ms since the epoch) in `zone`, to the second.
    package static func reading(of instant: Int64, in zone: TimeZone) -> LocalTime {
        let date = Date(timeIntervalSince1970: Double(instant) / 1000)
        let local = Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down) + Double(zone.secondsFromGMT(for: date)))
        let parts = utc.dateComponents([.year, .month, .day, .hour, .minute, .second], from: local)
        return LocalTime(checked: (parts.year ?? 2000, parts.month ?? 1, parts.day ?? 1, parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0))
    }
}
