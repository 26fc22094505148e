import Foundation
import PushfanSupport

/// The rules a campaign record meets on its way in (`pushfan submit`, the planner, the API):
/// a bounded size, checked before parsing, and, at submission, an expiration still ahead.
extension Campaign {
    /// Largest campaign record, in bytes. The planner refuses a larger record without parsing
    /// it, so its dead letter (the bytes in base64, a third larger) stays well inside Kafka's
    /// default 1 MB message limit; an explicit audience of 10,000 ids of up to 40 characters
    /// fits. A notification itself is at most 4 or 5 KB per locale.
    package static let maxRecordBytes = 512 * 1024

    /// Decodes a campaign record, refusing one over `maxRecordBytes` before it is parsed.
    package static func decodeRecord(_ bytes: some Collection<UInt8>) throws(MessageDecodingError) -> Campaign {
        guard bytes.count <= maxRecordBytes else {
            throw .recordTooLarge(
                "the campaign record is \(bytes.count) bytes; at most \(maxRecordBytes) are allowed (keep notification.data small, use a segment for large audiences)")
        }
        return try MessageCodec.decode(Campaign.self, from: Data(bytes))
    }

    /// Refuses an expiration that has already passed at submission: every device would end
    /// `expired` without a send. `0` (now or never) and no expiration are always fine.
    package func checkSubmittable(now: Date) throws(MessageDecodingError) {
        try checkSchedule(now: now)
        guard let expiration = options.expiration, expiration > 0 else { return }
        let nowSeconds = now.timeIntervalSince1970
        guard Double(expiration) > nowSeconds else {
            let when = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(expiration)))
            throw .invalidField(
                "options.expiration",
                "\(expiration) (\(when)) has already passed; leave it out to let the sender choose, or give a time ahead")
        }
    }

    /// `options.send_at` at most `maxScheduleAhead` from `now` (one already past sends now);
    /// `options.local_time` still ahead in some zone and at most that far ahead in the first.
    /// The planner checks it too, for records produced straight onto the topic. A submitted
    /// campaign carries no winner's `decision`: that is the deciding worker's to write.
    package func checkSchedule(now: Date) throws(MessageDecodingError) {
        if decision != nil {
            throw .invalidField("decision", "is written by the worker that decides a winner campaign; a submission leaves it out")
        }
        let nowMillis = Int64(now.timeIntervalSince1970 * 1000)
        if let localTime = options.localTime {
            // Its first wave is where the day starts first (UTC+14), its last where it ends (UTC-12).
            let first = localTime.instant(in: TimeZone(secondsFromGMT: 14 * 3600) ?? .current)
            let last = localTime.instant(in: TimeZone(secondsFromGMT: -12 * 3600) ?? .current)
            guard first - nowMillis <= Self.maxScheduleAhead else {
                throw .invalidField(
                    "options.local_time", "\(localTime) comes more than 30 days ahead in the first time zone; Pushfan schedules at most 30 days ahead")
            }
            guard last > nowMillis else {
                throw .invalidField("options.local_time", "\(localTime) has passed in every time zone; give a local time still ahead somewhere")
            }
        }
        guard let sendAt = options.sendAt else { return }
        guard sendAt - nowMillis <= Self.maxScheduleAhead else {
            let when = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(sendAt) / 1000))
            throw .invalidField(
                "options.send_at",
                "\(sendAt) (\(when)) is more than 30 days ahead; Pushfan schedules at most 30 days ahead, submit it closer to its time")
        }
    }

    /// True when `other` is the same campaign resent (it may carry another `submitted_at`):
    /// a producer retrying after a timeout, not a different campaign reusing the id.
    package func isResubmission(of other: Campaign) -> Bool {
        var mine = self
        var theirs = other
        mine.submittedAt = nil
        theirs.submittedAt = nil
        // A winner's decision is the worker's addition to the stored record.
        mine.decision = nil
        theirs.decision = nil
        return mine == theirs
    }
}
