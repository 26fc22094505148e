import Foundation
import PushfanAPNsModel

/// The parts of an HTTP/2 request the simulator judges, as received.
///
/// Header values are kept as text; `duplicateHeader` names the first APNs header (or
/// pseudo-header) that came twice, which APNs answers with DuplicateHeaders.
package struct SimRequest: Sendable, Equatable {
    package var method: String?
    package var path: String?
    package var authorization: String?
    package var topic: String?
    package var pushType: String?
    package var priority: String?
    package var expiration: String?
    package var collapseID: String?
    package var apnsID: String?
    /// `apns-channel-id` and `apns-request-id`: channel management and broadcasts.
    package var channelID: String?
    package var requestID: String?
    package var duplicateHeader: String?
    package var body: [UInt8] = []
    /// Body bytes received beyond what is kept (the body is capped, see `SimRequest.maxBodyBytes`).
    package var bodyOverflow = 0

    /// Bodies are kept up to this size; anything larger is PayloadTooLarge whatever its type.
    package static let maxBodyBytes = 16 * 1024

    package init() {}

    /// The body's size as sent.
    package var bodyBytes: Int { body.count + bodyOverflow }
}

/// A rejection: status, reason, and for 410 the time (ms since the epoch) the token stopped
/// being valid.
package struct SimRejection: Error, Sendable, Equatable, CustomStringConvertible {
    package let status: Int
    package let reason: APNsReason
    package let timestampMillis: Int64?

    package init(_ reason: APNsReason, status: Int? = nil, timestampMillis: Int64? = nil) {
        self.reason = reason
        self.status = status ?? SimRejection.status(of: reason)
        self.timestampMillis = timestampMillis
    }

    /// Apple's status for a documented reason; 400 for anything else.
    package static func status(of reason: APNsReason) -> Int {
        statuses[reason] ?? 400
    }

    private static let statuses: [APNsReason: Int] =
        Dictionary(APNsReason.table.map { ($0.reason, $0.status) }, uniquingKeysWith: { first, _ in first })

    /// The JSON body APNs sends: `{"reason":"…"}`, with `"timestamp"` for 410.
    package var body: [UInt8] {
        var text = "{\"reason\":\"" + reason.rawValue + "\""
        if let timestampMillis { text += ",\"timestamp\":" + String(timestampMillis) }
        text += "}"
        return Array(text.utf8)
    }

    package var description: String { "\(status) \(reason.rawValue)" }
}

/// A request that passed the header and payload rules (credentials and device rules come after).
package struct CheckedRequest: Sendable, Equatable {
    package let token: String
    /// `apns-topic` as sent.
    package let topic: String
    /// The topic without its push type's suffix: the app's bundle id, what keys allow.
    package let bundleID: String
    package let pushType: APNsPushType
    package let priority: Int
    package let collapseID: String?
    /// `apns-id` as sent, lowercased; nil when the client sent none (the simulator makes one).
    package let apnsID: String?
}

/// APNs' request rules, pure: method and path, headers, payload. The order of the checks is
/// the order of this list, and decides which reason a request with several faults gets:
///
/// 1. method POST, else 405 MethodNotAllowed;
/// 2. path `/3/device/<token>`, else 404 BadPath; an empty token is 400 MissingDeviceToken,
///    one that is not even-length hex of 16 to 200 bytes 400 BadDeviceToken;
/// 3. no header twice, else 400 DuplicateHeaders;
/// 4. (credentials: `ProviderAuthority`, between this step and the next)
/// 5. `apns-topic` present (400 MissingTopic) and printable ASCII (400 BadTopic);
/// 6. `apns-push-type` one of Apple's (400 InvalidPushType; absent means alert), and the
///    topic carries that type's suffix (`.voip`, `.push-type.liveactivity`, ...), else 400
///    InvalidPushType;
/// 7. `apns-priority` 10, 5 or 1, and 5 for background (400 BadPriority);
/// 8. `apns-expiration` whole seconds ≥ 0 (400 BadExpirationDate);
/// 9. `apns-collapse-id` at most 64 bytes (400 BadCollapseId);
/// 10. `apns-id` a UUID (400 BadMessageId);
/// 11. payload: not empty (400 PayloadEmpty), within 4,096 bytes (5,120 for voip; else 413
///     PayloadTooLarge), a JSON object with an `aps` object (for mdm: a string `mdm`
///     instead). Apple documents no reason for malformed JSON; the simulator answers 400
///     `BadPayload`, which senders treat as "fix the request" like any unknown 4xx.
package enum RequestRules {
    package static let devicePathPrefix = "/3/device/"

    /// The reason the simulator gives for a body that is not a JSON object with `aps`.
    package static let badPayload = APNsReason(rawValue: "BadPayload")

    /// Steps 1–3: what must hold before credentials are looked at. Returns the token.
    package static func checkTarget(_ request: SimRequest) -> Result<String, SimRejection> {
        guard request.method == "POST" else { return .failure(SimRejection(.methodNotAllowed)) }
        guard var path = request.path else { return .failure(SimRejection(.badPath)) }
        // Native strings are contiguous UTF-8; this makes them so (a no-op for header values).
        path.makeContiguousUTF8()
        let result: Result<String, SimRejection> = path.utf8.withContiguousStorageIfAvailable { bytes in
            let prefixCount = devicePathPrefix.utf8.count
            guard bytes.count >= prefixCount, bytes.prefix(prefixCount).elementsEqual(devicePathPrefix.utf8) else {
                return .failure(SimRejection(.badPath))
            }
            let raw = UnsafeBufferPointer(rebasing: bytes[prefixCount...])
            if raw.isEmpty { return .failure(SimRejection(.missingDeviceToken)) }
            guard let token = lowercaseHexToken(raw) else {
                let isPath = raw.contains(UInt8(ascii: "/")) || raw.contains(UInt8(ascii: "?"))
                return .failure(SimRejection(isPath ? .badPath : .badDeviceToken))
            }
            return .success(token)
        } ?? .failure(SimRejection(.badPath))
        if case .success = result, request.duplicateHeader != nil { return .failure(SimRejection(.duplicateHeaders)) }
        return result
    }

    /// Steps 5–11, after credentials.
    package static func checkHeadersAndPayload(_ request: SimRequest, token: String) -> Result<CheckedRequest, SimRejection> {
        guard let topic = request.topic, !topic.isEmpty else { return .failure(SimRejection(.missingTopic)) }
        for byte in topic.utf8 where byte < 0x21 || byte > 0x7E { return .failure(SimRejection(.badTopic)) }

        let pushType: APNsPushType
        if let text = request.pushType {
            guard let known = APNsPushType(rawValue: text) else { return .failure(SimRejection(.invalidPushType)) }
            pushType = known
        } else {
            pushType = .alert
        }
        let bundleID: String
        let suffix = pushType.topicSuffix
        if suffix.isEmpty {
            // A topic with another type's suffix is sent to the wrong push type.
            if Self.suffixedTypes.contains(where: { Self.endsWith(topic, $0) }) { return .failure(SimRejection(.invalidPushType)) }
            bundleID = topic
        } else {
            guard Self.endsWith(topic, suffix), topic.utf8.count > suffix.utf8.count else {
                return .failure(SimRejection(.invalidPushType))
            }
            bundleID = String(decoding: topic.utf8.dropLast(suffix.utf8.count), as: UTF8.self)
        }

        // The push type's priority rules are the APNs model's, as the sender applies them.
        let priority: Int
        switch request.priority {
        case nil: priority = pushType.defaultPriority
        case "10": priority = 10
        case "5": priority = 5
        case "1": priority = 1
        default: return .failure(SimRejection(.badPriority))
        }
        if let required = pushType.requiredPriority, priority != required { return .failure(SimRejection(.badPriority)) }

        if let expiration = request.expiration {
            guard !expiration.isEmpty, expiration.utf8.count <= 12, expiration.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                return .failure(SimRejection(.badExpirationDate))
            }
        }
        if let collapseID = request.collapseID, collapseID.utf8.count > APNsNotification.maxCollapseIDBytes {
            return .failure(SimRejection(.badCollapseId))
        }
        var apnsID: String?
        if let text = request.apnsID {
            guard isUUID(text) else { return .failure(SimRejection(.badMessageId)) }
            apnsID = text.lowercased()
        }

        if request.bodyBytes == 0 { return .failure(SimRejection(.payloadEmpty)) }
        if request.bodyBytes > pushType.maxPayloadBytes { return .failure(SimRejection(.payloadTooLarge)) }
        let required = pushType == .mdm ? PayloadCheck.Requirement.mdmString : .apsObject
        guard PayloadCheck.isAcceptable(request.body, requiring: required) else { return .failure(SimRejection(badPayload)) }

        return .success(CheckedRequest(
            token: token, topic: topic, bundleID: bundleID, pushType: pushType, priority: priority,
            collapseID: request.collapseID, apnsID: apnsID))
    }

    private static let suffixedTypes: [String] = APNsPushType.allCases.map(\.topicSuffix).filter { !$0.isEmpty }

    /// Byte-wise suffix test (String.hasSuffix compares characters, which is slower and not
    /// what a header needs).
    private static func endsWith(_ text: String, _ suffix: String) -> Bool {
        let count = suffix.utf8.count
        guard text.utf8.count >= count else { return false }
        return text.utf8.suffix(count).elementsEqual(suffix.utf8)
    }

    /// Even-length hex of `DeviceToken`'s byte range, lowercased; nil otherwise.
    package static func lowercaseHexToken(_ raw: [UInt8]) -> String? {
        raw.withUnsafeBufferPointer { lowercaseHexToken($0) }
    }

    package static func lowercaseHexToken(_ raw: UnsafeBufferPointer<UInt8>) -> String? {
        let count = raw.count
        guard count.isMultiple(of: 2), (2 * DeviceToken.minBytes)...(2 * DeviceToken.maxBytes) ~= count else { return nil }
        var needsLowering = false
        for byte in raw {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): continue
            case UInt8(ascii: "A")...UInt8(ascii: "F"): needsLowering = true
            default: return nil
            }
        }
        if needsLowering { return String(decoding: raw.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "F") ? $0 + 32 : $0 }, as: UTF8.self) }
        return String(decoding: raw, as: UTF8.self)
    }

    /// 8-4-4-4-12 hex digits.
    package static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
            } else if !((0x30...0x39).contains(byte) || (0x61...0x66).contains(byte) || (0x41...0x46).contains(byte)) {
                return false
            }
        }
        return true
    }
}
