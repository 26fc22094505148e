import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages

@Suite("APNs outcomes")
struct APNsOutcomeTests {
    typealias Disposition = APNsReason.Disposition

    /// APNS.md's table, written out independently of `APNsReason.table`.
    static let documented: [(String, Int, Disposition)] = [
        ("BadCollapseId", 400, .fixRequest), ("BadExpirationDate", 400, .fixRequest),
        ("BadMessageId", 400, .fixRequest), ("BadPriority", 400, .fixRequest), ("BadTopic", 400, .fixRequest),
        ("DuplicateHeaders", 400, .fixRequest), ("InvalidPushType", 400, .fixRequest),
        ("MissingDeviceToken", 400, .fixRequest), ("MissingTopic", 400, .fixRequest),
        ("PayloadEmpty", 400, .fixRequest), ("TopicDisallowed", 400, .fixRequest),
        // Broadcast channels: the channel or the request is wrong, never the token.
        ("BadChannelId", 400, .fixRequest), ("ChannelNotRegistered", 400, .fixRequest), ("MissingChannelId", 400, .fixRequest), ("MissingPushType", 400, .fixRequest),
        ("CannotCreateChannelConfig", 400, .fixRequest), ("FeatureNotEnabled", 400, .fixRequest),
        ("BadRequestParams", 400, .fixRequest), ("BadRequestPayload", 400, .fixRequest),
        ("BadDeviceToken", 400, .invalidateToken), ("DeviceTokenNotForTopic", 400, .invalidateToken),
        ("IdleTimeout", 400, .retryOnNewConnection),
        ("ExpiredProviderToken", 403, .refreshProviderTokenAndRetry),
        ("InvalidProviderToken", 403, .credentialsProblem), ("MissingProviderToken", 403, .credentialsProblem),
        ("BadCertificate", 403, .credentialsProblem), ("BadCertificateEnvironment", 403, .credentialsProblem),
        ("BadEnvironmentKeyIdInToken", 403, .credentialsProblem), ("BadEnvironmentKeyInToken", 403, .credentialsProblem),
        ("UnrelatedKeyIdInToken", 403, .useSeparateConnection),
        ("Forbidden", 403, .doNotRetry),
        ("BadPath", 404, .fixRequest), ("MethodNotAllowed", 405, .fixRequest),
        ("Unregistered", 410, .invalidateToken), ("ExpiredToken", 410, .invalidateToken),
        ("PayloadTooLarge", 413, .doNotRetry),
        ("TooManyRequests", 429, .retryLater), ("TooManyProviderTokenUpdates", 429, .retryLater),
        ("InternalServerError", 500, .retryLater),
        ("ServiceUnavailable", 503, .retryOnNewConnection), ("Shutdown", 503, .retryOnNewConnection),
    ]

    static func parse(_ status: Int, _ body: String, headers: [(String, String)] = []) -> APNsOutcome {
        APNsOutcome(status: status, headers: headers, body: Array(body.utf8))
    }

    @Test("every documented reason maps to its disposition", arguments: documented.indices)
    func reasonTable(_ index: Int) {
        let (name, status, disposition) = Self.documented[index]
        let reason = APNsReason(rawValue: name)
        #expect(reason.isKnown)
        #expect(reason.disposition(status: status) == disposition)
        let row = APNsReason.table.first { $0.reason == reason }
        #expect(row?.status == status)
        let outcome = Self.parse(status, #"{"reason":"\#(name)"}"#)
        #expect(outcome == .rejected(status: status, reason: reason, timestamp: nil))
        #expect(outcome.disposition == disposition)
    }

    @Test("the table has exactly the documented reasons, once each")
    func tableComplete() {
        #expect(APNsReason.table.count == Self.documented.count)
        #expect(Set(APNsReason.allKnown.map(\.rawValue)) == Set(Self.documented.map(\.0)))
        #expect(Set(APNsReason.allKnown).count == APNsReason.allKnown.count)
    }

    @Test("unknown reasons keep their text and are classified by status", arguments: [
        (500, Disposition.retryLater), (502, .retryLater), (503, .retryLater), (429, .retryLater),
        (400, .fixRequest), (403, .fixRequest), (410, .fixRequest), (418, .fixRequest), (302, .doNotRetry), (0, .doNotRetry),
    ])
    func unknownReason(status: Int, disposition: Disposition) {
        let outcome = Self.parse(status, #"{"reason":"BrandNewReason"}"#)
        guard case .rejected(_, let reason, _) = outcome else {
            Issue.record("expected a rejection")
            return
        }
        #expect(reason.rawValue == "BrandNewReason")
        #expect(reason.description == "BrandNewReason")
        #expect(!reason.isKnown)
        #expect(outcome.disposition == disposition)
    }

    @Test("a known reason keeps its disposition whatever the status")
    func knownReasonOddStatus() {
        #expect(Self.parse(500, #"{"reason":"BadDeviceToken"}"#).disposition == .invalidateToken)
    }

    @Test("200: accepted with apns-id and, from the sandbox, apns-unique-id")
    func accepted() {
        let outcome = Self.parse(200, "", headers: [
            ("APNS-ID", "6F1B1D2C-3A4B-4C5D-8E6F-7A8B9C0D1E2F"), ("apns-unique-id", "a8f4c5e2-0000-1111-2222-333344445555"),
        ])
        #expect(outcome == .accepted(apnsID: "6f1b1d2c-3a4b-4c5d-8e6f-7a8b9c0d1e2f", uniqueID: "a8f4c5e2-0000-1111-2222-333344445555"))
        #expect(outcome.isAccepted)
        #expect(outcome.disposition == nil)
        // A 200 without the header falls back to the request's id.
        #expect(APNsOutcome(status: 200, headers: [], body: [], requestAPNsID: "abc") == .accepted(apnsID: "abc", uniqueID: nil))
    }

    @Test("410: the timestamp is milliseconds since the epoch")
    func unregisteredTimestamp() {
        let outcome = Self.parse(410, #"{"reason":"Unregistered","timestamp":1712345678901}"#)
        #expect(outcome == .rejected(
            status: 410, reason: .unregistered, timestamp: Date(timeIntervalSince1970: 1_712_345_678.901)))
        guard case .rejected(_, _, let timestamp?) = outcome else {
            Issue.record("expected a timestamp")
            return
        }
        #expect(Int64((timestamp.timeIntervalSince1970 * 1000).rounded()) == 1_712_345_678_901)
        #expect(Self.parse(410, #"{"reason":"ExpiredToken","timestamp":"1712345678901"}"#)
            == .rejected(status: 410, reason: .expiredToken, timestamp: Date(timeIntervalSince1970: 1_712_345_678.901)))
    }

    @Test("implausible timestamps are dropped, the rejection kept", arguments: [
        #"{"reason":"Unregistered","timestamp":-1}"#, #"{"reason":"Unregistered","timestamp":1e300}"#,
        #"{"reason":"Unregistered","timestamp":"soon"}"#, #"{"reason":"Unregistered","timestamp":[1]}"#,
        #"{"reason":"Unregistered","timestamp":null}"#,
    ])
    func badTimestamp(_ body: String) {
        #expect(Self.parse(410, body) == .rejected(status: 410, reason: .unregistered, timestamp: nil))
    }

    @Test("garbage bodies never crash: the reason is unspecified and the status decides", arguments: [
        APNsGarbage("empty", ""), APNsGarbage("text", "not json"), APNsGarbage("array", "[1,2,3]"),
        APNsGarbage("string", "\"BadTopic\""), APNsGarbage("numeric reason", #"{"reason":5}"#),
        APNsGarbage("null reason", #"{"reason":null}"#), APNsGarbage("capitalised key", #"{"Reason":"BadTopic"}"#),
        APNsGarbage("cut short", "{\"reason\":\"BadTopic\""),
        APNsGarbage("1,000 nested objects", String(repeating: "{\"a\":", count: 1_000)),
        APNsGarbage("100,000 nested arrays", String(repeating: "[", count: 100_000)),
        APNsGarbage("1 MB of x", String(repeating: "x", count: 1_000_000)),
        APNsGarbage("1 MB JSON with a reason", #"{"reason":"BadTopic","pad":""# + String(repeating: "x", count: 1_000_000) + #""}"#),
    ])
    func garbageBody(_ garbage: APNsGarbage) {
        let outcome = Self.parse(400, garbage.text)
        #expect(outcome == .rejected(status: 400, reason: .unspecified, timestamp: nil))
        #expect(outcome.disposition == .fixRequest)
        #expect(Self.parse(503, garbage.text).disposition == .retryLater)
    }

    @Test("bodies that are not UTF-8 never crash")
    func binaryBody() {
        let outcome = APNsOutcome(status: 500, headers: [], body: [0x7B, 0x22, 0xFF, 0xFE, 0x00, 0x22, 0x7D])
        #expect(outcome == .rejected(status: 500, reason: .unspecified, timestamp: nil))
        #expect(APNsReason.unspecified.description == "(no reason)")
    }

    @Test("a huge reason text is clipped")
    func longReason() {
        let outcome = Self.parse(400, #"{"reason":"\#(String(repeating: "R", count: 10_000))"}"#)
        guard case .rejected(_, let reason, _) = outcome else {
            Issue.record("expected a rejection")
            return
        }
        #expect(reason.rawValue.count == 128)
    }

    // MARK: transport failures

    @Test("transport failures say whether the request may have been processed", arguments: [
        (APNsTransportFailure.Cause.connectFailed, APNsTransportFailure.Certainty.notProcessed),
        (.refusedStream, .notProcessed), (.goAwayUnprocessed, .notProcessed),
        (.goAwayInFlight, .outcomeUnknown), (.connectionLost, .outcomeUnknown),
        (.streamReset, .outcomeUnknown), (.timedOut, .outcomeUnknown),
        (.credentialsUnavailable, .notProcessed), (.senderClosed, .notProcessed), (.withdrawn, .notProcessed),
    ])
    func certainty(cause: APNsTransportFailure.Cause, certainty: APNsTransportFailure.Certainty) {
        #expect(APNsTransportFailure(cause).certainty == certainty)
    }

    @Test("GOAWAY: streams above last-stream-id were not processed, the rest may have been")
    func goAway() {
        #expect(APNsTransportFailure.goAway(streamID: 9, lastStreamID: 7).certainty == .notProcessed)
        #expect(APNsTransportFailure.goAway(streamID: 7, lastStreamID: 7).certainty == .outcomeUnknown)
        #expect(APNsTransportFailure.goAway(streamID: 5, lastStreamID: 7).certainty == .outcomeUnknown)
        #expect(APNsTransportFailure.goAway(streamID: 1, lastStreamID: 0, detail: "Shutdown").description
            == "goaway_unprocessed (not_processed): Shutdown")
    }
}
