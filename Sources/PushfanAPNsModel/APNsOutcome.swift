import Foundation
import PushfanSupport

/// What APNs answered to one request. A rejection is a result, not an error:
/// it is stored, counted and acted on (`disposition`).
package enum APNsOutcome: Sendable, Hashable {
    /// HTTP 200: APNs accepted the notification. Acceptance, not delivery.
    /// `uniqueID` is `apns-unique-id`, sent by the sandbox only (it lets one
    /// look the notification up in Apple's delivery log).
    case accepted(apnsID: String, uniqueID: String?)
    /// Any other status. `timestamp` comes with 410: when APNs last knew the
    /// token to be invalid (the token stays valid if the device registered it
    /// again after that).
    case rejected(status: Int, reason: APNsReason, timestamp: Date?)

    /// Largest body worth parsing; APNs sends a few dozen bytes.
    private static let maxBodyBytes = 16 * 1024
    /// Longest reason text kept, in characters.
    private static let maxReasonLength = 128

    /// Reads a response. Never traps: a missing, empty, non-JSON or oddly
    /// shaped body gives a rejection with `APNsReason.unspecified` (classified
    /// by status), a timestamp that is not a plausible millisecond count is
    /// dropped, and header names are matched case-insensitively.
    ///
    /// - Parameter requestAPNsID: the `apns-id` the request carried, used when a
    ///   200 lacks the header.
    package init(
        status: Int, headers: some Sequence<(String, String)>, body: some Collection<UInt8>,
        requestAPNsID: String? = nil
    ) {
        var apnsID: String?
        var uniqueID: String?
        for (name, value) in headers {
            switch name.lowercased() {
            case "apns-id": apnsID = value
            case "apns-unique-id": uniqueID = value
            default: break
            }
        }
        if status == 200 {
            self = .accepted(apnsID: (apnsID ?? requestAPNsID ?? "").lowercased(), uniqueID: uniqueID)
            return
        }
        var reason = APNsReason.unspecified
        var timestamp: Date?
        if !body.isEmpty, body.count <= Self.maxBodyBytes,
           let value = try? JSONDecoder().decode(JSONValue.self, from: Data(body)),
           case .object(let members) = value
        {
            if let text = members["reason"]?.stringValue {
                reason = APNsReason(rawValue: String(text.prefix(Self.maxReasonLength)))
            }
            timestamp = members["timestamp"].flatMap(Self.millisecondsDate)
        }
        self = .rejected(status: status, reason: reason, timestamp: timestamp)
    }

    /// A 410 timestamp: milliseconds since the epoch as a JSON number (or, to
    /// be lenient, a string of digits). Nil if negative, fractional beyond
    /// reason or later than the year 5000.
    private static func millisecondsDate(_ value: JSONValue) -> Date? {
        let milliseconds: Double
        switch value {
        case .int(let number): milliseconds = Double(number)
        case .number(let number): milliseconds = number
        case .string(let text):
            guard let number = Int64(text) else { return nil }
            milliseconds = Double(number)
        default: return nil
        }
        guard milliseconds.isFinite, milliseconds >= 0, milliseconds < 95_617_584_000_000 else { return nil }
        return Date(timeIntervalSince1970: milliseconds / 1000)
    }

    package var isAccepted: Bool {
        if case .accepted = self { return true }
        return false
    }

    /// What to do about it; nil when accepted.
    package var disposition: APNsReason.Disposition? {
        switch self {
        case .accepted: return nil
        case .rejected(let status, let reason, _): return reason.disposition(status: status)
        }
    }
}

/// Why a request got no APNs answer, and whether it may have been processed.
///
/// The distinction decides whether a resend can duplicate a notification:
/// `notProcessed` failures are certainly safe to resend on another connection;
/// after an `outcomeUnknown` one APNs may already have accepted it.
package struct APNsTransportFailure: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Cause: String, Sendable, Hashable, CaseIterable {
        /// No connection (DNS, TCP, TLS): nothing was sent.
        case connectFailed = "connect_failed"
        /// The server reset the stream with REFUSED_STREAM: not processed.
        case refusedStream = "refused_stream"
        /// GOAWAY named a last-stream-id below this stream: not processed.
        case goAwayUnprocessed = "goaway_unprocessed"
        /// GOAWAY named a last-stream-id at or above this stream, and the
        /// connection closed before the response.
        case goAwayInFlight = "goaway_in_flight"
        /// The connection dropped (reset, TLS error, EOF) mid-flight.
        case connectionLost = "connection_lost"
        /// The stream was reset with an error other than REFUSED_STREAM.
        case streamReset = "stream_reset"
        /// No response in time after the request was written.
        case timedOut = "timed_out"
        /// No provider token could be signed (or the certificate could not be
        /// used) for this request: nothing was sent.
        case credentialsUnavailable = "credentials_unavailable"
        /// The sender was shut down before the request was written.
        case senderClosed = "sender_closed"
        /// The caller withdrew it before it was written (an operator paused or cancelled
        /// its campaign while it waited for a stream): nothing was sent.
        case withdrawn = "withdrawn"
    }

    /// Whether APNs may have processed the request.
    package enum Certainty: String, Sendable, Hashable {
        /// Certainly not processed: resend freely.
        case notProcessed = "not_processed"
        /// Possibly processed: a resend may show the notification twice
        /// (the collapse id hides that on the device).
        case outcomeUnknown = "outcome_unknown"
    }

    package let cause: Cause
    /// The transport's own words (curl's error text, the GOAWAY debug data).
    package let detail: String

    package init(_ cause: Cause, detail: String = "") {
        self.cause = cause
        self.detail = detail
    }

    /// Classifies a stream cut short by GOAWAY: streams above `lastStreamID`
    /// were never processed; the rest may have been.
    package static func goAway(streamID: UInt32, lastStreamID: UInt32, detail: String = "") -> APNsTransportFailure {
        APNsTransportFailure(streamID > lastStreamID ? .goAwayUnprocessed : .goAwayInFlight, detail: detail)
    }

    package var certainty: Certainty {
        switch cause {
        case .connectFailed, .refusedStream, .goAwayUnprocessed, .credentialsUnavailable, .senderClosed, .withdrawn: return .notProcessed
        case .goAwayInFlight, .connectionLost, .streamReset, .timedOut: return .outcomeUnknown
        }
    }

    package var description: String {
        detail.isEmpty ? "\(cause.rawValue) (\(certainty.rawValue))" : "\(cause.rawValue) (\(certainty.rawValue)): \(detail)"
    }
}

/// The result of one attempt: APNs' answer, or none.
package enum APNsSendResult: Sendable, Hashable {
    case response(APNsOutcome)
    case failed(APNsTransportFailure)
}
