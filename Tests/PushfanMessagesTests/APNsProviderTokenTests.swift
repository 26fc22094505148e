import Foundation
@testable import PushfanAPNsModel
import PushfanTestSupport
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

/// A signer that records what it signed and returns 64 distinct bytes.
final class APNsRecordingSigner: Sendable {
    private let inputs = Locked<[Data]>([])
    var calls: Int { inputs.withLock { $0.count } }
    var signed: [Data] { inputs.withLock { $0 } }
    func sign(_ input: Data) -> Data {
        let count = inputs.withLock { inputs in
            inputs.append(input)
            return inputs.count
        }
        return Data((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ count) })
    }
}

@Suite("APNs provider token")
struct APNsProviderTokenTests {
    static let start = Date(timeIntervalSince1970: 1_750_000_000)

    static func key(_ signer: APNsRecordingSigner, team: String = "TEAM123456", kid: String = "KEY1234567") -> ProviderSigningKey {
        try! ProviderSigningKey(teamID: team, keyID: kid, sign: { signer.sign($0) })
    }

    static func parts(_ token: ProviderToken) -> [String] {
        token.jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    @Test("the JWT: ES256 header with kid, iss and iat claims, base64url, signature from the signer")
    func structure() throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let token = try cache.token(for: Self.key(signer))
        let parts = Self.parts(token)
        try #require(parts.count == 3)
        #expect(String(decoding: try #require(Base64URL.decode(parts[0])), as: UTF8.self) == #"{"alg":"ES256","kid":"KEY1234567"}"#)
        #expect(String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self) == #"{"iss":"TEAM123456","iat":1749999990}"#)
        #expect(parts[0] == "eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWTEyMzQ1NjcifQ")
        #expect(token.issuedAtClaim == 1_749_999_990)  // 10 s in the past
        #expect(signer.signed == [Data((parts[0] + "." + parts[1]).utf8)])
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature == Data((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }))
        #expect(!token.jwt.contains("=") && !token.jwt.contains("+") && !token.jwt.contains("/"))
        #expect(token.authorization == "bearer " + token.jwt)
        #expect(!token.description.contains(token.jwt))
    }

    @Test("one token is reused until 50 minutes, then refreshed")
    func reuseAndRefresh() throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let key = Self.key(signer)
        let first = try cache.token(for: key)
        for _ in 0..<49 {
            clock.advance(minutes: 1)
            #expect(try cache.token(for: key) == first)
        }
        clock.advance(seconds: 59)
        #expect(try cache.token(for: key) == first)
        #expect(signer.calls == 1)
        clock.advance(seconds: 1)
        let second = try cache.token(for: key)
        #expect(second != first)
        #expect(second.issuedAtClaim == first.issuedAtClaim + 50 * 60)
        #expect(signer.calls == 2)
    }

    @Test("a key object made anew for the same team and key shares the token")
    func sameIdentity() throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let first = try cache.token(for: Self.key(signer))
        #expect(try cache.token(for: Self.key(signer)) == first)
        let other = try cache.token(for: Self.key(signer, kid: "KEY7654321"))
        #expect(other != first)
        #expect(other.keyID == "KEY7654321")
        #expect(signer.calls == 2)
    }

    @Test("ExpiredProviderToken on a young token: kept until it is 20 minutes old")
    func invalidateYoung() throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let key = Self.key(signer)
        let first = try cache.token(for: key)
        clock.advance(minutes: 5)
        #expect(cache.invalidate(first, for: key) == .refreshAt(Self.start.addingTimeInterval(20 * 60)))
        #expect(try cache.token(for: key) == first)
        clock.advance(minutes: 14.9)
        #expect(try cache.token(for: key) == first)
        clock.advance(minutes: 0.1)
        let second = try cache.token(for: key)
        #expect(second != first)
        #expect(signer.calls == 2)
        // A late report about the old token changes nothing.
        #expect(cache.invalidate(first, for: key) == .alreadyReplaced)
        #expect(try cache.token(for: key) == second)
    }

    @Test("ExpiredProviderToken on a token 20 minutes or older: refreshed at once")
    func invalidateOld() throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let key = Self.key(signer)
        let first = try cache.token(for: key)
        clock.advance(minutes: 20)
        #expect(cache.invalidate(first, for: key) == .refreshNow)
        let second = try cache.token(for: key)
        #expect(second != first)
        // Asking again right away does not make a third.
        #expect(cache.invalidate(second, for: key) == .refreshAt(clock.wall.addingTimeInterval(20 * 60)))
        #expect(try cache.token(for: key) == second)
        #expect(signer.calls == 2)
    }

    @Test("never two different tokens for one key within 20 minutes, whatever the callers do")
    func twentyMinuteInvariant() throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let key = Self.key(signer)
        var generator = APNsSplitMix(seed: 42)
        var seen: [(ProviderToken, Date)] = []
        for _ in 0..<5_000 {
            clock.advance(seconds: Double(generator.next() % 90))
            let token = try cache.token(for: key)
            if seen.last?.0 != token { seen.append((token, clock.wall)) }
            if generator.next() % 3 == 0 { cache.invalidate(token, for: key) }
            #expect(clock.wall.timeIntervalSince(token.createdAt) < 60 * 60)  // never older than Apple's hour
        }
        #expect(seen.count > 10)
        for (earlier, later) in zip(seen, seen.dropFirst()) {
            #expect(later.1.timeIntervalSince(earlier.1) >= 20 * 60)
        }
        #expect(signer.calls == seen.count)
    }

    @Test("concurrent callers get one token from one signature")
    func concurrent() async throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let key = Self.key(signer)
        let tokens = try await withThrowingTaskGroup(of: ProviderToken.self) { group in
            for _ in 0..<64 { group.addTask { try cache.token(for: key) } }
            return try await group.reduce(into: Set<ProviderToken>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        #expect(signer.calls == 1)
    }

    @Test("a clock that goes backwards keeps the token")
    func clockBackwards() throws {
        let clock = ManualClock(wall: Self.start)
        let signer = APNsRecordingSigner()
        let cache = ProviderTokenCache(clock: clock)
        let key = Self.key(signer)
        let first = try cache.token(for: key)
        clock.advance(minutes: -90)
        #expect(try cache.token(for: key) == first)
        #expect(signer.calls == 1)
    }

    // MARK: errors

    @Test("a DER signature or a failing signer is a clear error; the next call signs again")
    func signerErrors() throws {
        let clock = ManualClock(wall: Self.start)
        let cache = ProviderTokenCache(clock: clock)
        let der = try ProviderSigningKey(teamID: "TEAM123456", keyID: "KEY1234567", sign: { _ in Data(count: 71) })
        #expect {
            try cache.token(for: der)
        } throws: { error in
            let error = error as? APNsRequestError
            return error?.code == "signing_failed"
                && error?.description == "provider token signing failed: the signer returned 71 bytes; "
                    + "ES256 needs the raw r||s signature of 64 bytes (convert OpenSSL's DER form)"
        }
        struct KeyFileUnreadable: Error, CustomStringConvertible { var description: String { "key file unreadable" } }
        let failing = try ProviderSigningKey(teamID: "TEAM123456", keyID: "KEY1234567", sign: { _ in throw KeyFileUnreadable() })
        #expect(throws: APNsRequestError.signingFailed("key file unreadable")) { try cache.token(for: failing) }
        let signer = APNsRecordingSigner()
        #expect(try cache.token(for: Self.key(signer)).keyID == "KEY1234567")
    }

    @Test("team and key ids must be letters and digits", arguments: ["", "TEAM 12345", "TEAM\"1234", "TÉAM123456", String(repeating: "A", count: 65)])
    func badIDs(_ id: String) {
        #expect {
            try ProviderSigningKey(teamID: id, keyID: "KEY1234567", sign: { _ in Data() })
        } throws: { error in
            let error = error as? APNsRequestError
            return error?.code == "invalid_credential"
                && error?.description.hasPrefix("team id must be letters and digits, like Apple's 10-character ABC123DEFG; found '") == true
        }
        #expect(throws: APNsRequestError.self) {
            try ProviderSigningKey(teamID: "TEAM123456", keyID: id, sign: { _ in Data() })
        }
    }

    // MARK: base64url

    @Test("base64url: RFC 4648 vectors, URL alphabet, no padding", arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ])
    func vectors(plain: String, encoded: String) {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Data(plain.utf8))
    }

    @Test("base64url uses - and _ where base64 has + and /")
    func alphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.encode([0xFF, 0xFF, 0xFE]) == "___-")
        #expect(Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
        #expect(Base64URL.decode("Zg==") == nil)
        #expect(Base64URL.decode("+/8") == nil)
        #expect(Base64URL.decode("Z") == nil)
        var generator = APNsSplitMix(seed: 7)
        for length in 0..<100 {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let text = Base64URL.encode(bytes)
            #expect(Base64URL.decode(text) == Data(bytes))
            #expect(text.count == (length * 4 + 2) / 3)
        }
    }

    @Test("with an exchange, the shared token is used while it has life left; a stale or foreign one is not")
    func exchangeSharesTokensAcrossProcesses() throws {
        let clock = ManualClock(wall: Self.start)
        let otherSigner = APNsRecordingSigner()
        let other = ProviderTokenCache(clock: clock)
        let shared = try other.token(for: Self.key(otherSigner))
        clock.advance(minutes: 10)

        // Another process's 10-minute-old token wins: this cache signs a candidate and uses the shared one.
        let signer = APNsRecordingSigner()
        let offered = Locked<[ProviderToken]>([])
        let cache = ProviderTokenCache(clock: clock, exchange: { signed, _ in
            offered.withLock { $0.append(signed) }
            return shared
        })
        let key = Self.key(signer)
        #expect(try cache.token(for: key) == shared)
        #expect(offered.withLock { $0.count } == 1)
        // Reused without asking again until the shared token is 50 minutes old...
        clock.advance(minutes: 39)
        #expect(try cache.token(for: key) == shared)
        #expect(offered.withLock { $0.count } == 1)
        // ...then a new one is signed and offered; the stale shared one is refused.
        clock.advance(minutes: 2)
        let renewed = try cache.token(for: key)
        #expect(renewed != shared && renewed.createdAt == clock.wall)
        #expect(offered.withLock { $0.count } == 2)

        // A token of another key is never taken.
        let foreign = ProviderTokenCache(clock: clock, exchange: { _, _ in shared })
        let mine = try foreign.token(for: Self.key(APNsRecordingSigner(), kid: "KEY7654321"))
        #expect(mine.keyID == "KEY7654321" && mine != shared)
    }
}

typealias APNsSplitMix = SeededGenerator

