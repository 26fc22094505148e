import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport

/// APNs provider tokens shared between the processes that sign with one key: APNs answers
/// TooManyProviderTokenUpdates when a key's token changes more often than every 20
/// minutes, and every worker signing its own would do just that.
package struct ProviderTokenStore: Sendable {
    let executor: StoreExecutor

    /// Offers `jwt` (issued at `issuedAt`, epoch seconds); it replaces the stored token only
    /// if that one was issued `replaceAfter` seconds or more before. Returns the token to
    /// use: the stored one or the offered one. Blocking: call it from a thread of its own.
    package func exchange(teamID: String, keyID: String, jwt: String, issuedAt: Int64, replaceAfter: Int64) throws(StoreError) -> (jwt: String, issuedAt: Int64) {
        try executor.runBlocking { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> (jwt: String, issuedAt: Int64) in
                try connection.execute("""
                    INSERT INTO provider_tokens (team_id, key_id, jwt, issued_at) VALUES (\(teamID), \(keyID), \(jwt), \(issuedAt))
                    ON CONFLICT (team_id, key_id) DO UPDATE SET jwt = excluded.jwt, issued_at = excluded.issued_at
                    WHERE provider_tokens.issued_at <= excluded.issued_at - \(replaceAfter)
                    """)
                let current = try connection.queryOne("SELECT jwt, issued_at FROM provider_tokens WHERE team_id = \(teamID) AND key_id = \(keyID)") {
                    (jwt: $0.text(0) ?? jwt, issuedAt: $0.int(1) ?? issuedAt)
                }
                return current ?? (jwt, issuedAt)
            }
        }
    }
}

extension ProviderTokenCache {
    /// A cache whose tokens are shared through `store` with every process signing with the
    /// same key (workers, the API's channel calls): one token per key for 40 minutes. When
    /// the store cannot be reached, the process's own token is used and `failed` is told.
    package static func shared(
        through store: ProviderTokenStore, clock: any ServiceClock, failed: @escaping @Sendable (StoreError) -> Void
    ) -> ProviderTokenCache {
        ProviderTokenCache(clock: clock, exchange: { signed, key in
            do throws(StoreError) {
                let current = try store.exchange(
                    teamID: key.teamID, keyID: key.keyID, jwt: signed.jwt, issuedAt: signed.issuedAtClaim, replaceAfter: 40 * 60)
                if current.jwt == signed.jwt { return signed }
                return ProviderToken(jwt: current.jwt, for: key) ?? signed
            } catch {
                failed(error)
                return signed
            }
        })
    }
}
