import Foundation
import PushfanCore
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
        let store = try await DeviceStore.open(url, logger: quietLogger)
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
        _ = try await store.devices.importDevices(app: "shop-ios", [try Validation.device(DeviceRegistration(deviceID: "newer", token: String(format: "%064x", 1)))])
        #expect(try backend.rawCount(url, "SELECT count(*) FROM device_tokens") == 0)
    }

    @Test("an import line and a registration carry the device's tokens of other kinds, written with it; a bad one is refused naming its place", arguments: Backend.enabled)
    func importAndRegistrationCarryTokens(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        // Enough devices for PostgreSQL to split the import over both connections.
        var parser = DeviceImportParser(format: .ndjson)
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
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, tokens: TokenSelection(kind: .voip, holdersOnly: true)) == 400)

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
