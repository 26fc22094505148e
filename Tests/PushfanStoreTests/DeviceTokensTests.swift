import Foundation
import PushfanMessages
import PushfanSupport
import Testing

@testable import PushfanStore

/// A device's tokens of other kinds than alert, on both backends: registered beside the
/// device, read by the pages of a campaign of that kind, and marked one by one by APNs'
/// verdicts, never touching the device row or its other tokens.
@Suite(.timeLimit(.minutes(2)))
struct DeviceTokensTests {
    let now: Int64 = 1_790_000_000_000

    func voip(_ index: Int) -> String { "7e11" + String(format: "%060x", index) }

    /// Three devices with alert tokens; d0 and d1 get VoIP tokens, d1 a Live Activity one.
    func store(_ backend: Backend) async throws -> DeviceStore {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        for index in 0..<3 {
            _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "d\(index)", token: String(format: "%064x", index + 1)))
        }
        #expect(try await store.tokens.register(app: "shop-ios", deviceID: "d0", KindToken(kind: .voip, token: voip(0)), now: now))
        #expect(try await store.tokens.register(app: "shop-ios", deviceID: "d1", KindToken(kind: .voip, token: voip(1).uppercased(), environment: .sandbox), now: now))
        #expect(try await store.tokens.register(
            app: "shop-ios", deviceID: "d1", KindToken(kind: .liveActivityUpdate, token: voip(9), scope: "match-1", expiresAt: now + 60_000), now: now))
        return store
    }

    func page(_ store: DeviceStore, _ selection: TokenSelection?, at: Int64) async throws -> [String: DeviceTarget] {
        let targets = try await store.audience.page(
            app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 100, tokens: selection, now: at)
        return Dictionary(uniqueKeysWithValues: targets.map { ($0.deviceID, $0) })
    }

    @Test("a listed audience and the zones of a VoIP push include a device whose alert token APNs refused, not an unregistered one; an alert push's only active ones", arguments: Backend.enabled)
    func otherKindsReachInvalidAlertTokens(_ backend: Backend) async throws {
        let store = try await store(backend)
        #expect(try await store.devices.invalidate(app: "shop-ios", environment: .production, token: String(format: "%064x", 2), reason: "BadDeviceToken", now: now))
        #expect(try await store.devices.unregister(app: "shop-ios", deviceID: "d2"))
        let ids = ["d0", "d1", "d2"]
        let voipKeys = try await store.audience.rowKeys(app: "shop-ios", deviceIDs: ids, tokens: TokenSelection(kind: .voip))
        let alertKeys = try await store.audience.rowKeys(app: "shop-ios", deviceIDs: ids, tokens: nil)
        #expect(voipKeys.count == 2 && alertKeys.count == 1 && Set(alertKeys).isSubset(of: voipKeys))
        #expect(try await store.audience.devices(app: "shop-ios", rowKeys: voipKeys, tokens: TokenSelection(kind: .voip), now: now).map(\.deviceID) == ["d0", "d1"])
        var berlin = DeviceRegistration(deviceID: "d3", token: String(format: "%064x", 4))
        berlin.timezone = "Europe/Berlin"
        _ = try await store.devices.register(app: "shop-ios", berlin)
        #expect(try await store.devices.invalidate(app: "shop-ios", environment: .production, token: String(format: "%064x", 4), reason: "Unregistered", now: now))
        #expect(try await store.audience.zones(app: "shop-ios", segment: nil, tokens: TokenSelection(kind: .voip), now: now).sorted() == ["", "Europe/Berlin"])
        #expect(try await store.audience.zones(app: "shop-ios", segment: nil, tokens: nil, now: now) == [""])
    }

    @Test("registered tokens are listed by kind and scope; the same kind and scope again replaces; bad input names its field", arguments: Backend.enabled)
    func registerListReplace(_ backend: Backend) async throws {
        let store = try await store(backend)
        let listed = try await store.tokens.list(app: "shop-ios", deviceID: "d1")
        #expect(listed.map(\.token.kind) == [.liveActivityUpdate, .voip])
        #expect(listed.last?.token == KindToken(kind: .voip, token: voip(1), environment: .sandbox))
        #expect(listed.first?.token.environment == .production, "a token without an environment takes the device's")
        #expect(try await !store.tokens.register(app: "shop-ios", deviceID: "d1", KindToken(kind: .voip, token: voip(7)), now: now + 1))
        #expect(try await store.tokens.list(app: "shop-ios", deviceID: "d1").last?.token.token == voip(7))

        let refusals: [(KindToken, String)] = [
            (KindToken(kind: .alert, token: voip(1)), "kind: the alert token is the device's own"),
            (KindToken(kind: .voip, token: "12345"), "token:"),
            (KindToken(kind: .voip, token: voip(1), scope: "x"), "has no attributes type or activity id"),
            (KindToken(kind: .liveActivityStart, token: voip(1)), "attributes_type: a liveactivity_start token needs"),
            (KindToken(kind: .liveActivityUpdate, token: voip(1), scope: "a/b"), "activity_id:"),
        ]
        for (token, message) in refusals {
            do {
                _ = try await store.tokens.register(app: "shop-ios", deviceID: "d2", token, now: now)
                Issue.record("accepted: \(token)")
            } catch {
                #expect(error.message.contains(message), "\(error.message)")
            }
        }
        await #expect(throws: StoreError.notFound("app shop-ios has no device ghost")) {
            _ = try await store.tokens.register(app: "shop-ios", deviceID: "ghost", KindToken(kind: .voip, token: voip(1)), now: now)
        }
        #expect(try await store.tokens.list(app: "shop-ios", deviceID: "d2").isEmpty)
        #expect(try await store.tokens.remove(app: "shop-ios", deviceID: "d1", kind: .liveActivityUpdate, scope: "match-1"))
        #expect(try await !store.tokens.remove(app: "shop-ios", deviceID: "d1", kind: .liveActivityUpdate, scope: "match-1"))
    }

    @Test("a page for a kind carries each device's token of it, \"\" where there is none; expired and refused tokens are not sent to", arguments: Backend.enabled)
    func pagesCarryTheKindsToken(_ backend: Backend) async throws {
        let store = try await store(backend)
        let alert = try await page(store, nil, at: now)
        #expect(alert["d0"]?.token(for: .alert) == String(format: "%064x", 1) && alert["d0"]?.token(for: .voip) == nil)
        let voip = try await page(store, TokenSelection(kind: .voip), at: now)
        #expect(voip["d0"]?.token(for: .voip) == self.voip(0) && voip["d0"]?.environment == .production)
        #expect(voip["d1"]?.token(for: .voip) == self.voip(1) && voip["d1"]?.environment == .sandbox)
        #expect(voip["d2"] != nil && voip["d2"]?.token(for: .voip) == nil, "a device without one is in the page, to be skipped visibly")
        #expect(voip["d0"]?.token(for: .alert) == nil)
        let activity = TokenSelection(kind: .liveActivityUpdate, scope: "match-1")
        #expect(try await page(store, activity, at: now)["d1"]?.token(for: .liveActivityUpdate) == self.voip(9))
        #expect(try await page(store, activity, at: now + 60_000)["d1"]?.token(for: .liveActivityUpdate) == nil, "past its expiry")
        #expect(try await page(store, TokenSelection(kind: .liveActivityUpdate, scope: "match-2"), at: now)["d1"]?.token(for: .liveActivityUpdate) == nil)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, tokens: TokenSelection(kind: .voip), now: now) == 3)
    }

    @Test("update tokens picked by attributes type and attributes: only matching, active, unexpired ones; a device following two matching activities is one target; a type nobody holds is known as such", arguments: Backend.enabled)
    func activitiesByAttributes(_ backend: Backend) async throws {
        let store = try await store(backend)
        func update(_ device: String, _ index: Int, activity: String, type: String = "MatchActivity", match: String, expiresAt: Int64? = nil) async throws {
            var token = KindToken(kind: .liveActivityUpdate, token: voip(100 + index), scope: activity, expiresAt: expiresAt)
            (token.attributesType, token.attributes) = (type, ["match": match, "league": "premier"])
            _ = try await store.tokens.register(app: "shop-ios", deviceID: device, token, now: now)
        }
        try await update("d0", 0, activity: "act-b", match: "1234")
        try await update("d0", 1, activity: "act-a", match: "1234")  // d0 follows the match twice
        try await update("d1", 2, activity: "act-c", match: "1234", expiresAt: now + 1_000)
        try await update("d2", 3, activity: "act-d", match: "99")
        try await update("d2", 4, activity: "act-e", type: "RideActivity", match: "1234")
        let match = TokenSelection(activities: ActivityFilter(attributesType: "MatchActivity", attributes: ["match": "1234"]))
        let found = try await page(store, match, at: now)
        #expect(found.keys.sorted() == ["d0", "d1"], "\(found.keys.sorted())")
        #expect(found["d0"]?.token(for: .liveActivityUpdate) == voip(101), "the lowest activity id of the two")
        // d0's two rows fill a read of two rows with one device: the page reads on, so that
        // a short page still means the shard's end (a sender stops there).
        let firstTwo = try await store.audience.page(
            app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 2, tokens: match, now: now)
        #expect(firstTwo.map(\.deviceID) == ["d0", "d1"], "\(firstTwo.map(\.deviceID))")
        #expect(try await page(store, match, at: now + 1_000).keys.sorted() == ["d0"], "d1's token is past its end")
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, tokens: match, now: now) == 2)
        let both = TokenSelection(activities: ActivityFilter(attributesType: "MatchActivity", attributes: ["match": "1234", "league": "cup"]))
        #expect(try await page(store, both, at: now).isEmpty, "every pair must match")
        #expect(try await page(store, TokenSelection(activities: ActivityFilter(attributesType: "MatchActivity")), at: now).keys.sorted() == ["d0", "d1", "d2"])
        let listed = try await store.tokens.list(app: "shop-ios", deviceID: "d2").first { $0.token.scope == "act-d" }
        #expect(listed?.token.attributesType == "MatchActivity" && listed?.token.attributes == ["match": "99", "league": "premier"])

        #expect(try await store.tokens.anyHolder(app: "shop-ios", kind: .liveActivityUpdate, attributesType: "RideActivity"))
        #expect(try await !store.tokens.anyHolder(app: "shop-ios", kind: .liveActivityUpdate, attributesType: "TaxiActivity"))
        #expect(try await !store.tokens.anyHolder(app: "shop-ios", kind: .liveActivityStart, attributesType: "MatchActivity"))
        _ = try await store.tokens.register(app: "shop-ios", deviceID: "d2", KindToken(kind: .liveActivityStart, token: voip(50), scope: "MatchActivity"), now: now)
        #expect(try await store.tokens.anyHolder(app: "shop-ios", kind: .liveActivityStart, attributesType: "MatchActivity"))

        var orphan = KindToken(kind: .liveActivityUpdate, token: voip(60), scope: "act-f")
        orphan.attributes = ["match": "1"]
        var long = KindToken(kind: .liveActivityUpdate, token: voip(61), scope: "act-g")
        (long.attributesType, long.attributes) = ("MatchActivity", ["match": String(repeating: "x", count: 257)])
        for (token, message) in [(orphan, "attributes: an activity's attributes need its attributes_type"), (long, "attributes.match: is 257 bytes")] {
            await #expect { _ = try await store.tokens.register(app: "shop-ios", deviceID: "d2", token, now: now) } throws: { error in
                (error as? StoreError)?.message.contains(message) == true
            }
        }
    }

    @Test("APNs' verdict on a VoIP token marks that token only; a 410 retires a Live Activity update token; an alert verdict is the device's", arguments: Backend.enabled)
    func verdictsTouchOnlyTheirToken(_ backend: Backend) async throws {
        let store = try await store(backend)
        let marks = [
            TokenMark(environment: .production, token: voip(0), kind: .invalid, reason: "BadDeviceToken", tokenKind: .voip),
            TokenMark(environment: .production, token: voip(9), kind: .unregistered(at: now + 5), reason: "Unregistered", tokenKind: .liveActivityUpdate),
            // The right token in the wrong environment is another token.
            TokenMark(environment: .production, token: voip(1), kind: .invalid, reason: "BadDeviceToken", tokenKind: .voip),
        ]
        #expect(try await store.devices.applyHygiene(app: "shop-ios", marks, now: now + 10) == 2)
        let d0 = try await store.tokens.list(app: "shop-ios", deviceID: "d0")
        #expect(d0.first?.status == "invalid" && d0.first?.invalidReason == "BadDeviceToken")
        let d1 = try await store.tokens.list(app: "shop-ios", deviceID: "d1")
        #expect(d1.map(\.status) == ["retired", "active"], "\(d1)")
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "d0")?.status == .active, "the device and its alert token are untouched")
        #expect(try await page(store, TokenSelection(kind: .voip), at: now + 10)["d0"]?.token(for: .voip) == nil)
        // Registered again, the token is active again.
        _ = try await store.tokens.register(app: "shop-ios", deviceID: "d0", KindToken(kind: .voip, token: voip(0)), now: now + 20)
        #expect(try await store.tokens.list(app: "shop-ios", deviceID: "d0").first?.status == "active")
        // An alert verdict invalidates the device, whose VoIP token still counts for VoIP pushes.
        let alertMark = TokenMark(environment: .production, token: String(format: "%064x", 1), kind: .invalid, reason: "BadDeviceToken")
        #expect(try await store.devices.applyHygiene(app: "shop-ios", [alertMark], now: now + 30) == 1)
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "d0")?.status == .invalid)
        #expect(try await page(store, nil, at: now + 30)["d0"] == nil)
        #expect(try await page(store, TokenSelection(kind: .voip), at: now + 30)["d0"]?.token(for: .voip) == voip(0))
    }

    @Test("a device whose alert token moves to another device goes with its tokens of other kinds; the new holder's are its own", arguments: Backend.enabled)
    func movedTokenTakesNoOrphans(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        let store = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "old", token: String(format: "%064x", 1)))
        #expect(try await store.tokens.register(app: "shop-ios", deviceID: "old", KindToken(kind: .voip, token: voip(1)), now: now))
        #expect(try backend.rawCount(url, "SELECT count(*) FROM device_tokens") == 1)
        // The phone re-registered under a new id with the same alert token: the old row goes.
        _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "new", token: String(format: "%064x", 1)))
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "old") == nil)
        #expect(try backend.rawCount(url, "SELECT count(*) FROM device_tokens") == 0, "the old device's VoIP token outlived it")
        #expect(try await store.tokens.list(app: "shop-ios", deviceID: "new").isEmpty)
        // The same through a batch (an import's path on both databases).
        #expect(try await store.tokens.register(app: "shop-ios", deviceID: "new", KindToken(kind: .voip, token: voip(2)), now: now))
        _ = try await store.devices.importDevices(app: "shop-ios", [try Validation.device(DeviceRegistration(deviceID: "newer", token: String(format: "%064x", 1)), now: store.clock.wallMillis)])
        #expect(try backend.rawCount(url, "SELECT count(*) FROM device_tokens") == 0)
    }

    @Test("an import line and a registration carry the device's tokens of other kinds, written with it; a bad one is refused naming its place", arguments: Backend.enabled)
    func importAndRegistrationCarryTokens(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        // Enough devices for PostgreSQL to split the import over both connections.
        var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        var devices: [ValidatedDevice] = []
        for index in 0..<1_200 {
            let tokens = index.isMultiple(of: 3)
                ? #","tokens":[{"kind":"voip","token":"\#(voip(index))"},{"kind":"liveactivity_start","token":"\#(voip(index + 5_000))","attributes_type":"MatchActivity","environment":"sandbox"}]"#
                : ""
            let line = #"{"device_id":"i\#(index)","token":"\#(String(format: "%064x", index + 1))"\#(tokens)}"#
            devices.append(try #require(try parser.parse(line)))
        }
        #expect(try await store.devices.importDevices(app: "shop-ios", devices) == 1_200)
        let listed = try await store.tokens.list(app: "shop-ios", deviceID: "i3")
        #expect(listed.map(\.token.kind) == [.liveActivityStart, .voip])
        #expect(listed.first?.token == KindToken(kind: .liveActivityStart, token: voip(5_003), environment: .sandbox, scope: "MatchActivity"))
        #expect(try await store.tokens.list(app: "shop-ios", deviceID: "i4").isEmpty)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, tokens: TokenSelection(kind: .voip, holdersOnly: true), now: store.clock.wallMillis) == 400)

        // A registration with a token replaces the one of its kind and leaves the others.
        var registration = DeviceRegistration(deviceID: "i3", token: String(format: "%064x", 4))
        registration.tokens = [KindToken(kind: .voip, token: voip(77))]
        _ = try await store.devices.register(app: "shop-ios", registration)
        #expect(try await store.tokens.list(app: "shop-ios", deviceID: "i3").map(\.token.token) == [voip(5_003), voip(77)])

        let refusals: [(String, String)] = [
            (#""tokens":[{"kind":"pager","token":"\#(voip(1))"}]"#, "tokens[0].kind: one of"),
            (#""tokens":[{"kind":"voip","token":"xyz"}]"#, "tokens[0].token:"),
            (#""tokens":[{"kind":"voip","token":"\#(voip(1))","activity_id":"a"}]"#, "tokens[0].activity_id: not a field of a voip token"),
            (#""tokens":[{"kind":"liveactivity_update","token":"\#(voip(1))"}]"#, "tokens[0].activity_id: required for a liveactivity_update token"),
            (#""tokens":[{"kind":"voip","token":"\#(voip(1))","expires_at":1700000000}]"#, "tokens[0].expires_at: milliseconds"),
            (#""tokens":{"kind":"voip"}"#, "tokens: wrong type"),
        ]
        for (fragment, message) in refusals {
            do {
                _ = try parser.parse(#"{"device_id":"bad","token":"\#(String(format: "%064x", 1))",\#(fragment)}"#)
                Issue.record("accepted: \(fragment)")
            } catch {
                #expect(error.message.contains(message), "\(fragment): \(error.message)")
            }
        }
    }
}
