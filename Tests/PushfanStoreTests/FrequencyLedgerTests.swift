import Foundation
import PushfanCore
import Testing

@testable import PushfanStore

/// Frequency caps in the store, on both backends: admission across campaigns, the same
/// campaign admitted again, calendar days in the device's zone, pushes given back, and
/// concurrent admitters.
@Suite struct FrequencyLedgerTests {
    static let tokyo = TimeZone(identifier: "Asia/Tokyo")!
    static let utc = TimeZone(secondsFromGMT: 0)!

    /// A store with app `capped` (rules `caps`) and `count` devices; returns their row keys.
    static func store(_ backend: Backend, caps: String, count: Int = 3) async throws -> (DeviceStore, [Int64]) {
        let store = try await backend.openFresh()
        var registration = AppRegistration(app: "capped", topic: "com.example.capped", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil))
        registration.frequencyCaps = try FrequencyCaps(parsing: caps)
        _ = try await store.apps.add(registration)
        #expect(try await store.apps.get("capped")?.frequencyCaps.description == caps)
        var keys: [Int64] = []
        for index in 0..<count {
            keys.append(try await store.devices.register(app: "capped", DeviceRegistration(deviceID: "d\(index)", token: String(format: "%064x", index + 1))).rowKey)
        }
        return (store, keys)
    }

    /// Admits as a sender does: claims the devices for `campaign` with them as candidates
    /// (`DeliveryLedger.claim(admitting:)`); returns those the caps hold back.
    static func admit(
        _ store: DeviceStore, campaign id: String, _ devices: [FrequencyLedger.Candidate], caps: FrequencyCaps, now: Int64
    ) async throws -> Set<Int64> {
        let targets = devices.map { DeviceTarget(rowKey: $0.rowKey, deviceID: "d-\($0.rowKey)", token: "t", environment: .production, locale: nil) }
        let admission = FrequencyLedger.Admission(app: "capped", caps: caps, candidates: Dictionary(devices.map { ($0.rowKey, $0.zone) }) { first, _ in first })
        return try await store.ledger.claim(campaign: CampaignKey(app: "capped", id: id), targets: targets, owner: "sender", now: now, admitting: admission).capped
    }

    /// Milliseconds of a wall-clock reading in `zone`.
    static func at(_ text: String, in zone: TimeZone) -> Int64 {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        formatter.timeZone = zone
        formatter.locale = Locale(identifier: "en_US_POSIX")
        return Int64(formatter.date(from: text)!.timeIntervalSince1970 * 1000)
    }

    @Test("under 2 per day a third campaign is held back; the same campaign admitted again is not counted twice", arguments: Backend.enabled)
    func twoPerDay(_ backend: Backend) async throws {
        let (store, keys) = try await Self.store(backend, caps: "2/1d")
        let caps = try #require(try await store.apps.get("capped")).frequencyCaps
        let now = Self.at("2026-12-01 10:00", in: Self.utc)
        let devices = keys.map { FrequencyLedger.Candidate(rowKey: $0, zone: Self.utc) }
        #expect(try await Self.admit(store, campaign: "c1", devices, caps: caps, now: now).isEmpty)
        #expect(try await Self.admit(store, campaign: "c1", devices, caps: caps, now: now + 1_000).isEmpty, "a page sent again")
        #expect(try await Self.admit(store, campaign: "c2", Array(devices.prefix(2)), caps: caps, now: now + 2_000).isEmpty)
        let third = try await Self.admit(store, campaign: "c3", devices, caps: caps, now: now + 3_000)
        #expect(third == Set(keys.prefix(2)), "two pushes today already")
        #expect(try await store.frequency.pushes(rowKey: keys[2]).map(\.campaign.id) == ["c1", "c3"])
        #expect(try await store.frequency.pushes(rowKey: keys[0]).map(\.campaign.id) == ["c1", "c2"], "the held-back push is not counted")

        // A device that did not receive c2 after all gives its push back: c3 fits now.
        try await store.frequency.forget(campaign: CampaignKey(app: "capped", id: "c2"), rowKeys: [keys[0]])
        #expect(try await Self.admit(store, campaign: "c3", [devices[0]], caps: caps, now: now + 4_000).isEmpty)
    }

    @Test("a day is a calendar day in the device's zone; an hour is the last 60 minutes", arguments: Backend.enabled)
    func calendarDaysInTheDevicesZone(_ backend: Backend) async throws {
        let (store, keys) = try await Self.store(backend, caps: "1/1d,3/2h", count: 2)
        let caps = try #require(try await store.apps.get("capped")).frequencyCaps
        let tokyoDevice = FrequencyLedger.Candidate(rowKey: keys[0], zone: Self.tokyo)
        let utcDevice = FrequencyLedger.Candidate(rowKey: keys[1], zone: Self.utc)
        // 23:30 in Tokyo is 14:30 UTC: both get a push.
        let evening = Self.at("2026-12-01 23:30", in: Self.tokyo)
        #expect(try await Self.admit(store, campaign: "a", [tokyoDevice, utcDevice], caps: caps, now: evening).isEmpty)
        // 40 minutes later it is the next day in Tokyo, still the same day in UTC.
        let afterMidnight = evening + 40 * 60_000
        let next = try await Self.admit(store, campaign: "b", [tokyoDevice, utcDevice], caps: caps, now: afterMidnight)
        #expect(next == [keys[1]], "Tokyo's new day admits; UTC's day still has its push")
        // Tokyo's device now has 2 pushes within 2 hours, and 1 today: a third campaign the
        // same Tokyo day is held by the day rule.
        #expect(try await Self.admit(store, campaign: "c", [tokyoDevice], caps: caps, now: afterMidnight + 60_000) == [keys[0]])
    }

    @Test("pushes too old for any rule are dropped as they are met", arguments: Backend.enabled)
    func oldPushesAreForgotten(_ backend: Backend) async throws {
        let (store, keys) = try await Self.store(backend, caps: "1/1h", count: 1)
        let caps = try #require(try await store.apps.get("capped")).frequencyCaps
        let device = FrequencyLedger.Candidate(rowKey: keys[0], zone: Self.utc)
        let then = Self.at("2026-10-01 08:00", in: Self.utc)
        #expect(try await Self.admit(store, campaign: "old", [device], caps: caps, now: then).isEmpty)
        let now = then + 40 * 86_400_000
        #expect(try await Self.admit(store, campaign: "new", [device], caps: caps, now: now).isEmpty)
        #expect(try await store.frequency.pushes(rowKey: keys[0]).map(\.campaign.id) == ["new"])
    }

    @Test("admitters of one device for many campaigns at once take turns: exactly the cap gets through", arguments: Backend.enabled)
    func concurrentAdmitters(_ backend: Backend) async throws {
        let (store, keys) = try await Self.store(backend, caps: "2/1d", count: 50)
        let caps = try #require(try await store.apps.get("capped")).frequencyCaps
        let devices = keys.map { FrequencyLedger.Candidate(rowKey: $0, zone: Self.utc) }
        let now = Self.at("2026-12-01 10:00", in: Self.utc)
        let held = try await withThrowingTaskGroup(of: Set<Int64>.self) { group in
            for campaign in 0..<6 {
                group.addTask { try await Self.admit(store, campaign: "k\(campaign)", devices.shuffled(), caps: caps, now: now) }
            }
            return try await group.reduce(into: [Int64: Int]()) { counts, capped in for key in capped { counts[key, default: 0] += 1 } }
        }
        #expect(held.count == 50 && held.values.allSatisfy { $0 == 4 }, "each device admitted to exactly 2 of 6 campaigns: \(held.values.sorted())")
        for key in keys.prefix(5) { #expect(try await store.frequency.pushes(rowKey: key).count == 2) }
    }
}
