import Foundation
import PushfanSupport
import Synchronization

/// A token-auth signing key: Apple's team id and key id, and a function that
/// signs with the .p8 P-256 key (the OpenSSL part lives in the transport
/// module; this one stays pure).
package struct ProviderSigningKey: Sendable {
    /// Signs the JWT signing input with ES256 and returns the raw signature:
    /// r and s, 32 bytes each, big-endian, concatenated (64 bytes). Not the
    /// DER form OpenSSL produces; convert before returning.
    package typealias Signer = @Sendable (Data) throws -> Data

    /// `iss`: the 10-character team id.
    package let teamID: String
    /// `kid`: the 10-character key id.
    package let keyID: String
    package let sign: Signer

    /// Refuses ids that are not 1 to 64 ASCII letters and digits (Apple's are
    /// 10, like `ABC123DEFG`): anything else is a configuration mistake that
    /// would only surface as InvalidProviderToken.
    package init(teamID: String, keyID: String, sign: @escaping Signer) throws(APNsRequestError) {
        try Self.checkID(teamID, what: "team id")
        try Self.checkID(keyID, what: "key id")
        self.teamID = teamID
        self.keyID = keyID
        self.sign = sign
    }

    /// Identifies the key in the cache: one token per (team, key).
    package var identity: Identity { Identity(teamID: teamID, keyID: keyID) }

    package struct Identity: Hashable, Sendable {
        package let teamID: String
        package let keyID: String
    }

    /// Apple's shape for team and key ids: exactly 10 characters of A-Z and 0-9. Checked
    /// where credentials are registered; the signer itself accepts any short alphanumeric id.
    package static func hasAppleIDShape(_ id: String) -> Bool {
        id.utf8.count == 10 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }
    }

    private static func checkID(_ id: String, what: String) throws(APNsRequestError) {
        guard (1...64).contains(id.utf8.count),
              id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        else {
            throw .invalidCredential(
                "\(what) must be letters and digits, like Apple's 10-character ABC123DEFG; found \(APNsQuote.text(id))")
        }
    }
}

/// A signed provider token (JWT).
package struct ProviderToken: Sendable, Hashable, CustomStringConvertible {
    /// `header.claims.signature`, each base64url without padding.
    package let jwt: String
    /// The `iat` claim, epoch seconds.
    package let issuedAtClaim: Int64
    /// When the cache made it, by the cache's clock. Ages are measured from
    /// here, not from `iat` (which is backdated).
    package let createdAt: Date
    package let keyID: String

    /// The `authorization` header value.
    package var authorization: String { "bearer " + jwt }

    /// Redacted: the token is a credential.
    package var description: String { "ProviderToken(kid: \(keyID), iat: \(issuedAtClaim))" }
}

extension ProviderToken {
    /// Reads back a JWT made by `ProviderTokenCache.makeToken` for `key`:
    /// header `alg` ES256 and `kid`, claims `iss` and `iat`. Its creation time
    /// is taken as `iat` + `backdate`. Nil for anything else. The signature is
    /// not checked: this is for tokens Pushfan saved itself.
    package init?(jwt: String, for key: ProviderSigningKey, backdate: Duration = .seconds(10)) {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerData = Base64URL.decode(String(parts[0])), let claimsData = Base64URL.decode(String(parts[1])),
              let signature = Base64URL.decode(String(parts[2])), signature.count == 64,
              case .object(let header)? = try? JSONDecoder().decode(JSONValue.self, from: headerData),
              case .object(let claims)? = try? JSONDecoder().decode(JSONValue.self, from: claimsData),
              header["alg"]?.stringValue == "ES256", header["kid"]?.stringValue == key.keyID,
              claims["iss"]?.stringValue == key.teamID, case .int(let iat)? = claims["iat"]
        else { return nil }
        self.init(
            jwt: jwt, issuedAtClaim: iat, createdAt: Date(timeIntervalSince1970: Double(iat) + RetryPolicy.seconds(backdate)),
            keyID: key.keyID)
    }
}

/// One provider token per (team, key), shared by every connection and request
/// that uses the key.
///
/// Apple's rules: refresh no more often than every 20 minutes (else 429
/// TooManyProviderTokenUpdates) and at least every 60 (else 403
/// ExpiredProviderToken). So a token is reused until it is `refreshAfter`
/// (50 minutes) old, and a new one is never made within `minimumLifetime`
/// (20 minutes) of the last one, whatever anyone asks: the cache guarantees
/// that no two different tokens for one key are created less than 20 minutes
/// apart.
///
/// After 403 ExpiredProviderToken the sender calls `invalidate`. Apple sends
/// that for a token older than an hour, or when the clocks disagree. If the
/// token is at least 20 minutes old, it is dropped and the next `token(for:)`
/// signs a new one. If it is younger, the rejection can only be clock skew, and
/// a new token would risk TooManyProviderTokenUpdates without fixing the skew;
/// the cache keeps it and schedules the refresh for the moment it turns 20
/// minutes, which `invalidate` returns so the caller can hold that key's sends
/// until then. `iat` is backdated by `backdate` (10 s) so a server clock
/// slightly behind ours does not see a token from the future.
///
/// Thread-safe (a `Locked` state), synchronous so the transport thread can call it.
/// The signer runs under the lock, at most once per key per 20 minutes, so
/// concurrent callers wait for one signature instead of making several.
package final class ProviderTokenCache: Sendable {
    package struct Configuration: Sendable, Hashable {
        /// Age at which a token is replaced. Default 50 minutes.
        package var refreshAfter: Duration = .seconds(50 * 60)
        /// A new token is never made before the current one is this old.
        /// Default 20 minutes (Apple's minimum).
        package var minimumLifetime: Duration = .seconds(20 * 60)
        /// How far `iat` is set before now. Default 10 s.
        package var backdate: Duration = .seconds(10)

        package init() {}
    }

    /// What `invalidate` did.
    package enum Invalidation: Sendable, Hashable {
        /// Dropped; the next `token(for:)` makes a new one.
        case refreshNow
        /// Too young to replace; a new token will be made from this moment.
        case refreshAt(Date)
        /// Not the current token (already replaced): nothing to do.
        case alreadyReplaced
    }

    private struct Entry {
        var token: ProviderToken
        /// From when `token(for:)` makes a new token.
        var refreshAt: Date
    }

    /// Shares tokens with other processes that sign with the same key: given a
    /// token just signed, returns the token to use (that one, or one another
    /// process made recently). Called synchronously, at most once per key per
    /// refresh, from whatever thread needs the token.
    package typealias Exchange = @Sendable (_ signed: ProviderToken, _ key: ProviderSigningKey) -> ProviderToken

    package let configuration: Configuration
    private let clock: any ServiceClock
    private let exchange: Exchange?
    private let entries = Locked<[ProviderSigningKey.Identity: Entry]>([:])

    /// - Parameter clock: its wall time is the source of `iat`; tests move a
    ///   manual one.
    /// - Parameter exchange: where tokens are shared across processes (the
    ///   workers use the device store); nil keeps them to this process.
    package init(configuration: Configuration = Configuration(), clock: any ServiceClock, exchange: Exchange? = nil) {
        self.configuration = configuration
        self.clock = clock
        self.exchange = exchange
    }

    /// The current token for `key`, signing a new one when there is none or
    /// it is due. Throws only when signing fails; the cache is unchanged then,
    /// so the next call signs again.
    package func token(for key: ProviderSigningKey) throws(APNsRequestError) -> ProviderToken {
        let configuration = self.configuration
        let now = clock.wall
        let result: Result<ProviderToken, APNsRequestError> = entries.withLock { entries in
            let identity = key.identity
            if let entry = entries[identity] {
                // A clock that went backwards (now < createdAt) keeps the token:
                // replacing it could break the 20-minute rule.
                if now < entry.refreshAt || now < entry.token.createdAt { return .success(entry.token) }
            }
            do throws(APNsRequestError) {
                var token = try Self.makeToken(key: key, now: now, backdate: configuration.backdate)
                let lifetime = RetryPolicy.seconds(max(configuration.refreshAfter, configuration.minimumLifetime))
                // A shared token is used only if it is this key's and has life left by our clock.
                if let shared = exchange?(token, key), shared.keyID == key.keyID, shared.createdAt <= now,
                   now < shared.createdAt.addingTimeInterval(lifetime) {
                    token = shared
                }
                entries[identity] = Entry(token: token, refreshAt: token.createdAt.addingTimeInterval(lifetime))
                return .success(token)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Takes `token` as the current token for `key`: one an earlier process
    /// made and saved, so that short-lived processes (`pushfan send`) do not
    /// sign a new token each (APNs answers TooManyProviderTokenUpdates to more
    /// than one new token per 20 minutes). Refused (false) when the cache
    /// already has a token for the key, or `token` is not younger than
    /// `refreshAfter`.
    @discardableResult
    package func adopt(_ token: ProviderToken, for key: ProviderSigningKey) -> Bool {
        let lifetime = RetryPolicy.seconds(max(configuration.refreshAfter, configuration.minimumLifetime))
        let now = clock.wall
        let refreshAt = token.createdAt.addingTimeInterval(lifetime)
        guard token.keyID == key.keyID, now < refreshAt, token.createdAt <= now else { return false }
        return entries.withLock { entries in
            guard entries[key.identity] == nil else { return false }
            entries[key.identity] = Entry(token: token, refreshAt: refreshAt)
            return true
        }
    }

    /// Reports that APNs refused `token` as ExpiredProviderToken. See the type's
    /// documentation for the 20-minute rule.
    @discardableResult
    package func invalidate(_ token: ProviderToken, for key: ProviderSigningKey) -> Invalidation {
        let minimumLifetime = RetryPolicy.seconds(configuration.minimumLifetime)
        let now = clock.wall
        return entries.withLock { entries in
            let identity = key.identity
            guard var entry = entries[identity], entry.token == token else { return .alreadyReplaced }
            let earliest = entry.token.createdAt.addingTimeInterval(minimumLifetime)
            entry.refreshAt = min(entry.refreshAt, max(earliest, now))
            entries[identity] = entry
            return entry.refreshAt <= now ? .refreshNow : .refreshAt(entry.refreshAt)
        }
    }

    /// Builds and signs a JWT: header `{"alg":"ES256","kid":KEY}`, claims
    /// `{"iss":TEAM,"iat":SECONDS}` with `iat` = now − backdate, rounded down.
    package static func makeToken(
        key: ProviderSigningKey, now: Date, backdate: Duration
    ) throws(APNsRequestError) -> ProviderToken {
        let iat = Int64((now.timeIntervalSince1970 - RetryPolicy.seconds(backdate)).rounded(.down))
        var header: [UInt8] = []
        JSONWriter.writeKeyedObject([("alg", .string("ES256")), ("kid", .string(key.keyID))], into: &header)
        var claims: [UInt8] = []
        JSONWriter.writeKeyedObject([("iss", .string(key.teamID)), ("iat", .int(iat))], into: &claims)
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature: Data
        do {
            signature = try key.sign(Data(signingInput.utf8))
        } catch {
            throw .signingFailed(String(describing: error))
        }
        guard signature.count == 64 else {
            throw .signingFailed(
                "the signer returned \(signature.count) bytes; ES256 needs the raw r||s signature of 64 bytes (convert OpenSSL's DER form)")
        }
        return ProviderToken(
            jwt: signingInput + "." + Base64URL.encode(signature), issuedAtClaim: iat, createdAt: now, keyID: key.keyID)
    }
}

/// Base64 with the URL-safe alphabet (`-`, `_`) and no `=` padding, as JWTs
/// use it (RFC 7515 §2).
package enum Base64URL {
    package static func encode(_ bytes: some Collection<UInt8>) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// Nil for text outside the alphabet or of impossible length.
    package static func decode(_ text: String) -> Data? {
        guard text.utf8.allSatisfy({ $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "/") }),
              text.utf8.count % 4 != 1
        else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard)
    }
}
