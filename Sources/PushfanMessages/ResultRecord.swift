import Foundation
import PushfanAPNsModel
import PushfanSupport

/// A record of topic `results`: the final outcome for one device, or a
/// campaign lifecycle event. In JSON the field `type` (`"device"` or
/// `"campaign"`) says which.
///
/// Sends are at-least-once, so the same result can appear more than once;
/// readers de-duplicate by Kafka key (`kafkaKey`), the last record per key
/// winning, which also makes the topic safe to compact.
package enum ResultRecord: VersionedMessage, Hashable {
    case device(DeviceResult)
    case campaign(CampaignEvent)

    package static let currentVersion = 1

    /// `<app>/<campaign>/<device>` for a device outcome, `<app>/<campaign>` for an event.
    package var kafkaKey: String {
        switch self {
        case .device(let result): return result.kafkaKey
        case .campaign(let event): return event.kafkaKey
        }
    }

    /// The campaign the record belongs to.
    package var campaignKey: CampaignKey {
        switch self {
        case .device(let result): return result.campaignKey
        case .campaign(let event): return event.campaignKey
        }
    }

    /// The value of the `type` field.
    package enum Kind: String, Codable, Sendable, CaseIterable {
        case device, campaign

        package init(from decoder: any Decoder) throws {
            self = try StringEnum.decode(Self.self, from: decoder, what: "result type")
        }
    }

    private enum CodingKeys: String, CodingKey { case type }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.field(.type, as: Kind.self) {
        case .device: self = .device(try DeviceResult(from: decoder))
        case .campaign: self = .campaign(try CampaignEvent(from: decoder))
        }
    }

    /// Each payload writes `v` and `type` itself.
    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .device(let result): try result.encode(to: encoder)
        case .campaign(let event): try event.encode(to: encoder)
        }
    }

    /// Both kinds by hand: a device's result per device sent, a campaign's event per
    /// transactional message the API accepts.
    package var canonicalJSON: [UInt8]? {
        switch self {
        case .device(let result): return result.encodedJSON()
        case .campaign(let event): return event.encodedJSON()
        }
    }

    /// A device's result (the form readers meet on nearly every record); events are read by
    /// the generic decoder.
    package static func canonical(_ bytes: UnsafeRawBufferPointer) -> ResultRecord? {
        DeviceResult(canonicalJSON: bytes).map(ResultRecord.device)
    }

    package func validate() throws(MessageDecodingError) {
        switch self {
        case .device(let result): try result.validate()
        case .campaign(let event): try event.validate()
        }
    }
}

/// The one final outcome of a device in a campaign.
package enum DeviceOutcome: String, Codable, Sendable, CaseIterable {
    /// APNs accepted the notification (HTTP 200). Acceptance, not proof of display.
    case delivered
    /// APNs refused the request itself (a 4xx other than a bad token); `reason`
    /// has APNs' reason. Never resent.
    case rejected
    /// The token is malformed, for another topic or environment, or no longer
    /// active (400 BadDeviceToken, DeviceTokenNotForTopic; 410 Unregistered).
    case invalidToken = "invalid_token"
    /// The campaign's expiration passed before the device could be sent to.
    case expired
    /// The campaign was cancelled before the device was sent to.
    case cancelled
    /// Deliberately not sent (dry run, opted out, no token, ...); `reason` says why.
    case skipped
    /// Sending kept failing (network, 5xx, 429) until the retries ran out.
    case failed

    package init(from decoder: any Decoder) throws {
        self = try StringEnum.decode(Self.self, from: decoder, what: "outcome")
    }
}

/// A device's final outcome. Kafka key `<app>/<campaign>/<device>`.
package struct DeviceResult: Codable, Sendable, Hashable {
    /// App key.
    package var app: String
    /// Campaign id (within `app`).
    package var campaign: String
    /// Device id.
    package var device: String
    package var outcome: DeviceOutcome
    /// APNs' HTTP status, when APNs answered.
    package var status: Int?
    /// APNs' reason (`BadDeviceToken`, `Unregistered`, ...) or, for skipped and
    /// failed outcomes, Pushfan's own.
    package var reason: String?
    /// The `apns-id` APNs returned or was given.
    package var apnsID: String?
    /// Requests made to APNs for this device (0 when never sent).
    package var attempts: Int
    /// When the outcome was reached, in milliseconds since the epoch.
    package var at: Int64
    /// The A/B variant the device was given (absent without variants and in the holdout).
    package var variant: String?
    /// A broadcast to a channel (iOS 18): `device` is the channel's id, and this one
    /// result stands for every subscriber (APNs does not say who they are). In JSON only
    /// when true.
    package var broadcast = false

    package init(
        campaign: CampaignKey, device: String, outcome: DeviceOutcome, status: Int? = nil,
        reason: String? = nil, apnsID: String? = nil, attempts: Int, at: Int64, variant: String? = nil, broadcast: Bool = false
    ) {
        self.variant = variant
        self.broadcast = broadcast
        self.app = campaign.app
        self.campaign = campaign.id
        self.device = device
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.attempts = attempts
        self.at = at
    }

    /// The campaign's name across the system.
    package var campaignKey: CampaignKey { CampaignKey(app: app, id: campaign) }

    /// `<app>/<campaign>/<device>`. No app, campaign or device id can contain `/` (a
    /// broadcast's channel id may: it is always the last part).
    package var kafkaKey: String { "\(app)/\(campaign)/\(device)" }

    private enum CodingKeys: String, CodingKey {
        case v, type, app, campaign, device, outcome, status, reason, apnsID = "apns_id", attempts, at, variant, broadcast
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        app = try container.field(.app)
        campaign = try container.field(.campaign)
        device = try container.field(.device)
        outcome = try container.field(.outcome)
        status = try container.optionalField(.status)
        reason = try container.optionalField(.reason)
        apnsID = try container.optionalField(.apnsID)
        attempts = try container.field(.attempts)
        at = try container.field(.at)
        variant = try container.optionalField(.variant)
        broadcast = try container.optionalField(.broadcast) ?? false
    }

    /// Writes `v` and `"type": "device"` too; absent optionals as explicit `null`, except
    /// `variant`, left out without one (so results of campaigns without variants are as before).
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ResultRecord.currentVersion, forKey: .v)
        try container.encode(ResultRecord.Kind.device, forKey: .type)
        try container.encode(app, forKey: .app)
        try container.encode(campaign, forKey: .campaign)
        try container.encode(device, forKey: .device)
        try container.encode(outcome, forKey: .outcome)
        try container.encode(status, forKey: .status)
        try container.encode(reason, forKey: .reason)
        try container.encode(apnsID, forKey: .apnsID)
        try container.encode(attempts, forKey: .attempts)
        try container.encode(at, forKey: .at)
        try container.encodeIfPresent(variant, forKey: .variant)
        if broadcast { try container.encode(true, forKey: .broadcast) }
    }

    /// The record's JSON, the same bytes as `MessageCodec.encodeGenerically(ResultRecord.device(self))`
    /// (sorted keys, no whitespace) without `JSONEncoder`'s cost: the sender writes one per
    /// device, and the generic encoder took a sixth of a worker's CPU.
    package func encodedJSON() -> [UInt8] {
        var out = CanonicalWriter(capacity: 170 + app.utf8.count + campaign.utf8.count + device.utf8.count)
        out.literal(#"{"apns_id":"#); out.string(apnsID)
        out.literal(#","app":"#); out.string(app)
        out.literal(#","at":"#); out.integer(at)
        out.literal(#","attempts":"#); out.integer(attempts)
        if broadcast { out.literal(#","broadcast":true"#) }
        out.literal(#","campaign":"#); out.string(campaign)
        out.literal(#","device":"#); out.string(device)
        out.literal(#","outcome":"#); out.string(outcome.rawValue)
        out.literal(#","reason":"#); out.string(reason)
        out.literal(#","status":"#); out.integer(status)
        out.literal(#","type":"device","v":"#); out.integer(ResultRecord.currentVersion)
        if let variant { out.literal(#","variant":"#); out.string(variant) }
        out.literal("}")
        return out.bytes
    }

    /// Reads back exactly what `encodedJSON` writes (keys in that order, no whitespace, no
    /// escapes in strings), validated; nil for any other spelling, which the generic decoder
    /// then reads. Readers of the whole results topic (the dashboard) meet this form on every
    /// record, and `JSONDecoder` cost them about 15 µs per record.
    package init?(canonicalJSON bytes: UnsafeRawBufferPointer) {
        var reader = CanonicalReader(bytes: bytes)
        guard reader.literal(#"{"apns_id":"#), let apnsID = reader.optionalString(),
              reader.literal(#","app":"#), let app = reader.optionalString() ?? nil,
              reader.literal(#","at":"#), let at = reader.integer(),
              reader.literal(#","attempts":"#), let attempts = reader.integer()
        else { return nil }
        let broadcast = reader.literal(#","broadcast":true"#)
        guard reader.literal(#","campaign":"#), let campaign = reader.optionalString() ?? nil,
              reader.literal(#","device":"#), let device = reader.optionalString() ?? nil,
              reader.literal(#","outcome":"#), let outcome = (reader.optionalString() ?? nil).flatMap(DeviceOutcome.init(rawValue:)),
              reader.literal(#","reason":"#), let reason = reader.optionalString(),
              reader.literal(#","status":"#), let status = reader.optionalInteger(),
              reader.literal(#","type":"device","v":"#), reader.integer() == Int64(ResultRecord.currentVersion)
        else { return nil }
        var variant: String?
        if reader.literal(#","variant":"#) {
            guard let given = reader.optionalString() ?? nil else { return nil }
            variant = given
        }
        guard reader.literal("}"), reader.atEnd, let attemptCount = Int(exactly: attempts) else { return nil }
        self.init(
            campaign: CampaignKey(app: app, id: campaign), device: device, outcome: outcome, status: status.flatMap { Int(exactly: $0) }, reason: reason, apnsID: apnsID,
            attempts: attemptCount, at: at, variant: variant, broadcast: broadcast)
        guard (try? validate()) != nil else { return nil }
    }

    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(app, field: "app")
        try Rules.identifier(campaign, field: "campaign")
        if broadcast {
            if let problem = BroadcastChannel.problem(withID: device) { throw .invalidField("device", "a broadcast's channel id \(problem)") }
        } else {
            try Rules.identifier(device, field: "device")
        }
        if let variant { try Rules.identifier(variant, field: "variant") }
        if let status, !(100...599).contains(status) {
            throw .invalidField("status", "must be an HTTP status from 100 to 599, got \(status)")
        }
        try Rules.nonNegative(attempts, field: "attempts")
        try Rules.nonNegative(at, field: "at")
    }
}

/// A step in a campaign's life. Kafka key `<app>/<campaign>`, so the latest event per
/// campaign is its current state.
package struct CampaignEvent: Codable, Sendable, Hashable {
    package enum Event: String, Codable, Sendable, CaseIterable {
        /// The planner accepted the campaign and planned its tasks.
        case accepted
        /// Running totals while sending.
        case progress
        /// Every device has its final outcome.
        case completed
        /// The campaign could not run (unknown app, bad segment...), or the record named by
        /// `submission` was refused (an id reused for another campaign); see `error`.
        case failed
        /// Sends are on hold; `error` says why: the app's APNs credentials fail (sends resume
        /// by themselves once they work), or an operator paused the campaign (until resumed).
        /// Devices keep waiting; none is lost.
        case paused
        /// An operator resumed a paused campaign: sending goes on from the ledger.
        case resumed
        /// An operator cancelled the campaign and every device has its final outcome: those
        /// not sent before the cancel are `cancelled`; the counts add up to the audience.
        case cancelled

        package init(from decoder: any Decoder) throws {
            self = try StringEnum.decode(Self.self, from: decoder, what: "campaign event")
        }
    }

    /// Campaign id.
    package var campaign: String
    /// App key.
    package var app: String
    package var event: Event
    /// Number of devices targeted, once known.
    package var audience: Int?
    /// Devices per outcome so far, keyed by `DeviceOutcome` raw values.
    package var counts: [String: Int]
    /// What went wrong, for `failed` and `paused`.
    package var error: String?
    /// The campaigns-topic record this event answers, on the planner's events; a submitter
    /// waits for the event naming its own record, so older events of the id are not taken
    /// for its answer.
    package var submission: Submission?
    /// When the event happened, in milliseconds since the epoch.
    package var at: Int64
    /// For a campaign with A/B variants: `counts` per variant id (and `holdout`), adding up
    /// to them. Empty otherwise.
    package var variants: [String: [String: Int]] = [:]

    /// Where a campaign record was written: its partition and offset on the campaigns topic.
    package struct Submission: Codable, Sendable, Hashable {
        package var partition: Int
        package var offset: Int64

        package init(partition: Int, offset: Int64) {
            self.partition = partition
            self.offset = offset
        }
    }

    package init(
        campaign: String, app: String, event: Event, audience: Int? = nil,
        counts: [String: Int] = [:], error: String? = nil, submission: Submission? = nil, at: Int64
    ) {
        self.campaign = campaign
        self.app = app
        self.event = event
        self.audience = audience
        self.counts = counts
        self.error = error
        self.submission = submission
        self.at = at
    }

    /// Builds `counts` from outcome-keyed totals.
    package init(
        campaign: String, app: String, event: Event, audience: Int? = nil,
        outcomeCounts: [DeviceOutcome: Int], error: String? = nil, submission: Submission? = nil, at: Int64
    ) {
        var counts: [String: Int] = [:]
        for (outcome, count) in outcomeCounts { counts[outcome.rawValue] = count }
        self.init(campaign: campaign, app: app, event: event, audience: audience, counts: counts, error: error, submission: submission, at: at)
    }

    /// The count for one outcome; 0 when absent.
    package func count(of outcome: DeviceOutcome) -> Int { counts[outcome.rawValue] ?? 0 }

    /// Sum of all outcome counts: devices finished so far.
    package var finished: Int { counts.values.reduce(0, +) }

    /// The campaign's name across the system.
    package var campaignKey: CampaignKey { CampaignKey(app: app, id: campaign) }

    /// `<app>/<campaign>`.
    package var kafkaKey: String { campaignKey.stored }

    private enum CodingKeys: String, CodingKey {
        case v, type, campaign, app, event, audience, counts, error, submission, at, variants
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        campaign = try container.field(.campaign)
        app = try container.field(.app)
        event = try container.field(.event)
        audience = try container.optionalField(.audience)
        counts = try container.optionalField(.counts) ?? [:]
        error = try container.optionalField(.error)
        submission = try container.optionalField(.submission)
        at = try container.field(.at)
        variants = try container.optionalField(.variants) ?? [:]
    }

    /// Writes `v` and `"type": "campaign"` too.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ResultRecord.currentVersion, forKey: .v)
        try container.encode(ResultRecord.Kind.campaign, forKey: .type)
        try container.encode(campaign, forKey: .campaign)
        try container.encode(app, forKey: .app)
        try container.encode(event, forKey: .event)
        try container.encodeIfPresent(audience, forKey: .audience)
        try container.encode(counts, forKey: .counts)
        try container.encodeIfPresent(error, forKey: .error)
        try container.encodeIfPresent(submission, forKey: .submission)
        try container.encode(at, forKey: .at)
        if !variants.isEmpty { try container.encode(variants, forKey: .variants) }
    }

    /// The event's JSON, the same bytes as `MessageCodec.encodeGenerically(ResultRecord.campaign(self))`.
    package func encodedJSON() -> [UInt8] {
        var out = CanonicalWriter(capacity: 200 + app.utf8.count + campaign.utf8.count + (error?.utf8.count ?? 0))
        out.literal(#"{"app":"#); out.string(app)
        out.literal(#","at":"#); out.integer(at)
        if let audience { out.literal(#","audience":"#); out.integer(audience) }
        out.literal(#","campaign":"#); out.string(campaign)
        out.literal(#","counts":"#); out.counts(counts)
        if let error { out.literal(#","error":"#); out.string(error) }
        out.literal(#","event":"#); out.string(event.rawValue)
        if let submission {
            out.literal(#","submission":{"offset":"#); out.integer(submission.offset)
            out.literal(#","partition":"#); out.integer(submission.partition)
            out.literal("}")
        }
        out.literal(#","type":"campaign","v":"#); out.integer(ResultRecord.currentVersion)
        if !variants.isEmpty {
            out.literal(#","variants":{"#)
            for (index, variant) in CanonicalWriter.sorted(variants.keys).enumerated() {
                if index > 0 { out.literal(",") }
                out.string(variant)
                out.literal(":")
                out.counts(variants[variant] ?? [:])
            }
            out.literal("}")
        }
        out.literal("}")
        return out.bytes
    }

    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(campaign, field: "campaign")
        try Rules.identifier(app, field: "app")
        if let audience { try Rules.nonNegative(audience, field: "audience") }
        for key in counts.keys.sorted() {
            let field = JSONPath.join("counts", key)
            guard DeviceOutcome(rawValue: key) != nil else {
                let allowed = DeviceOutcome.allCases.map(\.rawValue).joined(separator: ", ")
                throw .invalidField(field, "is not an outcome; expected one of: \(allowed)")
            }
            try Rules.nonNegative(counts[key] ?? 0, field: field)
        }
        for (variant, byOutcome) in variants {
            for (key, count) in byOutcome {
                let field = JSONPath.join(JSONPath.join("variants", variant), key)
                guard DeviceOutcome(rawValue: key) != nil else { throw .invalidField(field, "is not an outcome") }
                try Rules.nonNegative(count, field: field)
            }
        }
        if let submission {
            try Rules.nonNegative(submission.partition, field: "submission.partition")
            try Rules.nonNegative(submission.offset, field: "submission.offset")
        }
        try Rules.nonNegative(at, field: "at")
    }
}

