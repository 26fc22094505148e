import Foundation
import PushfanAPNsModel
import PushfanSchedule
import PushfanSegments
import PushfanSupport

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
    /// Longest segment expression, in UTF-8 bytes: the segment language's own bound.
    package static let maxSegmentBytes = SegmentLimits.standard.maxBytes
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
        options.priority ?? notification.pushType.defaultPriority
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
