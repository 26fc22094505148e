import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSchedule
import PushfanSupport
import PushfanTemplates

extension APNsEnvironment {
    package init(parsing text: String) throws(StoreError) {
        guard let environment = APNsEnvironment(rawValue: text.lowercased()) else {
            throw StoreError.invalidInput("environment must be production or sandbox, got '\(text)'")
        }
        self = environment
    }
}

/// A new app.
package struct AppRegistration: Sendable {
    package var app: String
    /// Bundle id; the APNs topic base.
    package var topic: String
    package var credentials: APNsCredentialsReference
    package var environment: APNsEnvironment
    /// Sends per second across all workers.
    package var ratePerSecond: Int
    /// The IANA zone of devices that registered none (local-time campaigns); nil: UTC.
    package var timeZone: String?
    /// The notification category of the app's alert campaigns that name none.
    package var defaultCategory: String? = nil
    /// At most so many alert pushes per device and window, across the app's campaigns.
    package var frequencyCaps = FrequencyCaps([])

    package init(
        app: String, topic: String, credentials: APNsCredentialsReference, environment: APNsEnvironment = .production, ratePerSecond: Int = 1000,
        timeZone: String? = nil
    ) {
        self.app = app
        self.topic = topic
        self.credentials = credentials
        self.environment = environment
        self.ratePerSecond = ratePerSecond
        self.timeZone = timeZone
    }
}

/// An app's two secrets, as `apps add` shows them once: the master secret for server calls
/// (campaigns, segments, device lists), the application secret that ships inside the app
/// and may only register and update devices.
package struct AppSecrets: Sendable, Equatable {
    package let master: String
    package let application: String
}

/// Which secret a caller presented.
package enum AppRole: String, Sendable, Equatable {
    case master, application
}

/// An app as stored (without its secret, which exists only as a salted hash).
package struct AppRecord: Sendable, Equatable {
    package let app: String
    package let topic: String
    package let credentials: APNsCredentialsReference
    package let environment: APNsEnvironment
    package let ratePerSecond: Int
    package let createdAt: Int64
    /// Devices without a zone of their own are in this one (nil: UTC).
    package var timeZone: String? = nil
    /// The category of the app's alert campaigns that name none (`aps.category`).
    package var defaultCategory: String? = nil
    /// At most so many alert pushes per device and window, across the app's campaigns.
    package var frequencyCaps = FrequencyCaps([])

    /// `timeZone` as a zone; UTC when the app has none.
    package var defaultZone: TimeZone { timeZone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(secondsFromGMT: 0)! }
}

/// What a client SDK registers: the device id (stable per install), its token and traits.
package struct DeviceRegistration: Sendable, Equatable {
    package var deviceID: String
    package var token: String
    package var environment: APNsEnvironment = .production
    package var locale: String?
    package var timezone: String?
    package var appVersion: String?
    package var osVersion: String?
    package var tags: [String] = []
    package var attributes: [String: JSONValue] = [:]
    /// Do-not-disturb, in the device's local time: alert pushes wait until it ends.
    package var quietHours: QuietHours?
    /// When the device was seen (ms since the epoch); registration time by default.
    package var seenAt: Int64?
    /// Its tokens of other kinds (VoIP, Live Activity…), written with it: each replaces the
    /// device's token of its kind and scope; tokens not named are left as they are.
    package var tokens: [KindToken] = []

    package init(deviceID: String, token: String) {
        self.deviceID = deviceID
        self.token = token
    }
}

extension DeviceRegistration {
    /// The registration that writes `record` back as it is (to change one trait of it): its
    /// last sighting too, since an edit is not the device being seen (APNs' 410 compares with it).
    package init(_ record: DeviceRecord) {
        self.init(deviceID: record.deviceID, token: record.token)
        seenAt = record.lastSeenAt
        environment = record.environment
        locale = record.locale
        timezone = record.timezone
        appVersion = record.appVersion
        osVersion = record.osVersion
        tags = record.tags
        attributes = record.attributes
        quietHours = record.quietHours
    }
}

/// Lifecycle of a device row.
package enum DeviceStatus: String, Sendable {
    case active
    /// APNs said the token is no longer valid (410, BadDeviceToken, DeviceTokenNotForTopic).
    case invalid
    /// The app unregistered the device.
    case unregistered

    /// Whether a push to tokens of `kind` reaches a device in this status: an alert push an
    /// active one only; another kind an invalid one too, since APNs refusing the alert token
    /// says nothing of the device's VoIP or Live Activity token (`AudienceReader` says the
    /// same in SQL).
    package func isReached(by kind: APNsTokenKind) -> Bool {
        self == .active || (self == .invalid && kind != .alert)
    }
}

/// A device as stored.
package struct DeviceRecord: Sendable, Equatable {
    package let rowKey: Int64
    package let deviceID: String
    package let token: String
    package let environment: APNsEnvironment
    package let locale: String?
    package let timezone: String?
    package let appVersion: String?
    package let osVersion: String?
    /// Filled by the store after the row itself.
    package internal(set) var tags: [String]
    package let attributes: [String: JSONValue]
    package let createdAt: Int64
    package let lastSeenAt: Int64
    package let status: DeviceStatus
    package let invalidReason: String?
    package let invalidAt: Int64?
    package var quietHours: QuietHours? = nil
}

/// What expansion yields per device: enough to render and send.
package struct DeviceTarget: Sendable, Equatable {
    package let rowKey: Int64
    package let deviceID: String
    /// The device's token of `tokenKind` ("" when it has none): its alert token, unless the
    /// page was read for another kind (`AudienceReader.page(tokens:)`). `token(for:)` is
    /// what a push is addressed to.
    package let token: String
    /// The environment of that token.
    package let environment: APNsEnvironment
    package let locale: String?
    /// Its IANA zone (nil: the app's default) and do-not-disturb window, for quiet hours.
    package var timezone: String? = nil
    package var quietHours: QuietHours? = nil
    /// What personalised texts read beyond the above; read only for such campaigns.
    package var traits: DeviceTraits? = nil
    /// Which kind of token `token` is.
    package var tokenKind: APNsTokenKind = .alert

    package init(
        rowKey: Int64, deviceID: String, token: String, environment: APNsEnvironment, locale: String?, timezone: String? = nil,
        quietHours: QuietHours? = nil, traits: DeviceTraits? = nil, tokenKind: APNsTokenKind = .alert
    ) {
        (self.rowKey, self.deviceID, self.token, self.environment, self.locale) = (rowKey, deviceID, token, environment, locale)
        (self.timezone, self.quietHours, self.traits, self.tokenKind) = (timezone, quietHours, traits, tokenKind)
    }
}

/// A device's versions and attributes, for the placeholders of personalised texts.
package struct DeviceTraits: Sendable, Equatable {
    package var appVersion: String?
    package var osVersion: String?
    package var attributes: [String: JSONValue]

    package init(appVersion: String? = nil, osVersion: String? = nil, attributes: [String: JSONValue] = [:]) {
        (self.appVersion, self.osVersion, self.attributes) = (appVersion, osVersion, attributes)
    }
}

extension DeviceTarget {
    /// The token a push of `kind` goes to, nil when the device has none of that kind: a push
    /// is never sent to another kind's token (APNs would answer `DeviceTokenNotForTopic`, and
    /// that token would be invalidated for it).
    package func token(for kind: APNsTokenKind) -> String? {
        kind == tokenKind && !token.isEmpty ? token : nil
    }

    /// What this device's placeholders read.
    package var templateDevice: TemplateDevice {
        TemplateDevice(
            id: deviceID, locale: locale, timezone: timezone, appVersion: traits?.appVersion, osVersion: traits?.osVersion,
            attributes: traits?.attributes ?? [:])
    }
}

/// A contiguous range of row keys, `(after, through]`; nil bounds are open.
package struct ShardRange: Sendable, Equatable {
    package let after: Int64?
    package let through: Int64?

    package init(after: Int64?, through: Int64?) {
        self.after = after
        self.through = through
    }
}

/// Result of a registration.
package struct RegistrationResult: Sendable, Equatable {
    package let rowKey: Int64
    /// True when the row was new.
    package let created: Bool
    /// Device ids that lost this token to the registering device.
    package let tokenMovedFrom: [String]
}

/// A final (or pending) delivery state in the ledger.
package enum LedgerState: String, Sendable, CaseIterable {
    case claimed
    case delivered, rejected, invalidToken = "invalid_token", expired, cancelled, skipped, failed

    package var isFinal: Bool { self != .claimed }
}

/// The outcome to record for one claimed device.
package struct LedgerOutcome: Sendable, Equatable {
    package let rowKey: Int64
    package let state: LedgerState
    package let attempts: Int
    package let apnsID: String?
    package let status: Int?
    package let reason: String?
    /// The A/B variant (or `holdout`) the device was given, for the per-variant totals.
    package var variant: String? = nil

    package init(rowKey: Int64, state: LedgerState, attempts: Int = 1, apnsID: String? = nil, status: Int? = nil, reason: String? = nil) {
        self.rowKey = rowKey
        self.state = state
        self.attempts = attempts
        self.apnsID = apnsID
        self.status = status
        self.reason = reason
    }
}

/// A ledger row.
package struct LedgerEntry: Sendable, Equatable {
    package let rowKey: Int64
    package let deviceID: String
    package let state: LedgerState
    package let attempts: Int
    package let apnsID: String?
    package let status: Int?
    package let reason: String?
}

/// A token APNs refused for good, to mark in the store (token hygiene).
package struct TokenMark: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        /// 410 Unregistered or ExpiredToken at APNs' timestamp (ms): the device is
        /// invalidated only if it did not register again after that moment.
        case unregistered(at: Int64)
        /// BadDeviceToken, DeviceTokenNotForTopic: invalid in that environment, now.
        case invalid
    }

    package let environment: APNsEnvironment
    package let token: String
    package let kind: Kind
    /// APNs' reason, kept as the device's invalidation reason.
    package let reason: String
    /// Which of the device's tokens was sent: an alert token's verdict is the device row's,
    /// any other kind's only that token's (`DeviceTokens`).
    package let tokenKind: APNsTokenKind

    package init(environment: APNsEnvironment, token: String, kind: Kind, reason: String, tokenKind: APNsTokenKind = .alert) {
        self.environment = environment
        self.token = token
        self.kind = kind
        self.reason = reason
        self.tokenKind = tokenKind
    }

    /// APNs said the token is no longer active (410), rather than never valid for the topic.
    package var isUnregistered: Bool {
        if case .unregistered = kind { true } else { false }
    }
}

/// One campaign's token rejection of a device that is invalid now (`DeviceDirectory.tokenInvalidations`).
package struct TokenInvalidation: Sendable, Equatable {
    package let deviceID: String
    package let campaign: String
    /// The campaign's record as accepted, to tell its push type.
    package let definition: String?
    /// APNs' reason in the ledger.
    package let ledgerReason: String?

    package init(deviceID: String, campaign: String, definition: String?, ledgerReason: String?) {
        (self.deviceID, self.campaign, self.definition, self.ledgerReason) = (deviceID, campaign, definition, ledgerReason)
    }
}
