import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanStore
import PushfanSupport
@testable import PushfanWorker
import Testing

/// The sender's one decision, as tables: every APNs reason Pushfan knows, the transport
/// failures, attempt counts and deadlines.
@Suite struct DeliveryDeciderTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    /// No jitter: the delays in the tables are exact.
    static let decider: DeliveryDecider = {
        var policy = RetryPolicy()
        policy.jitter = .none
        return DeliveryDecider(retryPolicy: policy)
    }()

    static func decide(_ result: APNsSendResult, attempt: Int = 1, expiration: APNsNotification.Expiration = .unspecified) -> DeliveryDecider.Decision {
        decider.decide(result, attempt: attempt, expiration: expiration, firstAttemptAt: now, now: now)
    }

    @Test("every known APNs reason on its first attempt", arguments: APNsReason.table.map { ($0.reason, $0.status, $0.disposition) })
    func everyReason(_ reason: APNsReason, _ status: Int, _ disposition: APNsReason.Disposition) {
        let stamp = Date(timeIntervalSince1970: 1_700_000_000)
        let decision = Self.decide(.response(.rejected(status: status, reason: reason, timestamp: status == 410 ? stamp : nil)))
        switch disposition {
        case .invalidateToken:
            let hygiene: DeliveryDecider.TokenHygiene = status == 410 ? .unregistered(at: stamp) : .invalidate
            #expect(decision == .final(.init(.invalidToken, status: status, reason: reason.rawValue, hygiene: hygiene)))
        case .fixRequest, .doNotRetry:
            #expect(decision == .final(.init(.rejected, status: status, reason: reason.rawValue)))
        case .credentialsProblem, .refreshProviderTokenAndRetry:
            #expect(decision == .pauseApp(reason: "APNs answered \(status) \(reason.rawValue)"))
        case .retryLater where reason == .tooManyProviderTokenUpdates:
            #expect(decision == .pauseApp(reason: "APNs answered \(status) \(reason.rawValue)"), "the key's, not the device's")
        case .retryLater, .retryOnNewConnection, .useSeparateConnection:
            // 429 TooManyRequests waits a minute per token; the rest back off from 250 ms.
            let delay: Duration = reason == .tooManyRequests ? .seconds(60) : .milliseconds(250)
            #expect(decision == .retry(after: delay), "\(reason.rawValue)")
        }
    }

    @Test("acceptance is delivered with APNs' id")
    func accepted() {
        #expect(Self.decide(.response(.accepted(apnsID: "A-1", uniqueID: nil))) == .final(.init(.delivered, status: 200, apnsID: "A-1")))
    }

    @Test("an unknown reason falls back on its status class")
    func unknownReasons() {
        #expect(Self.decide(.response(.rejected(status: 400, reason: APNsReason(rawValue: "NewIn2027"), timestamp: nil)))
            == .final(.init(.rejected, status: 400, reason: "NewIn2027")))
        #expect(Self.decide(.response(.rejected(status: 502, reason: .unspecified, timestamp: nil))) == .retry(after: .milliseconds(250)))
    }

    @Test("transport failures", arguments: APNsTransportFailure.Cause.allCases)
    func transportFailures(_ cause: APNsTransportFailure.Cause) {
        let decision = Self.decide(.failed(APNsTransportFailure(cause, detail: "d")))
        switch cause {
        case .credentialsUnavailable: #expect(decision == .pauseApp(reason: APNsTransportFailure(cause, detail: "d").description))
        case .senderClosed, .withdrawn: #expect(decision == .handBack)
        default: #expect(decision == .retry(after: .milliseconds(250)), "\(cause)")
        }
    }

    @Test("retries back off, and end failed after the last attempt with the last reason")
    func attemptsRunOut() {
        let unavailable = APNsSendResult.response(.rejected(status: 503, reason: .serviceUnavailable, timestamp: nil))
        let delays = (1...4).map { Self.decide(unavailable, attempt: $0) }
        #expect(delays == [.retry(after: .milliseconds(250)), .retry(after: .milliseconds(500)), .retry(after: .seconds(1)), .retry(after: .seconds(2))])
        #expect(Self.decide(unavailable, attempt: 5) == .final(.init(.failed, status: 503, reason: "ServiceUnavailable")))
        let lost = APNsSendResult.failed(APNsTransportFailure(.connectionLost, detail: ""))
        #expect(Self.decide(lost, attempt: 5) == .final(.init(.failed, reason: "connection_lost")))
    }

    @Test("a retry that would land after the expiration ends expired instead")
    func deadline() {
        let unavailable = APNsSendResult.response(.rejected(status: 503, reason: .serviceUnavailable, timestamp: nil))
        let soon = APNsNotification.Expiration.at(epochSeconds: 1_800_000_000)
        #expect(Self.decide(unavailable, attempt: 1, expiration: soon) == .final(.init(.expired, status: 503, reason: "ServiceUnavailable")))
        let later = APNsNotification.Expiration.at(epochSeconds: 1_800_000_060)
        #expect(Self.decide(unavailable, attempt: 1, expiration: later) == .retry(after: .milliseconds(250)))
        // Now or never: a failed first try is not repeated past the try-once window.
        #expect(Self.decide(unavailable, attempt: 1, expiration: .immediately) == .retry(after: .milliseconds(250)))
    }
}
