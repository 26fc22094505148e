import Foundation
import PushfanAPNsModel
import PushfanCrypto
import PushfanSupport

/// A token-auth key the simulator knows: Apple's team id and key id, the public half of the
/// .p8 key, and the bundle ids it may push to (nil: any).
package struct RegisteredKey: Sendable {
    package let teamID: String
    package let keyID: String
    package let publicKey: ES256PublicKey?
    package let topics: Set<String>?

    package init(teamID: String, keyID: String, publicKey: ES256PublicKey?, topics: Set<String>? = nil) {
        self.teamID = teamID
        self.keyID = keyID
        self.publicKey = publicKey
        self.topics = topics
    }

    /// `TEAM.KEY`, how stats name the key.
    package var label: String { teamID + "." + keyID }

    /// Reads a keys file (JSON, see docs/apns-sim.md):
    /// `{"keys":[{"team_id":…,"key_id":…,"public_key":PEM | "public_key_file":F | "private_key_file":F, "topics":[…]}]}`.
    /// Relative file names are relative to the keys file.
    package static func load(file path: String) throws(SimConfigurationError) -> [RegisteredKey] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SimConfigurationError("cannot read the keys file \(path)")
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let list = root["keys"] as? [[String: Any]] else {
            throw SimConfigurationError("the keys file \(path) must be a JSON object with a \"keys\" array of objects")
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        func resolve(_ name: String) -> String { name.hasPrefix("/") ? name : directory.appendingPathComponent(name).path }
        var keys: [RegisteredKey] = []
        for (index, entry) in list.enumerated() {
            let at = "keys[\(index)] in \(path)"
            guard let team = entry["team_id"] as? String, !team.isEmpty, let kid = entry["key_id"] as? String, !kid.isEmpty else {
                throw SimConfigurationError("\(at) needs \"team_id\" and \"key_id\" strings")
            }
            let publicKey: ES256PublicKey
            do throws(CryptoError) {
                if let pem = entry["public_key"] as? String {
                    publicKey = try ES256PublicKey(pem: pem)
                } else if let file = entry["public_key_file"] as? String {
                    guard let text = try? String(contentsOfFile: resolve(file), encoding: .utf8) else {
                        throw CryptoError("cannot read \(resolve(file))")
                    }
                    publicKey = try ES256PublicKey(pem: text)
                } else if let file = entry["private_key_file"] as? String {
                    publicKey = try ES256PrivateKey(contentsOfFile: resolve(file)).publicKey
                } else {
                    throw CryptoError("needs \"public_key\" (PEM), \"public_key_file\" or \"private_key_file\" (.p8)")
                }
            } catch {
                throw SimConfigurationError("\(at) (key id \(kid)): \(error.description)")
            }
            var topics: Set<String>?
            if let value = entry["topics"] {
                guard let list = value as? [String] else { throw SimConfigurationError("\(at): \"topics\" must be an array of bundle ids") }
                topics = Set(list)
            }
            if keys.contains(where: { $0.keyID == kid }) { throw SimConfigurationError("\(at): key id \(kid) is listed twice") }
            keys.append(RegisteredKey(teamID: team, keyID: kid, publicKey: publicKey, topics: topics))
        }
        return keys
    }
}

/// A provider token that passed verification.
package struct VerifiedToken: Sendable, Equatable {
    /// Index into the authority's keys.
    package let keyIndex: Int
    /// The `iat` claim, epoch seconds.
    package let issuedAt: Int64

    package init(keyIndex: Int, issuedAt: Int64) {
        self.keyIndex = keyIndex
        self.issuedAt = issuedAt
    }
}

/// Checks provider tokens (JWTs) like APNs:
/// - `authorization: bearer <JWT>` with header `{"alg":"ES256","kid":…}` and claims
///   `{"iss":TEAM,"iat":…}`; anything malformed, an unknown key, a team that is not the
///   key's or a bad signature is 403 InvalidProviderToken;
/// - `iat` more than 60 minutes before the simulator's clock (or more than 5 minutes after
///   it) is 403 ExpiredProviderToken, checked on every request;
/// - with `updateScope == .key`, a token with a newer `iat` than the key's current one, less
///   than 20 minutes after the current one was first accepted, is 429
///   TooManyProviderTokenUpdates (with `.connection`, each connection applies that rule to
///   its own tokens, `ConnectionTokenClock`; the authority only counts changes). The current
///   token keeps working until it expires. Tokens with the same `iat` (ES256 signatures differ
///   each time, so connections that sign in the same second make different texts) or an
///   older one are not updates;
/// - with `acceptAnyKey`, any kid/iss pair is accepted without a signature check (the
///   structure and claims are still checked), and keys are created as they appear.
///
/// Verification is not per request: a token is verified once, then found by its exact text
/// (`TokenCache` on each event-loop thread, the shared table here behind a lock).
package final class ProviderAuthority: Sendable {
    package static let maxAgeSeconds: Int64 = 60 * 60
    package static let minimumRefreshSeconds: Int64 = 20 * 60
    package static let allowedFutureSeconds: Int64 = 5 * 60

    package let acceptAnyKey: Bool

    private struct KeyState {
        var key: RegisteredKey
        /// When (simulator clock) the key's current token was first accepted, and its `iat`.
        var currentSince: Int64?
        var currentIssuedAt: Int64 = .min
        /// Times a new token replaced the current one.
        var changes = 0
    }

    private struct State {
        var keys: [KeyState]
        var accepted: [String: VerifiedToken] = [:]
    }

    private let state: Locked<State>

    /// Where the 20-minute rule applies: `.key` here, for every token of a key whatever the
    /// connection; `.connection` leaves it to each connection (`ConnectionTokenClock`) and
    /// only counts changes here.
    package enum UpdateScope: String, Sendable, CaseIterable {
        case key, connection
    }

    package let updateScope: UpdateScope

    package init(keys: [RegisteredKey], acceptAnyKey: Bool = false, updateScope: UpdateScope = .key) {
        self.acceptAnyKey = acceptAnyKey
        self.updateScope = updateScope
        state = Locked(State(keys: keys.map { KeyState(key: $0) }))
    }

    /// The key at `index` (as found in a `VerifiedToken`).
    package func key(at index: Int) -> RegisteredKey {
        state.withLock { $0.keys[index].key }
    }

    /// `TEAM.KEY` → token changes, for stats.
    package func tokenChanges() -> [String: Int] {
        state.withLock { state in
            Dictionary(state.keys.map { ($0.key.label, $0.changes) }, uniquingKeysWith: +)
        }
    }

    package func resetCounters() {
        state.withLock { state in for index in state.keys.indices { state.keys[index].changes = 0 } }
    }

    /// The age rule alone, for tokens already verified.
    package static func checkAge(_ token: VerifiedToken, now: Int64) -> SimRejection? {
        if now - token.issuedAt > maxAgeSeconds || token.issuedAt - now > allowedFutureSeconds {
            return SimRejection(.expiredProviderToken)
        }
        return nil
    }

    /// Verifies a token not seen before on this thread. `now` is the simulator clock, epoch seconds.
    package func admit(authorization: String?, now: Int64) -> Result<VerifiedToken, SimRejection> {
        guard let authorization, !authorization.isEmpty else { return .failure(SimRejection(.missingProviderToken)) }
        guard let jwt = Self.bearerToken(authorization) else { return .failure(SimRejection(.invalidProviderToken)) }
        if let known = state.withLock({ $0.accepted[jwt] }) {
            if let expired = Self.checkAge(known, now: now) { return .failure(expired) }
            return .success(known)
        }
        guard let parsed = ParsedJWT(jwt) else { return .failure(SimRejection(.invalidProviderToken)) }
        let keys = state.withLock { $0.keys.map(\.key) }
        var index = keys.firstIndex { $0.keyID == parsed.keyID }
        if let found = index {
            guard keys[found].teamID == parsed.teamID else { return .failure(SimRejection(.invalidProviderToken)) }
            if !acceptAnyKey {
                guard let publicKey = keys[found].publicKey,
                      publicKey.isValidSignature(parsed.signature, for: parsed.signingInput)
                else { return .failure(SimRejection(.invalidProviderToken)) }
            }
        } else if !acceptAnyKey {
            return .failure(SimRejection(.invalidProviderToken))
        }
        let token0 = VerifiedToken(keyIndex: index ?? -1, issuedAt: parsed.issuedAt)
        if let expired = Self.checkAge(token0, now: now) { return .failure(expired) }

        return state.withLock { state -> Result<VerifiedToken, SimRejection> in
            if let known = state.accepted[jwt] { return .success(known) }
            if index == nil {
                // accept-any-key: the key appears with its first token (looked up again under
                // the lock, another thread may have added it meanwhile).
                index = state.keys.firstIndex { $0.key.keyID == parsed.keyID }
                if index == nil {
                    state.keys.append(KeyState(key: RegisteredKey(teamID: parsed.teamID, keyID: parsed.keyID, publicKey: nil)))
                    index = state.keys.count - 1
                }
            }
            let keyIndex = index!
            let key = state.keys[keyIndex]
            if parsed.issuedAt > key.currentIssuedAt {
                // A newer token: an update.
                if let since = key.currentSince {
                    if updateScope == .key, now - since < Self.minimumRefreshSeconds {
                        return .failure(SimRejection(.tooManyProviderTokenUpdates))
                    }
                    state.keys[keyIndex].changes += 1
                }
                state.keys[keyIndex].currentSince = now
                state.keys[keyIndex].currentIssuedAt = parsed.issuedAt
            }
            let token = VerifiedToken(keyIndex: keyIndex, issuedAt: parsed.issuedAt)
            state.accepted[jwt] = token
            return .success(token)
        }
    }

    /// The JWT after `bearer ` (any case, one or more spaces).
    package static func bearerToken(_ authorization: String) -> String? {
        let utf8 = authorization.utf8
        guard utf8.count > 7, utf8.prefix(6).map({ $0 | 0x20 }).elementsEqual("bearer".utf8) else { return nil }
        let rest = utf8.dropFirst(6)
        guard rest.first == UInt8(ascii: " ") else { return nil }
        let jwt = rest.drop { $0 == UInt8(ascii: " ") }
        return jwt.isEmpty ? nil : String(decoding: jwt, as: UTF8.self)
    }
}

/// A JWT split into its parts, with the claims APNs needs. Nil for anything else.
package struct ParsedJWT: Sendable {
    package let keyID: String
    package let teamID: String
    package let issuedAt: Int64
    package let signingInput: [UInt8]
    package let signature: [UInt8]

    package init?(_ jwt: String) {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerData = Base64URL.decode(String(parts[0])),
              let claimsData = Base64URL.decode(String(parts[1])),
              let signature = Base64URL.decode(String(parts[2])), signature.count == 64,
              let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
              let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any],
              header["alg"] as? String == "ES256",
              let kid = header["kid"] as? String, !kid.isEmpty,
              let iss = claims["iss"] as? String, !iss.isEmpty,
              let iatNumber = claims["iat"] as? NSNumber
        else { return nil }
        let iat = iatNumber.doubleValue
        guard iat.isFinite, iat >= 0, iat < 1e11 else { return nil }
        keyID = kid
        teamID = iss
        issuedAt = Int64(iat)
        signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        self.signature = Array(signature)
    }
}

/// The 20-minute rule for one connection (scope `.connection`): the connection's current
/// token is the newest `iat` it has used; a token with a newer `iat` less than 20 minutes after
/// the current one was first used there is TooManyProviderTokenUpdates.
package struct ConnectionTokenClock: Sendable, Equatable {
    private var issuedAt: Int64 = .min
    private var since: Int64?

    package init() {}

    /// Checks and records `token` used at `now` (epoch seconds, simulator clock).
    package mutating func use(_ token: VerifiedToken, now: Int64) -> SimRejection? {
        guard token.issuedAt > issuedAt else { return nil }
        if let since, now - since < ProviderAuthority.minimumRefreshSeconds { return SimRejection(.tooManyProviderTokenUpdates) }
        issuedAt = token.issuedAt
        since = now
        return nil
    }
}

/// A verified-token table owned by one event-loop thread, so the common case (a token
/// seen before) costs one dictionary lookup and no lock. Bounded: cleared when it gets big.
package struct TokenCache {
    private var tokens: [String: VerifiedToken] = [:]
    private static let limit = 10_000

    package init() {}

    /// Finds or admits the token; applies the age rule on every call.
    package mutating func verify(authorization: String?, authority: ProviderAuthority, now: Int64) -> Result<VerifiedToken, SimRejection> {
        if let authorization, let known = tokens[authorization] {
            if let expired = ProviderAuthority.checkAge(known, now: now) { return .failure(expired) }
            return .success(known)
        }
        let result = authority.admit(authorization: authorization, now: now)
        if case .success(let token) = result, let authorization {
            if tokens.count >= Self.limit { tokens.removeAll(keepingCapacity: true) }
            tokens[authorization] = token
        }
        return result
    }
}

/// A mistake in the simulator's configuration (flags, keys file, rules file, control JSON).
package struct SimConfigurationError: Error, CustomStringConvertible, Equatable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
