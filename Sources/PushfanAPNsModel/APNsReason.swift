/// The `reason` of an APNs rejection.
///
/// Extensible: any text APNs sends is kept as is, so a reason Apple adds later
/// is still logged and stored verbatim. The known ones are static members, and
/// each maps to a `Disposition` through one table (`APNsReason.table`). An
/// unknown reason is classified by status: 5xx and 429 retry later, other 4xx
/// are treated as a request to fix (never resent, token kept).
package struct APNsReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: String

    package init(rawValue: String) { self.rawValue = rawValue }

    package var description: String { rawValue.isEmpty ? "(no reason)" : rawValue }

    /// The response had no readable reason (empty or garbled body).
    package static let unspecified = APNsReason(rawValue: "")

    // 400
    package static let badCollapseId = APNsReason(rawValue: "BadCollapseId")
    package static let badDeviceToken = APNsReason(rawValue: "BadDeviceToken")
    package static let badExpirationDate = APNsReason(rawValue: "BadExpirationDate")
    package static let badMessageId = APNsReason(rawValue: "BadMessageId")
    package static let badPriority = APNsReason(rawValue: "BadPriority")
    package static let badTopic = APNsReason(rawValue: "BadTopic")
    package static let deviceTokenNotForTopic = APNsReason(rawValue: "DeviceTokenNotForTopic")
    package static let duplicateHeaders = APNsReason(rawValue: "DuplicateHeaders")
    package static let idleTimeout = APNsReason(rawValue: "IdleTimeout")
    package static let invalidPushType = APNsReason(rawValue: "InvalidPushType")
    package static let missingDeviceToken = APNsReason(rawValue: "MissingDeviceToken")
    package static let missingPushType = APNsReason(rawValue: "MissingPushType")
    package static let missingTopic = APNsReason(rawValue: "MissingTopic")
    package static let payloadEmpty = APNsReason(rawValue: "PayloadEmpty")
    package static let topicDisallowed = APNsReason(rawValue: "TopicDisallowed")
    // 400, broadcast channels (iOS 18)
    package static let badChannelId = APNsReason(rawValue: "BadChannelId")
    package static let channelNotRegistered = APNsReason(rawValue: "ChannelNotRegistered")
    package static let missingChannelId = APNsReason(rawValue: "MissingChannelId")
    package static let cannotCreateChannelConfig = APNsReason(rawValue: "CannotCreateChannelConfig")
    package static let featureNotEnabled = APNsReason(rawValue: "FeatureNotEnabled")
    package static let badRequestParams = APNsReason(rawValue: "BadRequestParams")
    package static let badRequestPayload = APNsReason(rawValue: "BadRequestPayload")
    // 403
    package static let badCertificate = APNsReason(rawValue: "BadCertificate")
    package static let badCertificateEnvironment = APNsReason(rawValue: "BadCertificateEnvironment")
    package static let expiredProviderToken = APNsReason(rawValue: "ExpiredProviderToken")
    package static let forbidden = APNsReason(rawValue: "Forbidden")
    package static let invalidProviderToken = APNsReason(rawValue: "InvalidProviderToken")
    package static let missingProviderToken = APNsReason(rawValue: "MissingProviderToken")
    package static let unrelatedKeyIdInToken = APNsReason(rawValue: "UnrelatedKeyIdInToken")
    package static let badEnvironmentKeyIdInToken = APNsReason(rawValue: "BadEnvironmentKeyIdInToken")
    package static let badEnvironmentKeyInToken = APNsReason(rawValue: "BadEnvironmentKeyInToken")
    // 404, 405, 410, 413
    package static let badPath = APNsReason(rawValue: "BadPath")
    package static let methodNotAllowed = APNsReason(rawValue: "MethodNotAllowed")
    package static let expiredToken = APNsReason(rawValue: "ExpiredToken")
    package static let unregistered = APNsReason(rawValue: "Unregistered")
    package static let payloadTooLarge = APNsReason(rawValue: "PayloadTooLarge")
    // 429
    package static let tooManyProviderTokenUpdates = APNsReason(rawValue: "TooManyProviderTokenUpdates")
    package static let tooManyRequests = APNsReason(rawValue: "TooManyRequests")
    // 500, 503
    package static let internalServerError = APNsReason(rawValue: "InternalServerError")
    package static let serviceUnavailable = APNsReason(rawValue: "ServiceUnavailable")
    package static let shutdown = APNsReason(rawValue: "Shutdown")

    /// What a sender does about a rejection.
    package enum Disposition: String, Sendable, Hashable, CaseIterable {
        /// The token is malformed, for another topic or environment, or no
        /// longer active: mark it (for 410, unless the device registered again
        /// after the response's timestamp) and never send to it again as is.
        case invalidateToken = "invalidate_token"
        /// The request is wrong; resending it unchanged fails the same way.
        case fixRequest = "fix_request"
        /// The app's credentials are wrong: stop this app's sends and alert an
        /// operator. Not the device's fault, so no device is marked.
        case credentialsProblem = "credentials_problem"
        /// Transient: resend after a delay (with backoff; for TooManyRequests
        /// the delay is per device token).
        case retryLater = "retry_later"
        /// Transient and tied to the connection: resend on another connection
        /// after a delay (IdleTimeout, ServiceUnavailable, Shutdown).
        case retryOnNewConnection = "retry_on_new_connection"
        /// The provider token is too old: refresh it, reconnect, resend.
        case refreshProviderTokenAndRetry = "refresh_provider_token_and_retry"
        /// The connection carries another key's tokens: resend on a connection
        /// of its own for this key.
        case useSeparateConnection = "use_separate_connection"
        /// Refused for good; do not resend.
        case doNotRetry = "do_not_retry"

        /// Whether resending (possibly after a fix to the connection or the
        /// provider token, never to the request) can succeed.
        package var isRetriable: Bool {
            switch self {
            case .retryLater, .retryOnNewConnection, .refreshProviderTokenAndRetry, .useSeparateConnection: return true
            case .invalidateToken, .fixRequest, .credentialsProblem, .doNotRetry: return false
            }
        }
    }

    /// Every documented reason, with the status APNs sends it with and what to
    /// do. The single source of truth for classification (and docs/apns.md).
    package static let table: [(reason: APNsReason, status: Int, disposition: Disposition)] = [
        (.badCollapseId, 400, .fixRequest),
        (.badDeviceToken, 400, .invalidateToken),
        (.badExpirationDate, 400, .fixRequest),
        (.badMessageId, 400, .fixRequest),
        (.badPriority, 400, .fixRequest),
        (.badTopic, 400, .fixRequest),
        (.deviceTokenNotForTopic, 400, .invalidateToken),
        (.duplicateHeaders, 400, .fixRequest),
        (.idleTimeout, 400, .retryOnNewConnection),
        (.invalidPushType, 400, .fixRequest),
        (.missingDeviceToken, 400, .fixRequest),
        (.missingPushType, 400, .fixRequest),
        (.missingTopic, 400, .fixRequest),
        (.payloadEmpty, 400, .fixRequest),
        (.topicDisallowed, 400, .fixRequest),
        (.badChannelId, 400, .fixRequest),
        (.channelNotRegistered, 400, .fixRequest),
        (.missingChannelId, 400, .fixRequest),
        (.cannotCreateChannelConfig, 400, .fixRequest),
        (.featureNotEnabled, 400, .fixRequest),
        (.badRequestParams, 400, .fixRequest),
        (.badRequestPayload, 400, .fixRequest),
        (.badCertificate, 403, .credentialsProblem),
        (.badCertificateEnvironment, 403, .credentialsProblem),
        (.expiredProviderToken, 403, .refreshProviderTokenAndRetry),
        (.forbidden, 403, .doNotRetry),
        (.invalidProviderToken, 403, .credentialsProblem),
        (.missingProviderToken, 403, .credentialsProblem),
        (.unrelatedKeyIdInToken, 403, .useSeparateConnection),
        (.badEnvironmentKeyIdInToken, 403, .credentialsProblem),
        (.badEnvironmentKeyInToken, 403, .credentialsProblem),
        (.badPath, 404, .fixRequest),
        (.methodNotAllowed, 405, .fixRequest),
        (.expiredToken, 410, .invalidateToken),
        (.unregistered, 410, .invalidateToken),
        (.payloadTooLarge, 413, .doNotRetry),
        (.tooManyProviderTokenUpdates, 429, .retryLater),
        (.tooManyRequests, 429, .retryLater),
        (.internalServerError, 500, .retryLater),
        (.serviceUnavailable, 503, .retryOnNewConnection),
        (.shutdown, 503, .retryOnNewConnection),
    ]

    private static let dispositions: [APNsReason: Disposition] =
        Dictionary(table.map { ($0.reason, $0.disposition) }, uniquingKeysWith: { first, _ in first })

    /// Every documented reason.
    package static let allKnown: [APNsReason] = table.map(\.reason)

    /// Whether the reason is in Apple's table.
    package var isKnown: Bool { Self.dispositions[self] != nil }

    /// The disposition: from the table for a known reason (whatever the
    /// status), else by status.
    package func disposition(status: Int) -> Disposition {
        if let known = Self.dispositions[self] { return known }
        switch status {
        case 429, 500...599: return .retryLater
        case 400...499: return .fixRequest
        default: return .doNotRetry
        }
    }
}
