import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

/// The rules a campaign record meets on its way in, and the records that answer it: a size
/// limit checked before parsing, an expiration still ahead, resubmission told from reuse,
/// dead letters that fit in a Kafka message, and events that name the record they answer.
@Suite struct CampaignSubmissionTests {
    static func campaign(id: String = "c1", data: String = "x", expiration: Int64? = nil, submittedAt: Int64? = nil) -> String {
        let options = expiration.map { #"{"expiration":\#($0)}"# } ?? "{}"
        let submitted = submittedAt.map { #","submitted_at":\#($0)"# } ?? ""
        return #"{"v":1,"id":"\#(id)","app":"shop","audience":{"segment":"tag:all"},"notification":{"content":{"default":{"title":"Hi"}},"data":{"blob":"\#(data)"}},"options":\#(options)\#(submitted)}"#
    }

    @Test("a record over 512 KiB is refused as record_too_large before it is parsed; one just under is read")
    func recordSizeLimit() throws {
        let big = Array(Self.campaign(data: String(repeating: "a", count: 760_000)).utf8)
        #expect(throws: MessageDecodingError.self) { try Campaign.decodeRecord(big) }
        do {
            _ = try Campaign.decodeRecord(big)
        } catch {
            #expect(error.code == "record_too_large")
            #expect(error.description.contains("\(big.count) bytes") && error.description.contains("524288"), "\(error)")
        }
        // Not even JSON: the size alone decides, nothing is parsed.
        let garbage = [UInt8](repeating: 0x7B, count: Campaign.maxRecordBytes + 1)
        #expect(throws: MessageDecodingError.recordTooLarge(
            "the campaign record is \(garbage.count) bytes; at most \(Campaign.maxRecordBytes) are allowed (keep notification.data small, use a segment for large audiences)")) {
            try Campaign.decodeRecord(garbage)
        }
        // Just under the limit with a payload APNs takes: a long explicit audience.
        let ids = (0..<4_500).map { "\"device-\(String(repeating: "d", count: 100))-\($0)\"" }.joined(separator: ",")
        let fits = Self.campaign().replacingOccurrences(of: #"{"segment":"tag:all"}"#, with: #"{"devices":[\#(ids)]}"#)
        #expect(fits.utf8.count <= Campaign.maxRecordBytes && fits.utf8.count > Campaign.maxRecordBytes - 32 * 1024, "\(fits.utf8.count)")
        #expect(try Campaign.decodeRecord(Array(fits.utf8)).id == "c1")
    }

    @Test("an expiration already past is refused at submission with the time it names; 0, none and the future pass")
    func pastExpirationIsRefused() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let past = try Campaign.decodeRecord(Array(Self.campaign(expiration: 1_000_000_000).utf8))
        #expect(throws: MessageDecodingError.self) { try past.checkSubmittable(now: now) }
        do { try past.checkSubmittable(now: now) } catch {
            #expect(error.code == "invalid_field" && error.field == "options.expiration")
            #expect(error.description.contains("2001-09-09T01:46:40Z") && error.description.contains("has already passed"), "\(error)")
        }
        for expiration: Int64? in [nil, 0, 1_800_000_060] {
            let campaign = try Campaign.decodeRecord(Array(Self.campaign(expiration: expiration).utf8))
            try campaign.checkSubmittable(now: now)
        }
        // The very second it names counts as past: APNs would not deliver it either.
        let exact = try Campaign.decodeRecord(Array(Self.campaign(expiration: 1_800_000_000).utf8))
        #expect(throws: MessageDecodingError.self) { try exact.checkSubmittable(now: now) }
    }

    @Test("send_at: up to 30 days ahead is accepted, further is refused with the time it names; one already past sends now; seconds are refused")
    func sendAtLimits() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let nowMillis: Int64 = 1_800_000_000_000
        func campaign(sendAt: Int64) throws -> Campaign {
            try Campaign.decodeRecord(Array(Self.campaign().replacingOccurrences(of: #""options":{}"#, with: #""options":{"send_at":\#(sendAt)}"#).utf8))
        }
        for ok in [nowMillis - 60_000, nowMillis + 5_000, nowMillis + Campaign.maxScheduleAhead] {
            #expect(try campaign(sendAt: ok).options.sendAt == ok)
            try campaign(sendAt: ok).checkSubmittable(now: now)
        }
        let far = try campaign(sendAt: nowMillis + Campaign.maxScheduleAhead + 1_000)
        do {
            try far.checkSubmittable(now: now)
            Issue.record("a send_at 30 days and a second ahead was accepted")
        } catch {
            #expect(error.code == "invalid_field" && error.field == "options.send_at")
            #expect(error.description.contains("2027-02-14T08:00:01Z") && error.description.contains("more than 30 days ahead"), "\(error)")
        }
        #expect(throws: MessageDecodingError.self) { try campaign(sendAt: 1_800_000_000) }
    }

    @Test("the same campaign resent with another submitted_at is a resubmission; other content under its id is not")
    func resubmissionOrReuse() throws {
        let first = try Campaign.decodeRecord(Array(Self.campaign(submittedAt: 1_773_993_600_000).utf8))
        let resent = try Campaign.decodeRecord(Array(Self.campaign(submittedAt: 1_773_993_700_000).utf8))
        let other = try Campaign.decodeRecord(Array(Self.campaign(data: "y").utf8))
        #expect(resent.isResubmission(of: first))
        #expect(!other.isResubmission(of: first))
    }

    @Test("a dead letter keeps a small original whole, and a large one as a 64 KiB prefix with its size and SHA-256")
    func deadLetterOfALargeRecord() throws {
        let small = Array(repeating: UInt8(ascii: "s"), count: 1_000)
        let whole = DeadLetterRecord(
            topic: "pushfan.campaigns", partition: 0, offset: 7, key: "c1", error: "invalid_field", reason: "r", originalBytes: small, at: 1,
            sha256: { _ in Issue.record("a small original needs no digest"); return "" })
        #expect(!whole.truncated && whole.originalBytes() == Data(small) && whole.originalSize == nil)

        let large = Array(repeating: UInt8(ascii: "L"), count: 760_000)
        let digest = String(repeating: "ab", count: 32)
        let letter = DeadLetterRecord(
            topic: "pushfan.campaigns", partition: 2, offset: 9, key: "big", error: "record_too_large", reason: "too large",
            originalBytes: large, at: 1_773_993_600_000, sha256: { bytes in
                #expect(bytes.count == 760_000)
                return digest
            })
        #expect(letter.truncated)
        #expect(letter.originalSize == 760_000 && letter.originalSHA256 == digest)
        #expect(letter.originalBytes() == Data(large.prefix(DeadLetterRecord.truncatedPrefixBytes)))
        let encoded = MessageCodec.encode(letter)
        #expect(encoded.count < 100_000, "the dead letter is \(encoded.count) bytes")
        let text = String(decoding: encoded, as: UTF8.self)
        #expect(text.contains(#""original_size":760000"#) && text.contains(#""original_sha256":"\#(digest)""#))
        #expect(try MessageCodec.decode(DeadLetterRecord.self, from: encoded) == letter)
        // A digest that is not SHA-256 hex is refused on reading.
        let forged = text.replacingOccurrences(of: digest, with: "nothex")
        #expect(throws: MessageDecodingError.self) { try MessageCodec.decode(DeadLetterRecord.self, from: Data(forged.utf8)) }
    }

    @Test("campaign events name the record they answer and can say the campaign is paused, with the reason")
    func eventsNameTheirSubmission() throws {
        let answer = CampaignEvent(
            campaign: "c1", app: "shop", event: .accepted, audience: 10, submission: .init(partition: 3, offset: 42), at: 1_773_993_600_000)
        let encoded = MessageCodec.encode(ResultRecord.campaign(answer))
        #expect(String(decoding: encoded, as: UTF8.self).contains(#""submission":{"offset":42,"partition":3}"#))
        #expect(try MessageCodec.decode(ResultRecord.self, from: encoded) == .campaign(answer))

        let paused = CampaignEvent(campaign: "c1", app: "shop", event: .paused, error: "credentials fail", at: 1_773_993_600_000)
        let decoded = try MessageCodec.decode(ResultRecord.self, from: MessageCodec.encode(ResultRecord.campaign(paused)))
        #expect(decoded == .campaign(paused))
        // Events written before submissions existed still read.
        let old = #"{"v":1,"type":"campaign","campaign":"c1","app":"shop","event":"completed","counts":{"delivered":1},"at":1773993600000}"#
        guard case .campaign(let event) = try MessageCodec.decode(ResultRecord.self, from: Data(old.utf8)) else {
            Issue.record("not a campaign event")
            return
        }
        #expect(event.submission == nil)
        let negative = #"{"v":1,"type":"campaign","campaign":"c1","app":"shop","event":"accepted","submission":{"partition":-1,"offset":0},"at":1773993600000}"#
        #expect(throws: MessageDecodingError.invalidField("submission.partition", "must not be negative, got -1")) {
            try MessageCodec.decode(ResultRecord.self, from: Data(negative.utf8))
        }
    }
}
