import Foundation

/// A campaign: one message for one app's audience. Topic `campaigns`, Kafka key
/// = `id`.
///
/// The id makes a campaign idempotent: a record with an id that was already
/// accepted is the same campaign, not a second one, so producers may resend
/// after a timeout. See docs/messages.md for the JSON form.
package struct Campaign: VersionedMessage, Hashable {
    package static let currentVersion = 1
    /// Most device ids an explicit audience may list; larger audiences belong in
    /// a segment. Also keeps a campaign record well under Kafka's default 1 MB
    /// message limit.
    package static let maxExplicitDevices = 10_000
    /// Longest segment expression, in UTF-8 bytes.
    package static let maxSegmentBytes = 4_096
    /// How far ahead `options.send_at` may be: 30 days, in milliseconds. A campaign parked
    /// longer would outlive most tokens' freshness and most marketing plans.
    package static let maxScheduleAhead: Int64 = 30 * 86_400_000
    /// A conversion that names no campaign counts for the campaigns that reached its device
    /// this long before it, in seconds, unless a campaign sets its own (`options.attribution_window_s`).
    package static let defaultAttributionWindow: Int64 = 86_400
    package static let minAttributionWindow: Int64 = 60
    package static let maxAttributionWindow: Int64 = 30 * 86_400
    /// Longest `apns-collapse-id` APNs accepts, in UTF-8 bytes.
    package static var maxCollapseIDBytes: Int { APNsNotification.maxCollapseIDBytes }
    /// Longest id, app key, saved segment name or device id, in characters.
    package static let maxIdentifierLength = Rules.identifierMaxLength

    /// 1 to 128 characters of `[A-Za-z0-9._:-]`.
    package var id: String
    /// The app key: which app's devices, credentials and rate limit to use.
    /// Same character rules as `id`.
    package var app: String
    package var audience: Audience
    package var notification: Notification
    package var options: Options
    /// A/B variants: each overrides the notification for its share of the devices
    /// (CampaignVariants.swift). Empty: everyone gets `notification`.
    package var variants: [Variant] = []
    /// The holdout's weight beside the variants' (0: none): its devices get nothing and
    /// end `skipped` with reason `holdout`.
    package var holdout: Int = 0
    /// A/B with a winner: the variants to a test group first, the best to the rest
    /// (CampaignWinner.swift).
    package var winner: Winner?
    /// The winner's decision, written into the stored record by the worker that made it; a
    /// submitted campaign has none.
    package var decision: Decision?
    /// When the producer submitted the campaign, in milliseconds since the epoch.
    package var submittedAt: Int64?

    package init(
        id: String,
        app: String,
        audience: Audience,
        notification: Notification = Notification(),
        options: Options = Options(),
        submittedAt: Int64? = nil
    ) {
        self.id = id
        self.app = app
        self.audience = audience
        self.notification = notification
        self.options = options
        self.submittedAt = submittedAt
    }

    /// The campaign's name across the system: its id within its app.
    package var key: CampaignKey { CampaignKey(app: app, id: id) }

    /// The Kafka key of the record: `<app>/<id>`.
    package var kafkaKey: String { key.stored }

    /// The `apns-collapse-id` to send: `options.collapseID`, else the campaign
    /// id. APNs allows 64 bytes; an id longer than that is shortened to its
    /// first 47 characters, `~` and a 16-digit hex FNV-1a hash of the whole id,
    /// so every worker derives the same value and duplicates still collapse.
    package var effectiveCollapseID: String {
        if let collapseID = options.collapseID { return collapseID }
        if id.utf8.count <= Self.maxCollapseIDBytes { return id }
        // ids are ASCII (see `Rules.isIdentifier`), so characters are bytes;
        // after validation the prefix is 47 bytes and the result exactly 64.
        let hex = String(FNV1a.hash(id), radix: 16)
        return id.prefix(47) + "~" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The `apns-priority` to send: `options.priority`, else 5 for background
    /// pushes (APNs refuses 10 for them) and 10 otherwise (APNs' own default).
    package var effectivePriority: Int {
        options.priority ?? (notification.pushType == .background ? 5 : 10)
    }
}

// MARK: - Audience

extension Campaign {
    /// Who receives the campaign. In JSON an object with exactly one of the keys
    /// `segment`, `named` or `devices`.
    package enum Audience: Hashable, Sendable, Codable {
        /// A segment expression evaluated against the app's device table, at
        /// most `Campaign.maxSegmentBytes` bytes.
        case segment(String)
        /// The name of a segment saved beforehand.
        case named(String)
        /// Explicit device ids, 1 to `Campaign.maxExplicitDevices`, no repeats.
        case devices([String])
        /// Every device with an update token for this Live Activity: the id the app registered
        /// it under (Notificare's `activity`, or `activity_id`), e.g. every phone following
        /// match 1234. For `liveactivity` pushes with `event` update or end only.
        case activity(String)
        /// Every device with an update token for a running activity of an attributes type whose
        /// registered attributes match (`ActivityFilter`), e.g. every activity following match
        /// 1234 whatever id each device gave it. Same push types as `activity`.
        case activities(ActivityFilter)
        /// An iOS 18 broadcast channel of the app (created through the API): one request to
        /// APNs reaches every Live Activity subscribed to it. For `liveactivity` pushes with
        /// `event` update or end only.
        case channel(String)

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case segment, named, devices, activity, activities, channel
        }

        /// Planned over the app's devices (a segment, a saved one, or the holders of an
        /// activity's tokens), rather than a list of device ids or a channel.
        package var readsTheAppsDevices: Bool {
            switch self {
            case .devices, .channel: false
            case .segment, .named, .activity, .activities: true
            }
        }

        private static let forms = #""segment", "named", "devices", "activity", "activities" or "channel""#

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            var present: [CodingKeys] = []
            for key in CodingKeys.allCases where container.contains(key) {
                if try !container.decodeNil(forKey: key) { present.append(key) }
            }
            guard present.count == 1, let form = present.first else {
                let reason = present.isEmpty
                    ? "needs exactly one of \(Self.forms), found none"
                    : "needs exactly one of \(Self.forms), found "
                        + present.map { "\"\($0.rawValue)\"" }.joined(separator: " and ")
                throw MessageDecodingError.invalidField(at: decoder.codingPath, reason)
            }
            switch form {
            case .segment: self = .segment(try container.field(.segment))
            case .named: self = .named(try container.field(.named))
            case .devices: self = .devices(try container.field(.devices))
            case .activity: self = .activity(try container.field(.activity))
            case .activities: self = .activities(try container.field(.activities))
            case .channel: self = .channel(try container.field(.channel))
            }
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .segment(let expression): try container.encode(expression, forKey: .segment)
            case .named(let name): try container.encode(name, forKey: .named)
            case .devices(let ids): try container.encode(ids, forKey: .devices)
            case .activity(let id): try container.encode(id, forKey: .activity)
            case .activities(let filter): try container.encode(filter, forKey: .activities)
            case .channel(let id): try container.encode(id, forKey: .channel)
            }
        }
    }
}

// MARK: - Notification

extension Campaign {
    /// What is sent: the APNs push type, localized texts, extra `aps` keys and
    /// custom data placed beside `aps`.
    package struct Notification: Hashable, Sendable, Codable {
        /// Sent as `apns-push-type`; must match the payload. Default `.alert`.
        package var pushType: PushType
        /// Texts per locale; they become `aps.alert.title`, `subtitle` and
        /// `body`. Not allowed for background pushes.
        package var content: Content?
        /// Extra `aps` keys passed through as given (sound, badge, category,
        /// thread-id, mutable-content, interruption-level, ...). The common keys
        /// are type-checked by `validate()`; others pass unchecked.
        package var aps: [String: JSONValue]?
        /// Custom keys placed beside `aps` in the payload, never inside it; the
        /// key `aps` itself is refused so it cannot overwrite the real one.
        package var data: [String: JSONValue]?
        /// The actions of the notification's category (`aps.category`) with the parameters
        /// the app's action handler receives, under `action_params` (CampaignActions.swift).
        package var actions: [Action] = []
        /// The name of one of the app's stored templates (`NotificationTemplate`) laid under
        /// this notification when the campaign is planned.
        package var template: String?

        package init(
            pushType: PushType = .alert,
            content: Content? = nil,
            aps: [String: JSONValue]? = nil,
            data: [String: JSONValue]? = nil
        ) {
            self.pushType = pushType
            self.content = content
            self.aps = aps
            self.data = data
        }

        private enum CodingKeys: String, CodingKey {
            case pushType = "push_type", content, aps, data, actions, template
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            pushType = try container.optionalField(.pushType) ?? .alert
            content = try container.optionalField(.content)
            aps = try container.optionalField(.aps)
            data = try container.optionalField(.data)
            actions = try container.optionalField(.actions) ?? []
            template = try container.optionalField(.template)
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(pushType, forKey: .pushType)
            try container.encodeIfPresent(content, forKey: .content)
            try container.encodeIfPresent(aps, forKey: .aps)
            try container.encodeIfPresent(data, forKey: .data)
            if !actions.isEmpty { try container.encode(actions, forKey: .actions) }
            try container.encodeIfPresent(template, forKey: .template)
        }

        /// The `aps` dictionary for a device locale: `aps` as given, with the
        /// texts for that locale (`Content.text(forLocale:)`) set as
        /// `alert.title`, `subtitle` and `body`. Other keys of an `alert` object
        /// (`loc-key`, `launch-image`...) are kept; a string `alert` is replaced
        /// by the texts. Without texts for the locale, `aps` is returned as given.
        package func aps(forLocale locale: String?) -> [String: JSONValue] {
            var result = aps ?? [:]
            guard let text = content?.text(forLocale: locale) else { return result }
            var alert = result["alert"]?.objectValue ?? [:]
            for (key, value) in [("title", text.title), ("subtitle", text.subtitle), ("body", text.body)] {
                if let value, !value.isEmpty { alert[key] = .string(value) }
            }
            result["alert"] = .object(alert)
            return result
        }

        /// The APNs payload for a device locale: `data`'s keys beside `aps`.
        /// Its encoded size must be checked against `pushType.maxPayloadBytes`,
        /// which depends on the locale's texts.
        package func payload(forLocale locale: String?) -> [String: JSONValue] {
            var payload = custom
            payload["aps"] = .object(aps(forLocale: locale))
            return payload
        }
    }

    /// The `apns-push-type` header values. The header must match the payload and
    /// the topic suffix, or APNs rejects the request (`InvalidPushType`).
    package enum PushType: String, Codable, Sendable, CaseIterable {
        /// Visible notification: alert, sound, badge.
        case alert
        /// Silent wake-up: `content-available: 1`, no alert, sound or badge,
        /// priority 5.
        case background
        /// PushKit VoIP call.
        case voip
        /// watchOS complication update.
        case complication
        /// File provider change signal.
        case fileprovider
        /// MDM check-in request.
        case mdm
        /// Location query (location push service extension).
        case location
        /// Live Activity update.
        case liveactivity
        /// Push to Talk.
        case pushtotalk
        /// Widget reload.
        case widgets
        /// Controls (Control Center) reload.
        case controls

        package init(from decoder: any Decoder) throws {
            self = try StringEnum.decode(Self.self, from: decoder, what: "push type")
        }

        /// What APNs expects appended to the bundle id in `apns-topic`.
        package var topicSuffix: String {
            switch self {
            case .alert, .background, .mdm: return ""
            case .voip: return ".voip"
            case .complication: return ".complication"
            case .fileprovider: return ".pushkit.fileprovider"
            case .location: return ".location-query"
            case .liveactivity: return ".push-type.liveactivity"
            case .pushtotalk: return ".voip-ptt"
            case .widgets: return ".push-type.widgets"
            case .controls: return ".push-type.controls"
            }
        }

        /// Largest payload APNs accepts for this push type, in bytes.
        package var maxPayloadBytes: Int { self == .voip ? 5_120 : 4_096 }
    }

    /// The visible texts for one locale. A locale's entry replaces the default
    /// as a whole; fields are not mixed across locales.
    package struct LocalizedText: Hashable, Sendable, Codable {
        package var title: String?
        package var subtitle: String?
        package var body: String?

        package init(title: String? = nil, subtitle: String? = nil, body: String? = nil) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
        }

        /// True when no field has any text.
        package var isEmpty: Bool {
            (title ?? "").isEmpty && (subtitle ?? "").isEmpty && (body ?? "").isEmpty
        }

        private enum CodingKeys: String, CodingKey { case title, subtitle, body }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            title = try container.optionalField(.title)
            subtitle = try container.optionalField(.subtitle)
            body = try container.optionalField(.body)
        }
    }

    /// Texts per locale with a default.
    package struct Content: Hashable, Sendable, Codable {
        /// Used when the device's locale has no entry (and when it is unknown).
        package var defaultText: LocalizedText?
        /// Keyed by locale id as written by the producer (`de`, `fr_FR`, `pt-BR`).
        package var locales: [String: LocalizedText] {
            didSet { index = Self.makeIndex(locales) }
        }
        /// `locales` keyed by normalized id, for `text(forLocale:)`.
        private var index: [String: LocalizedText]

        package init(defaultText: LocalizedText? = nil, locales: [String: LocalizedText] = [:]) {
            self.defaultText = defaultText
            self.locales = locales
            self.index = Self.makeIndex(locales)
        }

        /// The texts for a device locale: the exact locale, then ever shorter
        /// prefixes (`zh_Hant_TW`, `zh_Hant`, `zh`), then the default. Matching
        /// ignores case and treats `-` and `_` alike; a POSIX suffix
        /// (`.UTF-8`, `@euro`) on the device locale is ignored.
        package func text(forLocale locale: String?) -> LocalizedText? {
            guard let locale, !index.isEmpty else { return defaultText }
            var candidate = Self.normalize(locale)
            while !candidate.isEmpty {
                if let text = index[candidate] { return text }
                guard let cut = candidate.lastIndex(of: "_") else { break }
                candidate = String(candidate[..<cut])
            }
            return defaultText
        }

        /// Lowercased, `-` as `_`, without a POSIX codeset or modifier.
        static func normalize(_ locale: String) -> String {
            var id = Substring(locale)
            if let end = id.firstIndex(where: { $0 == "." || $0 == "@" }) { id = id[..<end] }
            return id.lowercased().replacingOccurrences(of: "-", with: "_")
        }

        private static func makeIndex(_ locales: [String: LocalizedText]) -> [String: LocalizedText] {
            var index: [String: LocalizedText] = [:]
            // Sorted so that the outcome is stable if two ids normalize alike
            // (validate() refuses that; this only matters for unvalidated values).
            for key in locales.keys.sorted() { index[normalize(key)] = locales[key] }
            return index
        }

        private enum CodingKeys: String, CodingKey {
            case defaultText = "default", locales
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                defaultText: try container.optionalField(.defaultText),
                locales: try container.optionalField(.locales) ?? [:])
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(defaultText, forKey: .defaultText)
            if !locales.isEmpty { try container.encode(locales, forKey: .locales) }
        }

        package static func == (lhs: Content, rhs: Content) -> Bool {
            lhs.defaultText == rhs.defaultText && lhs.locales == rhs.locales
        }

        package func hash(into hasher: inout Hasher) {
            hasher.combine(defaultText)
            hasher.combine(locales)
        }
    }
}

// MARK: - Options

extension Campaign {
    /// How to send. All optional.
    package struct Options: Hashable, Sendable, Codable {
        /// `apns-priority`: 10 (immediately), 5 (power-considerate; required for
        /// background pushes) or 1 (power-considerate, never wakes the device).
        /// Nil lets `Campaign.effectivePriority` choose.
        package var priority: Int?
        /// `apns-expiration` in seconds since the epoch: APNs stores and retries
        /// until then; 0 means deliver now or never. Nil lets the sender choose.
        package var expiration: Int64?
        /// `apns-collapse-id`, at most 64 bytes of UTF-8. Nil means the campaign
        /// id (see `Campaign.effectiveCollapseID`).
        package var collapseID: String?
        /// Sends per second for this campaign, as a cap below the app's own limit.
        package var rate: Int?
        /// Expand and count the audience without sending anything.
        package var dryRun: Bool
        /// When the first request may go out, in milliseconds since the epoch (UTC). Nil or a
        /// moment already past: now. At most `Campaign.maxScheduleAhead` ahead.
        package var sendAt: Int64?
        /// Send each device when its own clock reads this (its IANA zone, or the app's
        /// default zone): one zone wave per moment (`ZoneWave`). Not with `sendAt`.
        package var localTime: LocalTime?
        /// Devices whose `localTime` has passed when the campaign is planned; nil: `skip`.
        package var late: LatePolicy?
        /// Transactional sends: alert pushes go out inside devices' quiet hours too.
        package var ignoreQuietHours: Bool
        /// Transactional sends: the app's frequency caps neither hold them back nor count them.
        package var ignoreFrequencyCaps: Bool = false
        /// How long after the campaign reached a device, in seconds, a conversion that names
        /// no campaign is still counted for it; nil: `Campaign.defaultAttributionWindow`.
        package var attributionWindow: Int64?

        package init(
            priority: Int? = nil, expiration: Int64? = nil, collapseID: String? = nil,
            rate: Int? = nil, dryRun: Bool = false, sendAt: Int64? = nil, localTime: LocalTime? = nil, late: LatePolicy? = nil,
            ignoreQuietHours: Bool = false
        ) {
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.rate = rate
            self.dryRun = dryRun
            self.sendAt = sendAt
            self.localTime = localTime
            self.late = late
            self.ignoreQuietHours = ignoreQuietHours
        }

        /// What late devices get: `skip` unless the campaign says otherwise.
        package var latePolicy: LatePolicy { late ?? .skip }

        /// The attribution window in milliseconds.
        package var attributionWindowMillis: Int64 { (attributionWindow ?? Campaign.defaultAttributionWindow) * 1_000 }

        private enum CodingKeys: String, CodingKey {
            case priority, expiration, collapseID = "collapse_id", rate, dryRun = "dry_run", sendAt = "send_at"
            case localTime = "local_time", late, ignoreQuietHours = "ignore_quiet_hours", ignoreFrequencyCaps = "ignore_frequency_caps"
            case attributionWindow = "attribution_window_s"
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            priority = try container.optionalField(.priority)
            expiration = try container.optionalField(.expiration)
            collapseID = try container.optionalField(.collapseID)
            rate = try container.optionalField(.rate)
            dryRun = try container.optionalField(.dryRun) ?? false
            sendAt = try container.optionalField(.sendAt)
            if let text: String = try container.optionalField(.localTime) { localTime = try LocalTime(parsing: text) }
            late = try container.optionalField(.late)
            ignoreQuietHours = try container.optionalField(.ignoreQuietHours) ?? false
            ignoreFrequencyCaps = try container.optionalField(.ignoreFrequencyCaps) ?? false
            attributionWindow = try container.optionalField(.attributionWindow)
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(priority, forKey: .priority)
            try container.encodeIfPresent(expiration, forKey: .expiration)
            try container.encodeIfPresent(collapseID, forKey: .collapseID)
            try container.encodeIfPresent(rate, forKey: .rate)
            try container.encode(dryRun, forKey: .dryRun)
            try container.encodeIfPresent(sendAt, forKey: .sendAt)
            try container.encodeIfPresent(localTime?.description, forKey: .localTime)
            try container.encodeIfPresent(late?.rawValue, forKey: .late)
            if ignoreQuietHours { try container.encode(true, forKey: .ignoreQuietHours) }
            if ignoreFrequencyCaps { try container.encode(true, forKey: .ignoreFrequencyCaps) }
            try container.encodeIfPresent(attributionWindow, forKey: .attributionWindow)
        }
    }
}

// MARK: - Codable

extension Campaign {
    private enum CodingKeys: String, CodingKey {
        case v, id, app, audience, notification, options, variants, holdout, winner, decision, submittedAt = "submitted_at"
    }

    /// Reads the fields; `v` has already been checked by `MessageCodec`.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.field(.id)
        app = try container.field(.app)
        audience = try container.field(.audience)
        notification = try container.field(.notification)
        options = try container.optionalField(.options) ?? Options()
        variants = try container.optionalField(.variants) ?? []
        holdout = try container.optionalField(.holdout) ?? 0
        winner = try container.optionalField(.winner)
        decision = try container.optionalField(.decision)
        submittedAt = try container.optionalField(.submittedAt)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.currentVersion, forKey: .v)
        try container.encode(id, forKey: .id)
        try container.encode(app, forKey: .app)
        try container.encode(audience, forKey: .audience)
        try container.encode(notification, forKey: .notification)
        try container.encode(options, forKey: .options)
        if !variants.isEmpty { try container.encode(variants, forKey: .variants) }
        if holdout != 0 { try container.encode(holdout, forKey: .holdout) }
        try container.encodeIfPresent(winner, forKey: .winner)
        try container.encodeIfPresent(decision, forKey: .decision)
        try container.encodeIfPresent(submittedAt, forKey: .submittedAt)
    }
}

// MARK: - Validation

extension Campaign {
    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(id, field: "id")
        try Rules.identifier(app, field: "app")
        try validateAudience()
        try validateNotification(variant: nil)
        // Checked once the push is known good: an update reaches the tokens of one running
        // activity, and without naming it there is no device it could go to.
        if notification.tokenKind == .liveActivityUpdate {
            switch audience {
            case .activity, .activities, .channel: break
            default:
                throw .invalidField(
                    "audience",
                    "a liveactivity update or end goes to running activities' tokens or to a broadcast channel: give audience.activity (the id the app registered the activity under), audience.activities (an attributes type and attributes to match) or audience.channel")
            }
        }
        try validateVariants()
        try validateOptions()
        try validateWinner()
        if let submittedAt { try Rules.epochMillis(submittedAt, field: "submitted_at") }
    }

    private func validateAudience() throws(MessageDecodingError) {
        switch audience {
        case .segment(let expression):
            if expression.allSatisfy(\.isWhitespace) {
                throw .invalidField("audience.segment", "must not be empty")
            }
            if expression.utf8.count > Self.maxSegmentBytes {
                throw .invalidField(
                    "audience.segment",
                    "is \(expression.utf8.count) bytes, at most \(Self.maxSegmentBytes) are allowed")
            }
        case .named(let name):
            try Rules.identifier(name, field: "audience.named")
        case .activity(let id):
            try Rules.identifier(id, field: "audience.activity")
            guard notification.tokenKind == .liveActivityUpdate else {
                throw .invalidField("audience.activity", "addresses a Live Activity's update tokens: only for push_type liveactivity with aps.event update or end")
            }
        case .activities(let filter):
            try filter.validate(field: "audience.activities")
            guard notification.tokenKind == .liveActivityUpdate else {
                throw .invalidField("audience.activities", "addresses running Live Activities' update tokens: only for push_type liveactivity with aps.event update or end")
            }
        case .channel(let id):
            if let problem = BroadcastChannel.problem(withID: id) { throw .invalidField("audience.channel", problem) }
            guard notification.tokenKind == .liveActivityUpdate else {
                throw .invalidField("audience.channel", "is a broadcast channel, which carries Live Activity updates only: push_type liveactivity with aps.event update or end")
            }
            if !variants.isEmpty || holdout != 0 {
                throw .invalidField("audience.channel", "one broadcast reaches every subscriber alike: a channel campaign has no variants or holdout")
            }
        case .devices(let ids):
            if ids.isEmpty {
                throw .invalidField("audience.devices", "must list at least one device id")
            }
            if ids.count > Self.maxExplicitDevices {
                throw .invalidField(
                    "audience.devices",
                    "lists \(ids.count) devices, at most \(Self.maxExplicitDevices) are allowed; use a segment for larger audiences")
            }
            var firstSeen: [String: Int] = [:]
            firstSeen.reserveCapacity(ids.count)
            for (position, deviceID) in ids.enumerated() {
                try Rules.identifier(deviceID, field: "audience.devices[\(position)]")
                if let earlier = firstSeen.updateValue(position, forKey: deviceID) {
                    throw .invalidField(
                        "audience.devices[\(position)]", "repeats audience.devices[\(earlier)] (\(deviceID.debugDescription))")
                }
            }
        }
    }

    /// The campaign's own rules (content and data shapes) first; then every payload it can
    /// send, the default texts' and each locale's, is built by the APNs model, which owns
    /// the rules of `aps`, push types, priority and size.
    /// `variant`: the variant whose devices get it (nil for the notification as given), for
    /// the engagement marker that every payload carries and that counts against its size.
    /// The payload checks again with Notificare's keys in every push, for an app whose
    /// devices run that SDK (which the API knows and the record does not): they take about
    /// 150 bytes of the limit.
    package func validatePayloads(notificareApplication application: String) throws(MessageDecodingError) {
        guard EngagementMarker.carried(by: notification.pushType) else { return }
        try checkPayloads(variant: nil, notificare: application)
        for (index, variant) in variants.enumerated() {
            try applying(variant: index).checkPayloads(variant: variant.id, notificare: application)
        }
    }

    func validateNotification(variant: String?) throws(MessageDecodingError) {
        try validateContent()
        if let name = notification.template { try Rules.identifier(name, field: "notification.template") }
        try validateTemplates()
        try validateActions()
        if let data = notification.data, data["aps"] != nil {
            throw .invalidField(
                "notification.data.aps",
                "custom data must not contain \"aps\"; put APNs keys in notification.aps")
        }
        if notification.data?[EngagementMarker.key] != nil, EngagementMarker.carried(by: notification.pushType) {
            throw .invalidField(
                "notification.data.\(EngagementMarker.key)",
                "is where every push carries Pushfan's engagement marker (campaign, variant, send id); give your key another name")
        }
        switch notification.pushType {
        case .alert:
            if notification.content?.defaultText == nil && notification.aps?["alert"] == nil {
                throw .invalidField(
                    "notification.content.default",
                    "an alert push needs default texts (for devices whose locale has no entry) or notification.aps.alert")
            }
        case .background:
            if notification.content != nil {
                throw .invalidField("notification.content", "a background push cannot show texts; remove content")
            }
        default:
            break
        }
        do {
            // `aps` as given, before a locale's texts replace its alert.
            _ = try APNsPayload.APS(json: notification.aps ?? [:])
        } catch {
            throw Self.refusal(error, locale: nil)
        }
        try checkPayloads(variant: variant, notificare: nil)
    }

    /// Each locale's payload, with the marker (and Notificare's keys for an app on that
    /// SDK), is one APNs accepts.
    private func checkPayloads(variant: String?, notificare application: String?) throws(MessageDecodingError) {
        let locales: [String?] = [nil] + (notification.content?.locales.keys.sorted() ?? []).map { Optional($0) }
        for locale in locales {
            let notificare = application.map { NotificareMarker(application: $0, campaign: id, variant: variant) }
            do {
                _ = try APNsPreparedPayload(campaign: self, locale: locale, marker: EngagementMarker(campaign: id, variant: variant, notificare: notificare))
            } catch {
                throw Self.refusal(error, locale: locale)
            }
        }
    }

    /// What the APNs model refused, named by the campaign field that holds it.
    private static func refusal(_ error: APNsRequestError, locale: String?) -> MessageDecodingError {
        guard let field = error.field else {
            let whole = locale.map { JSONPath.join("notification.content.locales", $0) } ?? "notification"
            let which = locale.map { "for locale \($0)" } ?? "with the default texts"
            let reason = "the payload \(which) cannot be sent: \(error.description)"
            return error.code == "payload_too_large" ? .payloadTooLarge(whole, reason) : .invalidField(whole, reason)
        }
        let campaignField: String = switch field {
        case "apns-priority": "options.priority"
        case "apns-expiration": "options.expiration"
        case "apns-collapse-id": "options.collapse_id"
        case "mdm": "notification.data.mdm"
        default: field.hasPrefix("aps") ? "notification." + field : field
        }
        return .invalidField(campaignField, error.code == "push_type_rule" ? error.description : error.detail)
    }

    private func validateContent() throws(MessageDecodingError) {
        guard let content = notification.content else { return }
        if let text = content.defaultText, text.isEmpty {
            throw .invalidField("notification.content.default", "needs a title, subtitle or body")
        }
        var seen: [String: String] = [:]
        for key in content.locales.keys.sorted() {
            let field = JSONPath.join("notification.content.locales", key)
            guard Self.isLocaleID(key) else {
                throw .invalidField(
                    field, "is not a locale id; expected a language code with optional region or script, like de, de_DE, pt-BR or zh-Hant-TW")
            }
            if let other = seen.updateValue(key, forKey: Content.normalize(key)) {
                throw .invalidField(field, "is the same locale as \(other.debugDescription); keep one")
            }
            if content.locales[key]?.isEmpty ?? true {
                throw .invalidField(field, "needs a title, subtitle or body")
            }
        }
    }

    /// Priority is checked with the payloads; expiration and collapse id by the APNs
    /// model's header rules.
    private func validateOptions() throws(MessageDecodingError) {
        do {
            _ = try APNsNotification.check(APNsNotification.Expiration(epochSeconds: options.expiration))
            if let collapseID = options.collapseID { try APNsNotification.checkCollapseID(collapseID) }
        } catch {
            throw Self.refusal(error, locale: nil)
        }
        if let sendAt = options.sendAt { try Rules.epochMillis(sendAt, field: "options.send_at") }
        if options.sendAt != nil && options.localTime != nil {
            throw .invalidField("options.local_time", "cannot be given with options.send_at; choose one moment for everyone (send_at) or each device's own clock (local_time)")
        }
        if options.late != nil && options.localTime == nil {
            throw .invalidField("options.late", "applies only to a campaign with options.local_time")
        }
        if let rate = options.rate, rate <= 0 {
            throw .invalidField("options.rate", "must be more than 0 sends per second, got \(rate)")
        }
        if let window = options.attributionWindow, !(Self.minAttributionWindow...Self.maxAttributionWindow).contains(window) {
            throw .invalidField(
                "options.attribution_window_s",
                "must be \(Self.minAttributionWindow) to \(Self.maxAttributionWindow) seconds (a minute to 30 days), got \(window)")
        }
    }

    /// A BCP-47 or iOS-style locale id: a 2 to 8 letter language, then subtags
    /// of 1 to 8 letters or digits separated by `-` or `_`; 35 bytes at most.
    static func isLocaleID(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= 35 else { return false }
        let parts = id.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "-" || $0 == "_" })
        guard let language = parts.first, (2...8).contains(language.count),
              language.allSatisfy({ $0.isASCII && $0.isLetter })
        else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...8).contains(part.count) && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        }
    }
}

/// FNV-1a, 64 bits: a hash that is the same in every process and run (Swift's `Hasher` is
/// seeded per process), for values several workers must derive alike.
package enum FNV1a {
    package static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
