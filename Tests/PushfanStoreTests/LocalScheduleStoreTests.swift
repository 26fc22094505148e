import Foundation
import PushfanMessages
import PushfanSchedule
import PushfanSegments
import PushfanSupport
import Testing

@testable import PushfanStore

/// A campaign of app a, as the store names it.
private func inA(_ id: String) -> CampaignKey { CampaignKey(app: "a", id: id) }

/// What local-time campaigns and quiet hours keep in the store, on both backends: devices'
/// quiet hours from every way in, an app's default zone, pages of one zone wave, and parked
/// waves that are dispatched once and holds that add exactly one shard each.
@Suite struct LocalScheduleStoreTests {
    static func token(_ index: Int) -> String { String(format: "%064x", index + 1) }

    @Test(arguments: Backend.enabled)
    func quietHoursFromEveryWayIn(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        var registration = DeviceRegistration(deviceID: "reg", token: Self.token(0))
        registration.quietHours = try QuietHours(start: "22:00", end: "07:00")
        _ = try await store.devices.register(app: "shop-ios", registration)

        var ndjson = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        var csv = DeviceImportParser(format: .csv, now: epochMillis(Date()))
        _ = try csv.parse("device_id,token,timezone,quiet_start,quiet_end")
        let imported = [
            try ndjson.parse(#"{"device_id":"json","token":"\#(Self.token(1))","timezone":"Asia/Tokyo","quiet_hours":{"start":"12:00","end":"13:30"}}"#),
            try csv.parse("csv,\(Self.token(2)),Europe/Berlin,23:00,06:00"),
            try csv.parse("none,\(Self.token(3)),,,"),
        ].compactMap { $0 }
        #expect(try await store.devices.importDevices(app: "shop-ios", imported) == 3)

        #expect(try await store.devices.get(app: "shop-ios", deviceID: "reg")?.quietHours == QuietHours(start: 1320, end: 420))
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "json")?.quietHours == QuietHours(start: 720, end: 810))
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "csv")?.quietHours == QuietHours(start: 1380, end: 360))
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "none")?.quietHours == nil)
        // Senders see them on every page, with the zone.
        let page = try await store.audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 10, now: store.clock.wallMillis)
        let windows: [QuietHours?] = [try QuietHours(start: 1320, end: 420), try QuietHours(start: 720, end: 810), try QuietHours(start: 1380, end: 360), nil]
        #expect(page.map(\.quietHours) == windows)
        #expect(page.map(\.timezone) == [nil, "Asia/Tokyo", "Europe/Berlin", nil])

        // What a user sees for each bad window.
        let refusals: [(String, String)] = [
            (#"{"device_id":"x","token":"\#(Self.token(4))","quiet_hours":{"start":"22:00"}}"#, "quiet hours need both a start and an end, like 22:00 and 07:00"),
            (#"{"device_id":"x","token":"\#(Self.token(4))","quiet_hours":{"start":"22:00","end":"22:00"}}"#, "quiet hours must not start and end at the same time"),
            (#"{"device_id":"x","token":"\#(Self.token(4))","quiet_hours":{"start":"10pm","end":"07:00"}}"#, #"quiet hours take times like "22:00", got "10pm""#),
            (#"{"device_id":"x","token":"\#(Self.token(4))","quiet_hours":"22-7"}"#, #"quiet_hours: wrong type, expected an object like {"start": "22:00", "end": "07:00"}"#),
        ]
        for (line, message) in refusals {
            var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
            #expect(throws: StoreError.invalidInput(message), "\(line)") { try parser.parse(line) }
        }
    }

    @Test(arguments: Backend.enabled)
    func zonesAndZonePages(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        _ = try await store.apps.add(AppRegistration(
            app: "shop-ios", topic: "com.example.shop", credentials: .token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: "/k.p8"),
            timeZone: "Europe/Berlin"))
        #expect(try await store.apps.get("shop-ios")?.defaultZone.identifier == "Europe/Berlin")
        await #expect(throws: StoreError.invalidInput("unknown time zone 'Mars/Olympus' (use an IANA name like Europe/Berlin)")) {
            _ = try await store.apps.add(AppRegistration(app: "other", topic: "com.example.o", credentials: .token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: "/k.p8"), timeZone: "Mars/Olympus"))
        }
        // Asia/Kolkata: in the zone database, though not in Foundation's list of names.
        let zones = ["Asia/Tokyo", nil, "America/New_York", "Asia/Tokyo", nil, "Europe/Berlin", "Asia/Kolkata"]
        for (index, zone) in zones.enumerated() {
            var registration = DeviceRegistration(deviceID: "d\(index)", token: Self.token(index))
            registration.timezone = zone
            registration.tags = index < 3 ? ["early"] : []
            _ = try await store.devices.register(app: "shop-ios", registration)
        }
        #expect(try await store.audience.zones(app: "shop-ios", segment: nil, tokens: nil, now: store.clock.wallMillis).sorted() == ["", "America/New_York", "Asia/Kolkata", "Asia/Tokyo", "Europe/Berlin"])
        #expect(try await store.audience.zones(app: "shop-ios", segment: try SegmentParser.parse("tag:early"), tokens: nil, now: store.clock.wallMillis).sorted() == ["", "America/New_York", "Asia/Tokyo"])
        let all = ShardRange(after: nil, through: nil)
        let tokyo = try await store.audience.page(app: "shop-ios", segment: nil, shard: all, cursor: nil, limit: 10, zones: ["Asia/Tokyo"], now: store.clock.wallMillis)
        #expect(tokyo.map(\.deviceID) == ["d0", "d3"])
        let unzoned = try await store.audience.page(app: "shop-ios", segment: nil, shard: all, cursor: nil, limit: 10, zones: ["", "Europe/Berlin"], now: store.clock.wallMillis)
        #expect(unzoned.map(\.deviceID) == ["d1", "d4", "d5"])
        let listed = try await store.audience.devices(app: "shop-ios", rowKeys: tokyo.map(\.rowKey) + unzoned.map(\.rowKey), zones: ["Asia/Tokyo"], now: store.clock.wallMillis)
        #expect(listed.map(\.deviceID) == ["d0", "d3"])
    }

    @Test(arguments: Backend.enabled)
    func wavesAreDispatchedOnceAndHoldsAddOneShard(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let now: Int64 = 1_800_000_000_000
        #expect(try await store.campaigns.record(CampaignKey(app: "a", id: "c1"), audience: 9, shards: 4, status: .scheduled, sendAt: now + 5_000, parked: false, now: now))
        // Not parked itself: its waves are.
        #expect(try await store.campaigns.get(inA("c1"))?.parked == false)
        #expect(try await store.campaigns.dispatchable(now: now, lead: .seconds(10), staleAfter: .seconds(60)).isEmpty)
        let soon = CampaignWaves.Wave(campaign: inA("c1"), key: "zone-0", sendAt: now + 5_000, firstShard: 0, shards: 2, zones: ["", "Europe/Berlin"])
        let later = CampaignWaves.Wave(campaign: inA("c1"), key: "zone-1", sendAt: now + 3_600_000, firstShard: 2, shards: 2, zones: ["Asia/Tokyo"], skip: "local_time_passed")
        try await store.waves.park([soon, later])
        try await store.waves.park([soon])
        #expect(try await store.waves.due(now: now, lead: .seconds(10), staleAfter: .seconds(60)) == [soon])
        #expect(try await store.waves.claim(soon, staleAfter: .seconds(60), now: now))
        #expect(try await !store.waves.claim(soon, staleAfter: .seconds(60), now: now))
        #expect(try await store.waves.due(now: now, lead: .seconds(10), staleAfter: .seconds(60)).isEmpty)
        // Its dispatcher died: after a minute another takes it; once produced, nobody does.
        #expect(try await store.waves.due(now: now + 61_000, lead: .seconds(10), staleAfter: .seconds(60)) == [soon])
        try await store.waves.produced(soon, now: now + 61_000)
        #expect(try await store.waves.due(now: now + 61_000, lead: .seconds(10), staleAfter: .seconds(60)).isEmpty)
        let parked = try await store.waves.parked(campaign: inA("c1"))
        #expect(parked.count == 1 && parked.next == now + 3_600_000)

        // A cancelled campaign's waves are due at once.
        #expect(try await store.campaigns.control(inA("c1"), .cancel, now: store.clock.wallMillis) == .move(from: .scheduled, to: .cancelled))
        #expect(try await store.waves.due(now: now, lead: .seconds(10), staleAfter: .seconds(60)) == [later])

        // A quiet-hours hold is one more shard, once, however often it is asked for.
        #expect(try await store.campaigns.record(CampaignKey(app: "a", id: "c2"), audience: 9, shards: 3, status: .running, now: now))
        let first = try await store.waves.hold(campaign: inA("c2"), key: "quiet-0-7-\(now + 60_000)", sendAt: now + 60_000, lane: 1, rowKeys: [7, 8])
        let again = try await store.waves.hold(campaign: inA("c2"), key: "quiet-0-7-\(now + 60_000)", sendAt: now + 60_000, lane: 1, rowKeys: [7, 8])
        let second = try await store.waves.hold(campaign: inA("c2"), key: "quiet-1-9-\(now + 90_000)", sendAt: now + 90_000, lane: 0, rowKeys: [9])
        #expect(first == 3 && again == 3 && second == 4)
        #expect(try await store.campaigns.get(inA("c2"))?.shards == 5)
        let held = try await store.waves.due(now: now + 95_000, lead: .seconds(10), staleAfter: .seconds(60)).filter { $0.campaign == inA("c2") }
        #expect(held.map(\.rowKeys) == [[7, 8], [9]])
        #expect(held.map(\.lane) == [1, 0])
        await #expect(throws: StoreError.notFound("campaign a/c3")) {
            _ = try await store.waves.hold(campaign: inA("c3"), key: "quiet-0-1-1", sendAt: now, lane: 0, rowKeys: [1])
        }
    }

    @Test("a winner's rest is due at its time, not within the lead; never while its campaign is paused; at once once it is cancelled", arguments: Backend.enabled)
    func winnerRestIsDueAtItsTime(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let now: Int64 = 1_800_000_000_000
        #expect(try await store.campaigns.record(CampaignKey(app: "a", id: "ab"), audience: 9, shards: 2, status: .running, now: now))
        let rest = CampaignWaves.Wave(campaign: inA("ab"), key: CampaignWaves.winnerKey, sendAt: now + 5_000, firstShard: 0, shards: 2)
        #expect(try await store.waves.append(rest) == 2)
        let placed = try #require(try await store.waves.due(now: now + 5_000, lead: .seconds(10), staleAfter: .seconds(60)).first)
        #expect(try await store.waves.due(now: now, lead: .seconds(10), staleAfter: .seconds(60)).isEmpty, "within the lead, not yet at its time")
        #expect(placed.key == CampaignWaves.winnerKey && placed.firstShard == 2)
        #expect(try await store.campaigns.control(inA("ab"), .pause, now: now) == .move(from: .running, to: .paused))
        #expect(try await store.waves.due(now: now + 3_600_000, lead: .seconds(10), staleAfter: .seconds(60)).isEmpty, "paused: its test decides nothing yet")
        #expect(try await store.campaigns.control(inA("ab"), .cancel, now: now) == .move(from: .paused, to: .cancelled))
        #expect(try await store.waves.due(now: now, lead: .seconds(10), staleAfter: .seconds(60)) == [placed], "cancelled: its devices end at once")
    }
}

/// App secrets on both backends: which secret a caller gave, and rotation with its grace period.
@Suite struct AppSecretStoreTests {
    @Test(arguments: Backend.enabled)
    func rotationKeepsTheOldSecretForItsGraceOnly(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let secrets = try await store.apps.add(AppRegistration(app: "shop", topic: "com.example.shop", credentials: .token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: "/k.p8")))
        let now: Int64 = 1_800_000_000_000
        let master = try await store.apps.rotate(app: "shop", .master, grace: .seconds(60), now: now)
        #expect(try await store.apps.authenticate(app: "shop", secret: master, now: now) == .master)
        #expect(try await store.apps.authenticate(app: "shop", secret: secrets.master, now: now + 59_000) == .master)
        #expect(try await store.apps.authenticate(app: "shop", secret: secrets.master, now: now + 61_000) == nil)
        let application = try await store.apps.rotate(app: "shop", .application, grace: .zero, now: now)
        #expect(try await store.apps.authenticate(app: "shop", secret: application, now: now) == .application)
        #expect(try await store.apps.authenticate(app: "shop", secret: secrets.application, now: now) == nil)
        // The master secret's grace is its own.
        #expect(try await store.apps.authenticate(app: "shop", secret: secrets.master, now: now + 1_000) == .master)
        await #expect(throws: StoreError.notFound("app nobody is not registered")) { _ = try await store.apps.rotate(app: "nobody", .master, grace: .zero, now: store.clock.wallMillis) }
        try await store.apps.setRate(app: "shop", ratePerSecond: 250)
        #expect(try await store.apps.list().map(\.ratePerSecond) == [250])
        await #expect(throws: StoreError.invalidInput("rate must be between 1 and 1000000 per second, got 0")) { try await store.apps.setRate(app: "shop", ratePerSecond: 0) }
    }
}
