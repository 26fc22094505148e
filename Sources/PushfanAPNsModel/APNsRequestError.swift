import Foundation

/// Why an APNs request could not be built: a malformed device token, a header
/// value APNs would refuse, a payload that breaks its push type's rules or is
/// too large, or a provider token that could not be made.
///
/// These are caught before anything reaches the wire, so a notification that
/// fails here was certainly not sent. `code` is a fixed, low-cardinality string
/// that is safe as a metric label; `description` says what is wrong in words
/// meant for whoever wrote the campaign or configured the app.
package struct APNsRequestError: Error, CustomStringConvertible, Equatable, Sendable {
    private enum Code: String {
        /// Not even-length hex of 16 to 200 bytes.
        case invalidDeviceToken = "invalid_device_token"
        /// `apns-channel-id`: not a channel id as APNs makes them.
        case invalidChannel = "invalid_channel"
        /// `apns-topic`: empty, unprintable, or carrying another push type's suffix.
        case invalidTopic = "invalid_topic"
        /// `apns-priority` not allowed for the push type.
        case invalidPriority = "invalid_priority"
        /// `apns-expiration` negative or in milliseconds.
        case invalidExpiration = "invalid_expiration"
        /// `apns-collapse-id` empty, longer than 64 bytes or unprintable.
        case invalidCollapseID = "invalid_collapse_id"
        /// A payload key has the wrong type or value, or custom data tries to
        /// replace `aps`.
        case invalidPayload = "invalid_payload"
        /// The payload breaks a rule of its push type (background, Live
        /// Activity, MDM).
        case pushTypeRule = "push_type_rule"
        /// The serialised payload is larger than the push type allows.
        case payloadTooLarge = "payload_too_large"
        /// Team id or key id is not usable in a provider token.
        case invalidCredential = "invalid_credential"
        /// The injected signer failed or returned something other than r||s.
        case signingFailed = "signing_failed"
    }

    private let kind: Code
    /// What is wrong, for a person.
    package let description: String
    /// Where in the request: a header (`apns-priority`) or a payload path (`aps.badge`,
    /// `mdm`); nil for the payload as a whole and for credentials. A campaign's validation
    /// turns it into the campaign field that holds the value.
    package let field: String?
    /// `description` without the field's name in front, for messages that name the field
    /// their own way.
    package let detail: String

    private init(_ kind: Code, _ description: String, field: String? = nil, detail: String? = nil) {
        self.kind = kind
        self.description = description
        self.field = field
        self.detail = detail ?? description
    }

    /// Machine-readable code, usable as a metric label.
    package var code: String { kind.rawValue }

    /// Building the request again with the same input gives the same error;
    /// only `signing_failed` may be transient (the signer's own failure).
    package var isRetriable: Bool { kind == .signingFailed }

    package static func invalidDeviceToken(_ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidDeviceToken, "device token \(reason)")
    }

    package static func invalidChannel(_ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidChannel, "apns-channel-id \(reason)", field: "apns-channel-id", detail: reason)
    }

    package static func invalidTopic(_ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidTopic, "apns-topic \(reason)", field: "apns-topic", detail: reason)
    }

    package static func invalidPriority(_ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidPriority, "apns-priority \(reason)", field: "apns-priority", detail: reason)
    }

    package static func invalidExpiration(_ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidExpiration, "apns-expiration \(reason)", field: "apns-expiration", detail: reason)
    }

    package static func invalidCollapseID(_ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidCollapseID, "apns-collapse-id \(reason)", field: "apns-collapse-id", detail: reason)
    }

    /// `field` is the JSON path inside the payload (`aps.badge`).
    package static func invalidPayload(_ field: String, _ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidPayload, field.isEmpty ? reason : "\(field): \(reason)", field: field.isEmpty ? nil : field, detail: reason)
    }

    /// `field` is the header or payload key the rule is about.
    package static func pushTypeRule(_ pushType: APNsPushType, _ reason: String, field: String) -> APNsRequestError {
        let article = ["alert", "mdm"].contains(pushType.rawValue) ? "an" : "a"
        return APNsRequestError(.pushTypeRule, "\(article) \(pushType.rawValue) push \(reason)", field: field)
    }

    package static func payloadTooLarge(
        bytes: Int, limit: Int, pushType: APNsPushType
    ) -> APNsRequestError {
        APNsRequestError(
            .payloadTooLarge,
            "payload is \(bytes) bytes, APNs allows at most \(limit) for \(pushType.rawValue) pushes (\(bytes - limit) too many)")
    }

    package static func invalidCredential(_ reason: String) -> APNsRequestError {
        APNsRequestError(.invalidCredential, reason)
    }

    package static func signingFailed(_ reason: String) -> APNsRequestError {
        APNsRequestError(.signingFailed, "provider token signing failed: \(reason)")
    }

    /// Every code this error can carry, for documentation and metric pre-registration.
    package static let allCodes: [String] = [
        "invalid_device_token", "invalid_channel", "invalid_topic", "invalid_priority", "invalid_expiration",
        "invalid_collapse_id", "invalid_payload", "push_type_rule", "payload_too_large",
        "invalid_credential", "signing_failed",
    ]
}

/// Quoting of user-supplied text inside `APNsRequestError` messages: control
/// and non-ASCII characters are escaped so a message is always one printable
/// line, and long text is clipped.
enum APNsQuote {
    static func character(_ character: Character) -> String {
        "'" + character.unicodeScalars.map { $0.escaped(asASCII: true) }.joined() + "'"
    }

    static func text(_ text: String, max: Int = 40) -> String {
        let clipped = text.count > max ? String(text.prefix(max)) + "…" : text
        return "'" + clipped.unicodeScalars.map { $0.escaped(asASCII: false) }.joined() + "'"
    }
}
