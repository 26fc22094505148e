import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanStore

/// What one APNs answer means for one device: the sender's one decision, made without I/O,
/// so it is tested as a table. The sender performs what it says (ledger, results, token
/// hygiene, retries, the app's pause).
package struct DeliveryDecider: Sendable {
    package let retryPolicy: RetryPolicy

    package init(retryPolicy: RetryPolicy) {
        self.retryPolicy = retryPolicy
    }

    package enum Decision: Sendable, Equatable {
        /// The device is done: this outcome goes to the ledger and the results topic.
        case final(Final)
        /// Send again after `after`; the attempt counts.
        case retry(after: Duration)
        /// The app's credentials fail: the device waits with its app, and the attempt does
        /// not count (it is not the device's fault).
        case pauseApp(reason: String)
        /// Never sent (the sender is closing): it stays claimed for the next owner, and the
        /// attempt does not count.
        case handBack
    }

    package struct Final: Sendable, Equatable {
        package var state: LedgerState
        package var status: Int?
        package var reason: String?
        package var apnsID: String?
        /// The token is bad: what to mark in the store.
        package var hygiene: TokenHygiene?

        package init(_ state: LedgerState, status: Int? = nil, reason: String? = nil, apnsID: String? = nil, hygiene: TokenHygiene? = nil) {
            self.state = state
            self.status = status
            self.reason = reason
            self.apnsID = apnsID
            self.hygiene = hygiene
        }
    }

    package enum TokenHygiene: Sendable, Equatable {
        /// 410: unregistered at APNs' timestamp (now when it gave none), unless the device
        /// registered again after it.
        case unregistered(at: Date?)
        /// 400 BadDeviceToken, DeviceTokenNotForTopic: invalid in that environment.
        case invalidate
    }

    /// `attempt` counts the request this answer is for (1 for the first).
    package func decide(
        _ result: APNsSendResult, attempt: Int, expiration: APNsNotification.Expiration, firstAttemptAt: Date, now: Date
    ) -> Decision {
        switch result {
        case .response(.accepted(let apnsID, _)):
            return .final(Final(.delivered, status: 200, apnsID: apnsID))
        case .response(.rejected(let status, let reason, let timestamp)):
            switch reason.disposition(status: status) {
            case .invalidateToken:
                return .final(Final(.invalidToken, status: status, reason: reason.rawValue, hygiene: status == 410 ? .unregistered(at: timestamp) : .invalidate))
            case .fixRequest, .doNotRetry:
                return .final(Final(.rejected, status: status, reason: reason.rawValue))
            case .credentialsProblem, .refreshProviderTokenAndRetry:
                // An expired provider token reaches here only when the pool could not cure it
                // (resent with a fresh token, or one too young to replace): like a refused
                // key, it is the key's, and every send of the app meets it until it passes.
                return .pauseApp(reason: "APNs answered \(status) \(reason.rawValue)")
            case .retryLater where reason == .tooManyProviderTokenUpdates:
                // The key's tokens, not the device: its retries would only use up attempts.
                return .pauseApp(reason: "APNs answered \(status) \(reason.rawValue)")
            case .retryLater, .retryOnNewConnection, .useSeparateConnection:
                break
            }
        case .failed(let failure):
            if failure.cause == .credentialsUnavailable { return .pauseApp(reason: failure.description) }
            if failure.cause == .senderClosed || failure.cause == .withdrawn { return .handBack }
        }
        switch retryPolicy.decide(result, attempt: attempt, now: now, expiration: expiration, firstAttemptAt: firstAttemptAt) {
        case .retry(let after): return .retry(after: after)
        case .expired: return .final(Final(.expired, status: Self.status(of: result), reason: Self.reason(of: result)))
        case .giveUp, .done: return .final(Final(.failed, status: Self.status(of: result), reason: Self.reason(of: result)))
        }
    }

    static func status(of result: APNsSendResult) -> Int? {
        if case .response(.rejected(let status, _, _)) = result { return status }
        return nil
    }

    static func reason(of result: APNsSendResult) -> String {
        switch result {
        case .response(.rejected(_, let reason, _)): return reason.rawValue.isEmpty ? "unspecified" : reason.rawValue
        case .response(.accepted): return ""
        case .failed(let failure): return failure.cause.rawValue
        }
    }
}
