import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSchedule

/// Frequency cap rules: how they are written and refused, where their windows begin, and
/// which campaigns they apply to.
@Suite struct FrequencyCapTests {
    @Test func rulesReadAndPrintBack() throws {
        let caps = try FrequencyCaps(parsing: "3/1d, 1/1h,5/30m")
        #expect(caps.description == "3/1d,1/1h,5/30m")
        #expect(caps.rules.map(\.window) == [.days(1), .hours(1), .minutes(30)])
        #expect(try FrequencyCaps(parsing: "").isEmpty)
        #expect(try FrequencyCap(parsing: "1/30d").window == .days(30))
        #expect(try FrequencyCap(parsing: "1/720h").window == .hours(720))
        // Counted per user: the prefix reads and prints back; no rules are no caps at all.
        let perUser = try FrequencyCaps(parsing: "user:1/1h,3/1d")
        #expect(perUser.perUser && perUser.rules.count == 2 && perUser.description == "user:1/1h,3/1d")
        #expect(try !FrequencyCaps(parsing: "3/1d").perUser)
        #expect(try FrequencyCaps(parsing: "user:").isEmpty && !FrequencyCaps(parsing: "user:").perUser)
    }

    @Test("refuses rules it cannot honour, saying why", arguments: [
        ("2", "is not PUSHES/WINDOW, like 2/1d"),
        ("two/1d", "is not PUSHES/WINDOW"),
        ("0/1d", "the number of pushes must be from 1 to 1000, got 0"),
        ("2/31d", "a window is at most 30 days (30 of its unit), at least 1; got 31d"),
        ("2/721h", "at most 30 days (720 of its unit)"),
        ("2/1w", "has unit \"w\"; use m, h or d"),
        ("2/d", "is not a number and a unit"),
        ("1/1d,1/1d,1/1d,1/1d,1/1d,1/1d,1/1d,1/1d,1/1d,1/1d,1/1d", "at most 10 rules, got 11"),
    ])
    func refusals(_ text: String, _ message: String) {
        #expect {
            try FrequencyCaps(parsing: text)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test("an hour window is rolling; a day window starts at local midnight, days before today included")
    func windowStarts() throws {
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        // 2026-03-29 10:00 in Berlin (UTC+2 since 02:00 that morning) is 08:00 UTC.
        let now: Int64 = 1_774_771_200_000
        #expect(try FrequencyCap(parsing: "1/1h").windowStart(now: now, zone: berlin) == now - 3_600_000 + 1)
        // Local midnight of that day was still UTC+1: 2026-03-28 23:00 UTC.
        #expect(try FrequencyCap(parsing: "1/1d").windowStart(now: now, zone: berlin) == 1_774_738_800_000)
        // Two days: from the midnight before (UTC+1), 2026-03-27 23:00 UTC.
        #expect(try FrequencyCap(parsing: "1/2d").windowStart(now: now, zone: berlin) == 1_774_652_400_000)
        let caps = try FrequencyCaps(parsing: "2/1d,1/1h")
        let starts = caps.starts(now: now, zone: berlin)
        #expect(caps.admits([], starts: starts))
        #expect(caps.admits([now - 2 * 3_600_000], starts: starts), "one today, none in the last hour")
        #expect(!caps.admits([now - 2 * 3_600_000, now - 3 * 3_600_000], starts: starts), "two today")
        #expect(!caps.admits([now - 60_000], starts: starts), "one in the last hour")
        #expect(caps.admits([1_774_738_800_000 - 1, now - 2 * 3_600_000], starts: starts), "one of them yesterday")
    }

    @Test func whichCampaignsCount() throws {
        let alert = try MessageCodec.decode(Campaign.self, from: Array(CampaignTests.base.jsonText.utf8))
        #expect(alert.countsTowardFrequencyCaps)
        let transactional = try MessageCodec.decode(Campaign.self, from: Array(CampaignTests.base.setting("options.ignore_frequency_caps", true).jsonText.utf8))
        #expect(!transactional.countsTowardFrequencyCaps && transactional.options.ignoreFrequencyCaps)
        #expect(String(decoding: MessageCodec.encode(transactional), as: UTF8.self).contains(#""ignore_frequency_caps":true"#))
        #expect(!String(decoding: MessageCodec.encode(alert), as: UTF8.self).contains("ignore_frequency_caps"))
        let background = try MessageCodec.decode(Campaign.self, from: Array(CampaignTests.background.jsonText.utf8))
        #expect(!background.countsTowardFrequencyCaps, "a silent push is not one a person sees")
    }
}
