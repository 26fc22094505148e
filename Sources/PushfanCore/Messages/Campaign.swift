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
    /// Longest `apns-collapse-id` APNs accepts, in UTF-8 bytes.
    package static let maxCollapseIDBytes = 64
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

    /// The Kafka key of the record: the campaign id.
    package var kafkaKey: String { id }

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

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case segment, named, devices
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            var present: [CodingKeys] = []
            for key in CodingKeys.allCases where container.contains(key) {
                if try !container.decodeNil(forKey: key) { present.append(key) }
            }
            guard present.count == 1, let form = present.first else {
                let reason = present.isEmpty
                    ? "needs exactly one of \"segment\", \"named\" or \"devices\", found none"
                    : "needs exactly one of \"segment\", \"named\" or \"devices\", found "
                        + present.map { "\"\($0.rawValue)\"" }.joined(separator: " and ")
                throw MessageDecodingError.invalidField(at: decoder.codingPath, reason)
            }
            switch form {
            case .segment: self = .segment(try container.field(.segment))
            case .named: self = .named(try container.field(.named))
            case .devices: self = .devices(try container.field(.devices))
            }
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .segment(let expression): try container.encode(expression, forKey: .segment)
            case .named(let name): try container.encode(name, forKey: .named)
            case .devices(let ids): try container.encode(ids, forKey: .devices)
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
            case pushType = "push_type", content, aps, data
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            pushType = try container.optionalField(.pushType) ?? .alert
            content = try container.optionalField(.content)
            aps = try container.optionalField(.aps)
            data = try container.optionalField(.data)
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(pushType, forKey: .pushType)
            try container.encodeIfPresent(content, forKey: .content)
            try container.encodeIfPresent(aps, forKey: .aps)
            try container.encodeIfPresent(data, forKey: .data)
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
            var payload = data ?? [:]
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

        package init(
            priority: Int? = nil, expiration: Int64? = nil, collapseID: String? = nil,
            rate: Int? = nil, dryRun: Bool = false
        ) {
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.rate = rate
            self.dryRun = dryRun
        }

        private enum CodingKeys: String, CodingKey {
            case priority, expiration, collapseID = "collapse_id", rate, dryRun = "dry_run"
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            priority = try container.optionalField(.priority)
            expiration = try container.optionalField(.expiration)
            collapseID = try container.optionalField(.collapseID)
            rate = try container.optionalField(.rate)
            dryRun = try container.optionalField(.dryRun) ?? false
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(priority, forKey: .priority)
            try container.encodeIfPresent(expiration, forKey: .expiration)
            try container.encodeIfPresent(collapseID, forKey: .collapseID)
            try container.encodeIfPresent(rate, forKey: .rate)
            try container.encode(dryRun, forKey: .dryRun)
        }
    }
}

// MARK: - Codable

extension Campaign {
    private enum CodingKeys: String, CodingKey {
        case v, id, app, audience, notification, options, submittedAt = "submitted_at"
    }

    /// Reads the fields; `v` has already been checked by `MessageCodec`.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.field(.id)
        app = try container.field(.app)
        audience = try container.field(.audience)
        notification = try container.field(.notification)
        options = try container.optionalField(.options) ?? Options()
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
        try container.encodeIfPresent(submittedAt, forKey: .submittedAt)
    }
}

// MARK: - Validation

extension Campaign {
    /// `aps.interruption-level` values (iOS 15+).
    package static let interruptionLevels = ["passive", "active", "time-sensitive", "critical"]

    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(id, field: "id")
        try Rules.identifier(app, field: "app")
        try validateAudience()
        try validateNotification()
        try validateOptions()
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

    private func validateNotification() throws(MessageDecodingError) {
        let aps = notification.aps ?? [:]
        try validateContent()
        try Self.validateAPS(aps)
        if let data = notification.data, data["aps"] != nil {
            throw .invalidField(
                "notification.data.aps",
                "custom data must not contain \"aps\"; put APNs keys in notification.aps")
        }

        switch notification.pushType {
        case .alert:
            if notification.content?.defaultText == nil && aps["alert"] == nil {
                throw .invalidField(
                    "notification.content.default",
                    "an alert push needs default texts (for devices whose locale has no entry) or notification.aps.alert")
            }
        case .background:
            if let priority = options.priority, priority != 5 {
                throw .invalidField("options.priority", "must be 5 for a background push (APNs refuses \(priority)), or left out")
            }
            if notification.content != nil {
                throw .invalidField("notification.content", "a background push cannot show texts; remove content")
            }
            for key in ["alert", "sound", "badge"] where aps[key] != nil {
                throw .invalidField("notification.aps.\(key)", "a background push cannot have \(key); remove it")
            }
            if aps["content-available"] != .int(1) {
                throw .invalidField(
                    "notification.aps.content-available", "a background push needs \"content-available\": 1")
            }
        default:
            break
        }
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

    /// Type checks for the `aps` keys whose form APNs defines; other keys pass.
    private static func validateAPS(_ aps: [String: JSONValue]) throws(MessageDecodingError) {
        for key in aps.keys.sorted() {
            guard let value = aps[key] else { continue }
            let field = JSONPath.join("notification.aps", key)
            switch key {
            case "alert":
                guard value.stringValue != nil || value.objectValue != nil else {
                    throw .invalidField(field, "must be a string or an object, found \(value.kindDescription)")
                }
            case "badge":
                guard let badge = value.intValue, badge >= 0 else {
                    throw .invalidField(field, "must be an integer of 0 or more (0 clears the badge), found \(describe(value))")
                }
            case "sound":
                guard value.stringValue != nil || value.objectValue != nil else {
                    throw .invalidField(field, "must be a sound file name or a critical-sound object, found \(value.kindDescription)")
                }
            case "category", "thread-id", "target-content-id", "filter-criteria":
                guard value.stringValue != nil else {
                    throw .invalidField(field, "must be a string, found \(value.kindDescription)")
                }
            case "content-available", "mutable-content":
                guard value == .int(0) || value == .int(1) else {
                    throw .invalidField(field, "must be 1 (or 0), found \(describe(value))")
                }
            case "interruption-level":
                guard let level = value.stringValue, interruptionLevels.contains(level) else {
                    throw .invalidField(
                        field, "must be one of \(interruptionLevels.joined(separator: ", ")), found \(describe(value))")
                }
            case "relevance-score":
                guard let score = value.doubleValue, (0...1).contains(score) else {
                    throw .invalidField(field, "must be a number from 0 to 1, found \(describe(value))")
                }
            default:
                break
            }
        }
    }

    private static func describe(_ value: JSONValue) -> String {
        switch value {
        case .int(let number): return String(number)
        case .number(let number): return String(number)
        case .string(let text): return Quote.clip(text, max: 40)
        default: return value.kindDescription
        }
    }

    private func validateOptions() throws(MessageDecodingError) {
        if let priority = options.priority, ![10, 5, 1].contains(priority) {
            throw .invalidField("options.priority", "must be 10, 5 or 1, got \(priority)")
        }
        if let expiration = options.expiration {
            if expiration < 0 {
                throw .invalidField("options.expiration", "must be seconds since the epoch (0 = now or never), got \(expiration)")
            }
            if expiration >= 100_000_000_000 {
                throw .invalidField("options.expiration", "must be seconds since the epoch; \(expiration) looks like milliseconds")
            }
        }
        if let collapseID = options.collapseID {
            if collapseID.isEmpty {
                throw .invalidField("options.collapse_id", "must not be empty; leave it out to use the campaign id")
            }
            if collapseID.utf8.count > Self.maxCollapseIDBytes {
                throw .invalidField(
                    "options.collapse_id",
                    "is \(collapseID.utf8.count) bytes, APNs allows at most \(Self.maxCollapseIDBytes)")
            }
        }
        if let rate = options.rate, rate <= 0 {
            throw .invalidField("options.rate", "must be more than 0 sends per second, got \(rate)")
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
