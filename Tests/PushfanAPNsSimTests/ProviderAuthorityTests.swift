import Foundation
import PushfanAPNsModel
import PushfanAPNsSim
import PushfanCrypto
import PushfanMessages
import Testing

/// Test credentials: a real P-256 key and JWTs made the way the sender makes them.
struct TestKey {
    let privateKey = ES256PrivateKey.generate()
    let teamID: String
    let keyID: String

    init(teamID: String = "TEAM000001", keyID: String = "KEY0000001") {
        self.teamID = teamID
        self.keyID = keyID
    }

    var registered: RegisteredKey { RegisteredKey(teamID: teamID, keyID: keyID, publicKey: privateKey.publicKey) }

    /// A JWT with `iat` = `issuedAt` (epoch seconds).
    func jwt(issuedAt: Int64, teamID: String? = nil, keyID: String? = nil) throws -> String {
        let privateKey = self.privateKey
        let signingKey = try ProviderSigningKey(teamID: teamID ?? self.teamID, keyID: keyID ?? self.keyID) { try privateKey.sign($0) }
        return try ProviderTokenCache.makeToken(key: signingKey, now: Date(timeIntervalSince1970: TimeInterval(issuedAt)), backdate: .zero).jwt
    }

    /// `{"team_id":…,"key_id":…,"public_key":PEM, "topics":…}` for a keys file.
    func keysFileEntry(topics: [String]? = nil) -> [String: Any] {
        var entry: [String: Any] = ["team_id": teamID, "key_id": keyID, "public_key": privateKey.publicKey.pem]
        if let topics { entry["topics"] = topics }
        return entry
    }
}

@Suite("Provider tokens")
struct ProviderAuthorityTests {
    let now: Int64 = 1_800_000_000
    let key = TestKey()

    func bearer(_ jwt: String) -> String { "bearer " + jwt }

    @Test("a valid token is accepted and cached")
    func valid() throws {
        let authority = ProviderAuthority(keys: [key.registered])
        let jwt = try key.jwt(issuedAt: now - 10)
        let verified = try authority.admit(authorization: bearer(jwt), now: now).get()
        #expect(verified == VerifiedToken(keyIndex: 0, issuedAt: now - 10))
        // Seen again: same answer, no change counted.
        #expect(try authority.admit(authorization: bearer(jwt), now: now + 60).get() == verified)
        #expect(authority.tokenChanges() == ["TEAM000001.KEY0000001": 0])
        var cache = TokenCache()
        #expect(try cache.verify(authorization: bearer(jwt), authority: authority, now: now).get() == verified)
    }

    @Test("credential failures and what APNs answers")
    func rejections() throws {
        let other = TestKey()
        let authority = ProviderAuthority(keys: [key.registered])
        let good = try key.jwt(issuedAt: now)
        let parts = good.split(separator: ".").map(String.init)
        let cases: [(String, String?, String)] = [
            ("no header", nil, "MissingProviderToken"),
            ("empty header", "", "MissingProviderToken"),
            ("not bearer", "basic " + good, "InvalidProviderToken"),
            ("two parts", "bearer " + parts[0] + "." + parts[1], "InvalidProviderToken"),
            ("signature of another key", bearer(try other.jwt(issuedAt: now)), "InvalidProviderToken"),
            ("unknown key id", bearer(try key.jwt(issuedAt: now, keyID: "KEY9999999")), "InvalidProviderToken"),
            ("another team", bearer(try key.jwt(issuedAt: now, teamID: "TEAM999999")), "InvalidProviderToken"),
            ("tampered claims", "bearer " + parts[0] + "." + Base64URL.encode(Array(#"{"iss":"TEAM000001","iat":1}"#.utf8)) + "." + parts[2], "InvalidProviderToken"),
            ("iat 61 minutes old", bearer(try key.jwt(issuedAt: now - 61 * 60)), "ExpiredProviderToken"),
            ("iat 10 minutes ahead", bearer(try key.jwt(issuedAt: now + 600)), "ExpiredProviderToken"),
        ]
        for (what, header, reason) in cases {
            let result = authority.admit(authorization: header, now: now)
            guard case .failure(let rejection) = result else {
                Issue.record("\(what) was accepted")
                continue
            }
            #expect(rejection.reason.rawValue == reason, "\(what)")
            #expect(rejection.status == 403, "\(what)")
        }
    }

    @Test("60-minute rule: a cached token expires as the clock moves")
    func expiry() throws {
        let authority = ProviderAuthority(keys: [key.registered])
        let jwt = try key.jwt(issuedAt: now)
        var cache = TokenCache()
        _ = try cache.verify(authorization: bearer(jwt), authority: authority, now: now).get()
        _ = try cache.verify(authorization: bearer(jwt), authority: authority, now: now + 3600).get()
        #expect(throws: SimRejection(.expiredProviderToken)) {
            try cache.verify(authorization: bearer(jwt), authority: authority, now: now + 3601).get()
        }
    }

    @Test("20-minute rule: a new token within 20 minutes is TooManyProviderTokenUpdates")
    func refreshTooSoon() throws {
        let authority = ProviderAuthority(keys: [key.registered])
        let first = try key.jwt(issuedAt: now)
        _ = try authority.admit(authorization: bearer(first), now: now).get()
        let second = try key.jwt(issuedAt: now + 60)
        let rejected = authority.admit(authorization: bearer(second), now: now + 19 * 60 + 59)
        #expect(throws: SimRejection(.tooManyProviderTokenUpdates)) { try rejected.get() }
        #expect(SimRejection(.tooManyProviderTokenUpdates).status == 429)
        // The current token keeps working.
        _ = try authority.admit(authorization: bearer(first), now: now + 19 * 60 + 59).get()
        // At 20 minutes the new one is accepted, and counted as a change.
        _ = try authority.admit(authorization: bearer(second), now: now + 20 * 60).get()
        #expect(authority.tokenChanges() == ["TEAM000001.KEY0000001": 1])
        // The next change is measured from the second token's acceptance.
        let third = try key.jwt(issuedAt: now + 25 * 60)
        #expect(throws: SimRejection(.tooManyProviderTokenUpdates)) { try authority.admit(authorization: bearer(third), now: now + 39 * 60).get() }
        _ = try authority.admit(authorization: bearer(third), now: now + 40 * 60).get()
        authority.resetCounters()
        #expect(authority.tokenChanges() == ["TEAM000001.KEY0000001": 0])
    }

    @Test("tokens signed with the same iat are one token, not updates")
    func sameIssuedAt() throws {
        let authority = ProviderAuthority(keys: [key.registered])
        let first = try key.jwt(issuedAt: now), twin = try key.jwt(issuedAt: now), older = try key.jwt(issuedAt: now - 30)
        #expect(first != twin)
        _ = try authority.admit(authorization: bearer(first), now: now).get()
        _ = try authority.admit(authorization: bearer(twin), now: now + 5).get()
        _ = try authority.admit(authorization: bearer(older), now: now + 6).get()
        #expect(authority.tokenChanges() == ["TEAM000001.KEY0000001": 0])
        #expect(throws: SimRejection(.tooManyProviderTokenUpdates)) {
            try authority.admit(authorization: bearer(try key.jwt(issuedAt: now + 1)), now: now + 7).get()
        }
    }

    @Test("connection scope: the authority counts changes, each connection applies the 20-minute rule")
    func connectionScope() throws {
        let authority = ProviderAuthority(keys: [key.registered], updateScope: .connection)
        let first = try authority.admit(authorization: bearer(try key.jwt(issuedAt: now)), now: now).get()
        let second = try authority.admit(authorization: bearer(try key.jwt(issuedAt: now + 1)), now: now + 2).get()
        #expect(authority.tokenChanges() == ["TEAM000001.KEY0000001": 1])
        var clock = ConnectionTokenClock()
        #expect(clock.use(first, now: now) == nil)
        #expect(clock.use(second, now: now + 2) == SimRejection(.tooManyProviderTokenUpdates))
        #expect(clock.use(first, now: now + 3) == nil, "the current token keeps working")
        #expect(clock.use(second, now: now + 20 * 60) == nil)
        #expect(clock.use(first, now: now + 20 * 60 + 1) == nil, "an older token is not an update")
        var other = ConnectionTokenClock()
        #expect(other.use(second, now: now + 5) == nil, "another connection has its own clock")
    }

    @Test("two keys keep separate 20-minute clocks")
    func separateKeys() throws {
        let second = TestKey(teamID: "TEAM000001", keyID: "KEY0000002")
        let authority = ProviderAuthority(keys: [key.registered, second.registered])
        let a = try authority.admit(authorization: bearer(try key.jwt(issuedAt: now)), now: now).get()
        let b = try authority.admit(authorization: bearer(try second.jwt(issuedAt: now)), now: now).get()
        #expect(a.keyIndex == 0)
        #expect(b.keyIndex == 1)
    }

    @Test("accept-any-key checks structure and claims but not signatures")
    func acceptAnyKey() throws {
        let authority = ProviderAuthority(keys: [], acceptAnyKey: true)
        let stranger = TestKey(teamID: "SOMETEAM01", keyID: "ANYKEY0001")
        let verified = try authority.admit(authorization: bearer(try stranger.jwt(issuedAt: now)), now: now).get()
        #expect(authority.key(at: verified.keyIndex).label == "SOMETEAM01.ANYKEY0001")
        #expect(throws: SimRejection(.invalidProviderToken)) { try authority.admit(authorization: "bearer x.y.z", now: now).get() }
        #expect(throws: SimRejection(.expiredProviderToken)) {
            try authority.admit(authorization: bearer(try stranger.jwt(issuedAt: now - 7200)), now: now).get()
        }
    }

    @Test("keys file: PEM inline, public key file, .p8 file, topics; errors name the entry")
    func keysFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-keys-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let second = TestKey(keyID: "KEY0000002"), third = TestKey(keyID: "KEY0000003")
        try second.privateKey.publicKey.pem.write(to: directory.appendingPathComponent("second.pem"), atomically: true, encoding: .utf8)
        try third.privateKey.pkcs8PEM.write(to: directory.appendingPathComponent("third.p8"), atomically: true, encoding: .utf8)
        let root: [String: Any] = ["keys": [
            key.keysFileEntry(topics: ["com.example.app"]),
            ["team_id": "TEAM000001", "key_id": "KEY0000002", "public_key_file": "second.pem"],
            ["team_id": "TEAM000001", "key_id": "KEY0000003", "private_key_file": "third.p8"],
        ]]
        let file = directory.appendingPathComponent("keys.json").path
        try JSONSerialization.data(withJSONObject: root).write(to: URL(fileURLWithPath: file))
        let keys = try RegisteredKey.load(file: file)
        #expect(keys.map(\.keyID) == ["KEY0000001", "KEY0000002", "KEY0000003"])
        #expect(keys[0].topics == ["com.example.app"])
        #expect(keys[1].topics == nil)
        let authority = ProviderAuthority(keys: keys)
        _ = try authority.admit(authorization: bearer(try third.jwt(issuedAt: now)), now: now).get()

        let bad = directory.appendingPathComponent("bad.json").path
        try Data(#"{"keys":[{"team_id":"T","key_id":"K","public_key":"not a pem"}]}"#.utf8).write(to: URL(fileURLWithPath: bad))
        #expect(throws: SimConfigurationError.self) { try RegisteredKey.load(file: bad) }
        do {
            _ = try RegisteredKey.load(file: bad)
        } catch {
            #expect(error.description.contains("keys[0]"))
            #expect(error.description.contains("key id K"))
        }
        try Data(#"{"keys":[{"team_id":"T"}]}"#.utf8).write(to: URL(fileURLWithPath: bad))
        #expect(throws: SimConfigurationError("keys[0] in \(bad) needs \"team_id\" and \"key_id\" strings")) { try RegisteredKey.load(file: bad) }
        #expect(throws: SimConfigurationError("cannot read the keys file \(directory.path)/missing.json")) {
            try RegisteredKey.load(file: directory.path + "/missing.json")
        }
    }

    @Test("bearer parsing")
    func bearerParsing() {
        #expect(ProviderAuthority.bearerToken("bearer abc") == "abc")
        #expect(ProviderAuthority.bearerToken("Bearer  abc") == "abc")
        #expect(ProviderAuthority.bearerToken("bearerabc") == nil)
        #expect(ProviderAuthority.bearerToken("bearer ") == nil)
    }
}
