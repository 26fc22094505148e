import Foundation
import PushfanMessages
import Testing

@testable import PushfanStore
import PushfanSchedule

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

    @Test("counted per user: of a user's 3 devices one gets the push under 1/1h, the others are held back, also when the user's devices come in separate pages; a device without a user counts alone; rows from before it had a user still count", arguments: Backend.enabled)
    func perUser(_ backend: Backend) async throws {
        let (store, keys) = try await Self.store(backend, caps: "user:1/1h", count: 6)
        let caps = try #require(try await store.apps.get("capped")).frequencyCaps
        #expect(caps.perUser)
        for (index, user) in [(0, "42"), (1, "42"), (2, "42"), (3, "7"), (4, "7")] {
            var registration = DeviceRegistration(deviceID: "d\(index)", token: String(format: "%064x", index + 1))
            registration.attributes["user_id"] = .string(user)
            _ = try await store.devices.register(app: "capped", registration)
        }
        let devices = keys.map { FrequencyLedger.Candidate(rowKey: $0, zone: Self.utc) }
        let now = Self.at("2026-12-01 10:00", in: Self.utc)
        // One page: one device of user 42 gets it, its other two are held; one of user 7's; d5 has no user.
        let (user42, user7) = (Set(keys[0...2]), Set(keys[3...4]))
        func onePerUser(_ held: Set<Int64>) -> Bool {
            held.intersection(user42).count == 2 && held.intersection(user7).count == 1 && !held.contains(keys[5]) && held.count == 3
        }
        let first = try await Self.admit(store, campaign: "c1", devices, caps: caps, now: now)
        #expect(onePerUser(first), "\(first)")
        #expect(try await Self.admit(store, campaign: "c1", devices, caps: caps, now: now + 1_000) == first, "the page again: the same answer")
        // A second campaign in separate pages, one device at a time: nobody of 42 or 7 gets it; d5 has had its one.
        for index in 0..<6 {
            #expect(try await Self.admit(store, campaign: "c2", [devices[index]], caps: caps, now: now + 2_000) == [keys[index]], "d\(index)")
        }
        // An hour later each user gets one again.
        let later = try await Self.admit(store, campaign: "c3", devices.reversed(), caps: caps, now: now + 3_600_000 + 5_000)
        #expect(onePerUser(later), "\(later)")

        // Counted per device, the same devices would each get c1.
        let (plain, plainKeys) = try await Self.store(backend, caps: "1/1h", count: 3)
        let plainCaps = try #require(try await plain.apps.get("capped")).frequencyCaps
        #expect(try await Self.admit(plain, campaign: "c1", plainKeys.map { FrequencyLedger.Candidate(rowKey: $0, zone: Self.utc) }, caps: plainCaps, now: now).isEmpty)
    }
}
