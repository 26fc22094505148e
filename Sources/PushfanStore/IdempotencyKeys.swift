import Foundation
import PushfanCrypto
import PushfanMessages
import PushfanSupport

/// Idempotency keys of API requests (`Idempotency-Key`), per app: the first request with a
/// key claims it, does its work and stores its answer; a retry with the same key and body gets
/// that answer again, one with another body is refused. Keys are kept `retention`; a claim
/// whose request never finished (its process died) may be taken again after `abandonAfter`.
package struct IdempotencyKeys: Sendable {
    let executor: StoreExecutor

    package static let retention: Duration = .seconds(24 * 3600)
    package static let abandonAfter: Duration = .seconds(60)

    /// What a claim found.
    package enum Claim: Sendable, Equatable {
        /// The key is this request's: do the work, then `complete` (or `release` on failure).
        case claimed
        /// Another request with the key is still at work.
        case inProgress
        /// The key's answer, for a retry of the same request.
        case answered(status: Int, body: String, location: String?)
        /// The key was used for a different request body.
        case mismatch
    }

    package func claim(app: String, key: String, body: [UInt8], now: Int64) async throws(StoreError) -> Claim {
        let digest = Crypto.sha256(body).map { String(format: "%02x", $0) }.joined()
        let (expired, abandoned) = (now - Self.retention.milliseconds, now - Self.abandonAfter.milliseconds)
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Claim in
                try connection.execute("""
                    DELETE FROM api_idempotency WHERE app = \(app) AND key = \(key)
                       AND (created_at < \(expired) OR (status = 0 AND created_at < \(abandoned)))
                    """)
                let inserted = try connection.execute("""
                    INSERT INTO api_idempotency (app, key, request_sha256, status, created_at) VALUES (\(app), \(key), \(digest), 0, \(now))
                    ON CONFLICT (app, key) DO NOTHING
                    """) == 1
                if inserted { return .claimed }
                let row = try connection.queryOne("SELECT request_sha256, status, response, location FROM api_idempotency WHERE app = \(app) AND key = \(key)") {
                    ($0.text(0) ?? "", Int($0.int(1) ?? 0), $0.text(2) ?? "", $0.text(3))
                }
                guard let (stored, status, response, location) = row else { return .inProgress }
                if stored != digest { return .mismatch }
                return status == 0 ? .inProgress : .answered(status: status, body: response, location: location)
            }
        }
    }

    /// The claimed request's answer, for its retries.
    package func complete(app: String, key: String, status: Int, body: String, location: String?) async throws(StoreError) {
        _ = try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE api_idempotency SET status = \(status), response = \(body), location = \(.optional(location)) WHERE app = \(app) AND key = \(key)
                """)
        }
    }

    /// Gives the key up (the request failed before anything happened): a retry may use it.
    package func release(app: String, key: String) async throws(StoreError) {
        _ = try await executor.run { connection throws(StoreError) in
            try connection.execute("DELETE FROM api_idempotency WHERE app = \(app) AND key = \(key) AND status = 0")
        }
    }
}
