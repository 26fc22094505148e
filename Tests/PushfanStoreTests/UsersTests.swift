import Foundation
import PushfanMessages
import PushfanSegments
import PushfanSupport
import Testing

@testable import PushfanStore

/// Users on both backends: a user's devices are the app's devices naming it, aliases name one
/// user of an app each, and the lookups by user are index lookups.
@Suite(.timeLimit(.minutes(2)))
struct UsersTests {
    private func register(_ store: DeviceStore, app: String = "shop-ios", _ id: String, token: Int, user: JSONValue?) async throws {
        var registration = DeviceRegistration(deviceID: id, token: String(format: "%064x", token))
        registration.attributes["plan"] = "pro"
        if let user { registration.attributes["user_id"] = user }
        _ = try await store.devices.register(app: app, registration)
    }

    @Test("a user's devices are its app's devices that name it; aliases name one user per app, are replaced whole, and a taken one changes nothing", arguments: Backend.enabled)
    func devicesAndAliases(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        try await store.addTestApp("news-ios")
        try await register(store, "phone", token: 1, user: "42")
        try await register(store, "tablet", token: 2, user: "42")
        try await register(store, "other", token: 3, user: "7")
        try await register(store, "anonymous", token: 4, user: nil)
        try await register(store, app: "news-ios", "news-phone", token: 5, user: "42")

        let user = try #require(try await store.users.get(app: "shop-ios", id: "42"))
        #expect(user.devices.map(\.deviceID) == ["phone", "tablet"])
        #expect(user.aliases.isEmpty)
        #expect(try await store.users.get(app: "news-ios", id: "42")?.devices.map(\.deviceID) == ["news-phone"])
        #expect(try await store.users.get(app: "shop-ios", id: "nobody") == nil)
        #expect(try await store.users.get(app: "shop-ios", id: "4") == nil, "a user id is matched as text, whole")

        try await store.users.setAliases(app: "shop-ios", user: "42", ["crm_id": "C-1", "email": "ada@example.com"], now: 1_000)
        #expect(try await store.users.user(app: "shop-ios", alias: "crm_id", value: "C-1") == "42")
        #expect(try await store.users.user(app: "news-ios", alias: "crm_id", value: "C-1") == nil)
        await #expect(throws: StoreError.conflict("aliases.crm_id: 'C-1' is another user's crm_id")) {
            try await store.users.setAliases(app: "shop-ios", user: "7", ["email": "seven@example.com", "crm_id": "C-1"], now: 2_000)
        }
        #expect(try await store.users.get(app: "shop-ios", id: "7")?.aliases == [:], "the refused call wrote none of its aliases")
        // Another app's users are another namespace.
        try await store.users.setAliases(app: "news-ios", user: "9", ["crm_id": "C-1"], now: 2_000)
        #expect(try await store.users.get(app: "news-ios", id: "9") == Users.User(id: "9", aliases: ["crm_id": "C-1"], devices: []))

        try await store.users.setAliases(app: "shop-ios", user: "42", ["crm_id": "C-2"], now: 3_000)
        #expect(try await store.users.get(app: "shop-ios", id: "42")?.aliases == ["crm_id": "C-2"])
        try await store.users.setAliases(app: "shop-ios", user: "7", ["crm_id": "C-1"], now: 4_000)
        #expect(try await store.users.user(app: "shop-ios", alias: "crm_id", value: "C-1") == "7")
    }

    @Test("a data-protection export names every device of a user, past the first 100 that the user's own call shows", arguments: Backend.enabled)
    func exportHasEveryDevice(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        for index in 0..<(Users.maxDevices + 5) { try await register(store, "p\(index)", token: index + 1, user: "42") }
        #expect(try await store.users.get(app: "shop-ios", id: "42")?.devices.count == Users.maxDevices)
        #expect(try await store.users.whole(app: "shop-ios", id: "42")?.devices.count == Users.maxDevices + 5)
        let exported = try #require(try await store.personalData.export(app: "shop-ios", user: "42"))
        #expect(Set(exported.devices.map(\.device.deviceID)) == Set((0..<(Users.maxDevices + 5)).map { "p\($0)" }))
    }

    @Test("bad user ids and aliases are refused naming the field", arguments: Backend.enabled)
    func refusals(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        await #expect(throws: StoreError.invalidInput("attributes.user_id: the device's user is a string (or absent), got 42")) {
            try await register(store, "phone", token: 1, user: 42)
        }
        await #expect(throws: StoreError.self) { try await register(store, "phone", token: 1, user: "") }
        await #expect(throws: StoreError.invalidInput("aliases: an alias name is 1-32 characters of a-z 0-9 _, got 'CRM'")) {
            try await store.users.setAliases(app: "shop-ios", user: "42", ["CRM": "x"], now: 1)
        }
        await #expect(throws: StoreError.invalidInput("aliases.email: a user id is 1-256 bytes without control characters, got 'a\nb'")) {
            try await store.users.setAliases(app: "shop-ios", user: "42", ["email": "a\nb"], now: 1)
        }
        let nine = Dictionary(uniqueKeysWithValues: (0..<9).map { ("a\($0)", "v") })
        await #expect(throws: StoreError.invalidInput("aliases: at most 8 per user, got 9")) {
            try await store.users.setAliases(app: "shop-ios", user: "42", nine, now: 1)
        }
        await #expect(throws: StoreError.self) { try await store.users.setAliases(app: "nobody", user: "42", ["crm_id": "x"], now: 1) }
        #expect(try await store.users.get(app: "shop-ios", id: "42") == nil)
    }

    @Test("the devices of a user and a one-user segment are read through the user index", arguments: Backend.enabled)
    func lookupsUseTheIndex(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        for index in 0..<50 { try await register(store, "d\(index)", token: index + 1, user: .string("u\(index % 5)")) }
        let plan = try await store.devices.executor.run { connection throws(StoreError) -> String in
            // 50 rows: PostgreSQL would rather scan them, unless told the scan is dear.
            if backend == .postgres { _ = try connection.execute("SET enable_seqscan = off") }
            defer { if backend == .postgres { _ = try? connection.execute("RESET enable_seqscan") } }
            let explain: SQLStatement = backend == .sqlite ? "EXPLAIN QUERY PLAN " : "EXPLAIN "
            let one = try connection.queryAll(explain + "SELECT row_key FROM devices d WHERE d.app = \("shop-ios") AND \(userOf: "d") = \("u1")") { row in
                (0..<4).compactMap { row.text($0) }.joined(separator: " ")
            }
            // A message's users, looked up together (`Users.resolve`).
            let many = try connection.queryAll(
                explain + "SELECT row_key FROM devices d WHERE d.app = \("shop-ios") AND \(userOf: "d")" + store.devices.executor.backend.isIn([.text("u1"), .text("u2")], type: "text")
            ) { row in (0..<4).compactMap { row.text($0) }.joined(separator: " ") }
            return (one + ["--"] + many).joined(separator: "\n")
        }
        switch backend {
        case .sqlite: #expect(plan.components(separatedBy: "USING INDEX devices_by_user").count == 3, "\(plan)")
        // Each partition has its copy of the index, named after it.
        case .postgres: #expect(plan.contains("Index") && !plan.contains("Seq Scan"), "\(plan)")
        }
    }

    @Test("a message's recipients resolve in one call: users' devices of every status, aliases' users, listed devices of this app only", arguments: Backend.enabled)
    func resolvesRecipients(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        try await store.addTestApp("news-ios")
        try await register(store, "phone", token: 1, user: "42")
        try await register(store, "tablet", token: 2, user: "42")
        try await register(store, "old", token: 3, user: "42")
        try await register(store, "seven", token: 4, user: "7")
        try await register(store, "anonymous", token: 5, user: nil)
        try await register(store, app: "news-ios", "news-phone", token: 6, user: "42")
        #expect(try await store.devices.invalidate(app: "shop-ios", environment: .production, token: String(format: "%064x", 3), reason: "Unregistered", now: store.clock.wallMillis))
        try await store.users.setAliases(app: "shop-ios", user: "7", ["crm_id": "C-7"], now: 1_000)
        try await store.users.setAliases(app: "news-ios", user: "42", ["crm_id": "C-42"], now: 1_000)

        let found = try await store.users.resolve(
            app: "shop-ios", users: ["42", "nobody"], aliases: ["crm_id": ["C-7", "C-42"]], devices: ["anonymous", "news-phone", "missing"],
            tokens: nil, now: store.clock.wallMillis)
        let rows = try await store.audience.rowKeys(app: "shop-ios", deviceIDs: ["phone", "tablet", "seven", "anonymous"], tokens: nil)
        #expect(found.userDevices["42"]?.map(\.deviceID) == ["phone", "tablet", "old"])
        #expect(found.userDevices["42"]?.map(\.status) == [.active, .active, .invalid])
        #expect(found.userDevices["7"]?.map(\.deviceID) == ["seven"], "an alias's user's devices come along")
        #expect(found.userDevices["nobody"] == nil)
        #expect(found.aliasUsers == ["crm_id": ["C-7": "7"]], "another app's alias is not this app's")
        #expect(Array(found.devices.keys) == ["anonymous"], "another app's device is unknown here")
        #expect(found.devices["anonymous"]?.rowKey == rows[3] && found.userDevices["42"]?.first?.rowKey == rows[0])
        #expect(found.userDevices["42"]?.allSatisfy(\.hasToken) == true, "an alert push: every device holds its alert token")
        // A VoIP message: only the device with a VoIP token holds one; the others are reported.
        #expect(try await store.tokens.register(app: "shop-ios", deviceID: "tablet", KindToken(kind: .voip, token: String(format: "%064x", 90)), now: store.clock.wallMillis))
        let voip = try await store.users.resolve(
            app: "shop-ios", users: ["42"], aliases: [:], devices: ["anonymous", "tablet"], tokens: TokenSelection(kind: .voip), now: store.clock.wallMillis)
        #expect(voip.userDevices["42"]?.map(\.hasToken) == [false, true, false])
        #expect(voip.devices["anonymous"]?.hasToken == false && voip.devices["tablet"]?.hasToken == true)
        // The same aliases in segments: the alias's user's active devices, this app's only.
        #expect(try await store.audience.count(app: "shop-ios", segment: try SegmentParser.parse("alias.crm_id:C-7"), now: store.clock.wallMillis) == 1)
        #expect(try await store.audience.count(app: "shop-ios", segment: try SegmentParser.parse("alias.crm_id:C-42"), now: store.clock.wallMillis) == 0)
        #expect(try await store.audience.count(app: "news-ios", segment: try SegmentParser.parse("alias.crm_id:C-42"), now: store.clock.wallMillis) == 1)
    }

    @Test("a registration body with user_id beside attributes keeps both, the top-level user_id winning in either order")
    func userIDBesideAttributes() throws {
        let token = String(repeating: "ab", count: 32)
        for body in [
            #"{"token":"\#(token)","user_id":"42","attributes":{"first_name":"Ada","user_id":"7"}}"#,
            #"{"token":"\#(token)","attributes":{"first_name":"Ada","user_id":"7"},"user_id":"42"}"#,
        ] {
            let registration = try DeviceJSONReader.registration(json: Array(body.utf8), deviceID: "phone")
            #expect(registration.attributes == ["first_name": "Ada", "user_id": "42"], "\(body)")
        }
        let inside = try DeviceJSONReader.registration(json: Array(#"{"token":"\#(token)","attributes":{"user_id":"7"}}"#.utf8), deviceID: "phone")
        #expect(inside.attributes["user_id"] == "7")
    }

    @Test("erasing a user whose id JSON escapes (a quote, a backslash) redacts the stored Idempotency-Key answers that name it too", arguments: Backend.enabled)
    func erasureFindsEscapedUserIDs(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let user = #"ada "the first" \ lovelace"#
        try await register(store, "phone", token: 1, user: .string(user))
        let body = Array("POST /v1/apps/shop-ios/messages\n{}".utf8)
        #expect(try await store.idempotency.claim(app: "shop-ios", key: "k1", body: body, now: 1) == .claimed)
        let answer = JSONValue.object(["recipients": .array([.object(["user": .string(user), "devices": .array(["phone"])])])]).compactJSON
        #expect(answer.contains(#"\"the first\""#), "the answer holds the id escaped: \(answer)")
        try await store.idempotency.complete(app: "shop-ios", key: "k1", status: 202, body: answer, location: nil)
        #expect(try await store.personalData.eraseUser(app: "shop-ios", id: user) != nil)
        guard case .answered(_, let kept, _) = try await store.idempotency.claim(app: "shop-ios", key: "k1", body: body, now: 2) else {
            Issue.record("the key's answer is gone")
            return
        }
        #expect(!kept.contains("lovelace"), "the answer still names the erased user: \(kept)")
    }
}
