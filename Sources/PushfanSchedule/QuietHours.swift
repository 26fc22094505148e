import Foundation
import PushfanSupport

/// A device's do-not-disturb window in its own local time, `start` up to (not including)
/// `end`, in minutes after midnight; a window may span midnight (22:00 to 07:00). Alert
/// pushes to a device inside it wait until it ends.
package struct QuietHours: Hashable, Sendable {
    package let start: Int
    package let end: Int

    package init(start: Int, end: Int) throws(QuietHoursError) {
        guard (0..<1440).contains(start), (0..<1440).contains(end) else { throw QuietHoursError("quiet hours must be times of day from 00:00 to 23:59") }
        guard start != end else { throw QuietHoursError("quiet hours must not start and end at the same time") }
        self.start = start
        self.end = end
    }

    /// From `HH:MM` texts, as devices register them.
    package init(start: String, end: String) throws(QuietHoursError) {
        try self.init(start: try Self.minutes(start), end: try Self.minutes(end))
    }

    package static func minutes(_ text: String) throws(QuietHoursError) -> Int {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2, let hour = Int(parts[0]), let minute = Int(parts[1]),
              (0...23).contains(hour), (0...59).contains(minute)
        else { throw QuietHoursError("quiet hours take times like \"22:00\", got \(Quote.clip(text, max: 20))") }
        return hour * 60 + minute
    }

    package static func text(_ minutes: Int) -> String {
        let (hour, minute) = (minutes / 60, minutes % 60)
        return (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
    }

    /// When the window that `now` (ms since the epoch) is inside ends, in ms since the epoch;
    /// nil when `now` is outside the window.
    package func end(containing now: Int64, in zone: TimeZone) -> Int64? {
        let local = LocalTime.reading(of: now, in: zone)
        let minute = local.hour * 60 + local.minute
        let inside = start < end ? (start <= minute && minute < end) : (minute >= start || minute < end)
        guard inside else { return nil }
        // Today's end if it is still ahead, else tomorrow's, read in the zone (its own rule for
        // a day clocks change; in an hour that repeats, the end still ahead).
        let today = (try? LocalTime(year: local.year, month: local.month, day: local.day, hour: end / 60, minute: end % 60)) ?? local
        let ending = minute < end ? today : today.adding(days: 1)
        return max(ending.instant(in: zone, after: now), now + 1)
    }
}

package struct QuietHoursError: Error, Equatable, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
