import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSchedule
@testable import PushfanSupport

/// Recipient local time and quiet hours, as pure rules: a local reading turned into each
/// zone's instant across clock changes, zones grouped into waves with each late policy, a
/// quiet window's end, and the campaign options that carry them.
@Suite struct LocalScheduleTests {
    static func zone(_ name: String) -> TimeZone { TimeZone(identifier: name)! }
    static func millis(_ iso: String) -> Int64 { Int64(ISO8601DateFormatter().date(from: iso)!.timeIntervalSince1970 * 1000) }

    @Test("09:00 is each zone's own 09:00, in summer and winter time, on the very day clocks change")
    func instantsPerZone() throws {
        // 8 March 2026: New York moves to summer time at 02:00; Berlin and Tokyo do not.
        let nine = try LocalTime(parsing: "2026-03-08T09:00")
        #expect(nine.instant(in: Self.zone("America/New_York")) == Self.millis("2026-03-08T13:00:00Z"))
        #expect(nine.instant(in: Self.zone("Europe/Berlin")) == Self.millis("2026-03-08T08:00:00Z"))
        #expect(nine.instant(in: Self.zone("Asia/Tokyo")) == Self.millis("2026-03-08T00:00:00Z"))
        // The day before, New York was still five hours behind.
        #expect(try LocalTime(parsing: "2026-03-07T09:00").instant(in: Self.zone("America/New_York")) == Self.millis("2026-03-07T14:00:00Z"))
        // A reading the change skips moves on by the gap; one that happens twice is the first.
        #expect(try LocalTime(parsing: "2026-03-08T02:30").instant(in: Self.zone("America/New_York")) == Self.millis("2026-03-08T07:30:00Z"))
        #expect(try LocalTime(parsing: "2026-11-01T01:30").instant(in: Self.zone("America/New_York")) == Self.millis("2026-11-01T05:30:00Z"))
        #expect(try LocalTime(parsing: "2026-03-08T09:00:30").instant(in: Self.zone("UTC")) == Self.millis("2026-03-08T09:00:30Z"))
        #expect(try LocalTime(parsing: "2026-02-28T09:00").adding(days: 1).description == "2026-03-01T09:00")
        #expect(try LocalTime(parsing: "2028-02-28T09:00").adding(days: 1).description == "2028-02-29T09:00")
        #expect(LocalTime.reading(of: Self.millis("2026-03-08T13:00:00Z"), in: Self.zone("America/New_York")).description == "2026-03-08T09:00")
    }

    @Test("a local time that is not a date and time without a zone is refused, naming options.local_time")
    func localTimeParsing() {
        for bad in ["09:00", "2026-03-08 09:00", "2026-03-08T09:00Z", "2026-03-08T09:00+01:00", "2026-02-30T09:00", "2026-13-01T09:00", "2026-03-08T24:00", "2026-3-8T9:00", ""] {
            do {
                _ = try LocalTime(parsing: bad)
                Issue.record("\(bad.debugDescription) was accepted")
            } catch {
                #expect(error.field == "options.local_time", "\(bad): \(error)")
            }
        }
    }

    @Test("zones with the same moment share a wave; devices without a zone take the app's; late zones follow the policy")
    func wavesAndLatePolicies() throws {
        let nine = try LocalTime(parsing: "2026-03-08T09:00")
        let zones = ["Europe/Berlin", "Europe/Paris", "America/New_York", "Asia/Tokyo", ""]
        // 10:00 UTC: Tokyo (00:00 UTC) and Berlin/Paris (08:00 UTC) are past; New York is ahead.
        let now = Self.millis("2026-03-08T10:00:00Z")
        let berlin = Self.zone("Europe/Berlin")
        let skip = ZoneWave.plan(localTime: nine, zones: zones, defaultZone: berlin, now: now, late: .skip)
        #expect(skip == [
            ZoneWave(sendAt: nil, zones: ["", "Asia/Tokyo", "Europe/Berlin", "Europe/Paris"], skip: true),
            ZoneWave(sendAt: Self.millis("2026-03-08T13:00:00Z"), zones: ["America/New_York"]),
        ])
        let sendNow = ZoneWave.plan(localTime: nine, zones: zones, defaultZone: berlin, now: now, late: .sendNow)
        #expect(sendNow.first == ZoneWave(sendAt: nil, zones: ["", "Asia/Tokyo", "Europe/Berlin", "Europe/Paris"]))
        let nextDay = ZoneWave.plan(localTime: nine, zones: zones, defaultZone: Self.zone("UTC"), now: now, late: .nextDay)
        #expect(nextDay == [
            ZoneWave(sendAt: Self.millis("2026-03-08T13:00:00Z"), zones: ["America/New_York"]),
            ZoneWave(sendAt: Self.millis("2026-03-09T00:00:00Z"), zones: ["Asia/Tokyo"]),
            ZoneWave(sendAt: Self.millis("2026-03-09T08:00:00Z"), zones: ["Europe/Berlin", "Europe/Paris"]),
            ZoneWave(sendAt: Self.millis("2026-03-09T09:00:00Z"), zones: [""]),
        ])
        // Planned early, nothing is late: one wave per moment, in time order.
        let early = ZoneWave.plan(localTime: nine, zones: zones, defaultZone: berlin, now: Self.millis("2026-03-07T00:00:00Z"), late: .skip)
        #expect(early.map(\.sendAt) == [Self.millis("2026-03-08T00:00:00Z"), Self.millis("2026-03-08T08:00:00Z"), Self.millis("2026-03-08T13:00:00Z")])
        #expect(early[1].zones == ["", "Europe/Berlin", "Europe/Paris"])
    }

    @Test("quiet hours: inside the window the end is its next end in the device's zone, across midnight; outside nothing is held")
    func quietWindows() throws {
        let night = try QuietHours(start: "22:00", end: "07:00")
        let berlin = Self.zone("Europe/Berlin")
        // 23:30 Berlin (22:30 UTC in winter): held until 07:00 Berlin the next morning.
        #expect(night.end(containing: Self.millis("2026-01-10T22:30:00Z"), in: berlin) == Self.millis("2026-01-11T06:00:00Z"))
        // 05:00 Berlin: until 07:00 the same morning.
        #expect(night.end(containing: Self.millis("2026-01-11T04:00:00Z"), in: berlin) == Self.millis("2026-01-11T06:00:00Z"))
        // 12:00 Berlin: not quiet.
        #expect(night.end(containing: Self.millis("2026-01-11T11:00:00Z"), in: berlin) == nil)
        // The end itself is outside the window, the start inside.
        #expect(night.end(containing: Self.millis("2026-01-11T06:00:00Z"), in: berlin) == nil)
        #expect(night.end(containing: Self.millis("2026-01-10T21:00:00Z"), in: berlin) != nil)
        // A daytime window in New York on the day summer time starts.
        let lunch = try QuietHours(start: "12:00", end: "13:30")
        #expect(lunch.end(containing: Self.millis("2026-03-08T16:15:00Z"), in: Self.zone("America/New_York")) == Self.millis("2026-03-08T17:30:00Z"))
        // The night New York's clocks go back (01:59 EDT, then 01:00 EST again): at 01:10 in
        // the repeated hour the window ends at 01:30 EST, still ahead, not at 01:30 EDT, past
        // (which held the device for 1 ms, again and again, for the rest of the hour).
        let late = try QuietHours(start: "23:00", end: "01:30")
        let newYork = Self.zone("America/New_York")
        #expect(late.end(containing: Self.millis("2026-11-01T05:10:00Z"), in: newYork) == Self.millis("2026-11-01T05:30:00Z"), "01:10 EDT: 01:30 EDT")
        #expect(late.end(containing: Self.millis("2026-11-01T06:10:00Z"), in: newYork) == Self.millis("2026-11-01T06:30:00Z"), "01:10 EST: 01:30 EST")
        for (start, end) in [("22:00", "22:00"), ("24:00", "07:00"), ("7:00", "08:00"), ("22:00", "x")] {
            #expect(throws: QuietHoursError.self, "\(start)-\(end)") { try QuietHours(start: start, end: end) }
        }
    }

    static func campaign(options: String) throws -> Campaign {
        try MessageCodec.decode(Campaign.self, from: Data(#"{"v":1,"id":"c1","app":"shop","audience":{"segment":"tag:all"},"notification":{"content":{"default":{"title":"Hi"}}},"options":\#(options)}"#.utf8))
    }

    @Test("local_time, late and ignore_quiet_hours are read and written back; with send_at, or late alone, they are refused")
    func campaignOptions() throws {
        let campaign = try Self.campaign(options: #"{"local_time":"2026-03-08T09:00","late":"next_day","ignore_quiet_hours":true}"#)
        #expect(campaign.options.localTime?.description == "2026-03-08T09:00")
        #expect(campaign.options.latePolicy == .nextDay)
        #expect(campaign.options.ignoreQuietHours)
        #expect(try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign)) == campaign)
        #expect(try Self.campaign(options: #"{"local_time":"2026-03-08T09:00"}"#).options.latePolicy == .skip)
        let refusals: [(String, String, String)] = [
            (#"{"local_time":"2026-03-08T09:00","send_at":1772960400000}"#, "options.local_time", "cannot be given with options.send_at"),
            (#"{"late":"skip"}"#, "options.late", "applies only to a campaign with options.local_time"),
            (#"{"local_time":"2026-03-08T09:00","late":"later"}"#, "options.late", "expected one of: skip, send_now, next_day"),
            (#"{"local_time":"tomorrow"}"#, "options.local_time", "like \"2026-03-08T09:00\""),
        ]
        for (options, field, message) in refusals {
            do {
                _ = try Self.campaign(options: options)
                Issue.record("\(options) was accepted")
            } catch let error as MessageDecodingError {
                #expect(error.field == field && error.description.contains(message), "\(options): \(error)")
            }
        }
    }

    @Test("a local time already past in every zone, or more than 30 days ahead in the first, is refused at submission")
    func localTimeSchedule() throws {
        let now = Date(timeIntervalSince1970: Double(Self.millis("2026-03-08T10:00:00Z")) / 1000)
        // Still ahead west of UTC-1: fine, even though Tokyo and Berlin are past.
        try Self.campaign(options: #"{"local_time":"2026-03-08T09:00"}"#).checkSubmittable(now: now)
        for (options, message) in [
            (#"{"local_time":"2026-03-07T09:00"}"#, "has passed in every time zone"),
            (#"{"local_time":"2026-04-08T09:00"}"#, "more than 30 days ahead"),
        ] {
            let campaign = try Self.campaign(options: options)
            do {
                try campaign.checkSubmittable(now: now)
                Issue.record("\(options) was accepted")
            } catch {
                #expect(error.field == "options.local_time" && error.description.contains(message), "\(error)")
            }
        }
    }

    @Test("a task's zones, listed rows and skip reason survive the topic; an unknown skip reason is refused")
    func taskFields() throws {
        let task = TaskRecord(
            campaign: "c1", app: "shop", shard: 3, shards: 4, after: nil, through: nil, estimate: 2, lane: 1, lanes: 2,
            notBefore: 1_772_960_400_000, zones: ["", "Europe/Berlin"], rows: [5, 9], skip: LatePolicy.skippedReason)
        #expect(try MessageCodec.decode(TaskRecord.self, from: MessageCodec.encode(task)) == task)
        var odd = task
        odd.skip = "because"
        #expect(throws: MessageDecodingError.self) { try MessageCodec.decode(TaskRecord.self, from: MessageCodec.encode(odd)) }
    }
}
