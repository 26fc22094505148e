import PushfanSupport

/// What a device did with a push, or after it: topic `events`, Kafka key `<app>/<device>`.
/// The API writes them (`POST /v1/apps/{app}/events`, Notificare's `POST /event`); anyone
/// may also produce them directly. A worker counts each event id once per app
/// (docs/messages.md, "Engagement events").
package struct EngagementEvent: VersionedMessage, Hashable {
    package static let currentVersion = 1

    package enum Kind: String, Codable, Sendable, CaseIterable {
        /// The push arrived on the device.
        case received
        /// The user opened the app from it.
        case opened
        /// The user chose one of its actions (`action`).
        case action
        /// The user dismissed it.
        case dismissed
        /// A conversion (`value` and `currency` optional): attributed to the campaign it
        /// names, or to every campaign that reached the device within its window.
        case converted
        /// The app's own event (`name`).
        case custom

        package init(from decoder: any Decoder) throws {
            self = try StringEnum.decode(Self.self, from: decoder, what: "kind")
        }

        /// Kinds about one push: they need its send id.
        package var needsSendID: Bool { [.received, .opened, .action, .dismissed].contains(self) }
    }

    /// The event's id, unique within its app: what makes counting exact (a replay or a
    /// client's retry is the same id). The client's own, or derived from the event's fields
    /// (`derivedID`).
    package var id: String
    package var app: String
    package var kind: Kind
    package var device: String
    /// The campaign (within `app`) of the push, from its marker.
    package var campaign: String?
    /// The device's variant, from the marker (checked against the campaign's split).
    package var variant: String?
    /// The push's `send_id`, from the marker.
    package var sendID: String?
    /// When it happened on the device, in milliseconds since the epoch (client time).
    package var at: Int64
    /// The action's identifier (`action` events).
    package var action: String?
    /// The event's name (`custom` events).
    package var name: String?
    /// A conversion's value, and its ISO 4217 currency.
    package var value: Double?
    package var currency: String?
    /// When the API took it, in milliseconds since the epoch (absent when produced directly).
    package var receivedAt: Int64?

    package init(
        id: String, app: String, kind: Kind, device: String, campaign: String?, variant: String?, sendID: String?, at: Int64,
        action: String?, name: String?, value: Double?, currency: String?, receivedAt: Int64?
    ) {
        self.id = id
        self.app = app
        self.kind = kind
        self.device = device
        self.campaign = campaign
        self.variant = variant
        self.sendID = sendID
        self.at = at
        self.action = action
        self.name = name
        self.value = value
        self.currency = currency
        self.receivedAt = receivedAt
    }

    /// The campaign's name across the system, when the event names one.
    package var campaignKey: CampaignKey? { campaign.map { CampaignKey(app: app, id: $0) } }

    /// `<app>/<device>`: a device's events stay in order on one partition.
    package var kafkaKey: String { "\(app)/\(device)" }

    /// The id of an event its client gave none: the same fields give the same id, so a
    /// batch sent twice counts once. `e-` and 16 hex digits.
    package static func derivedID(
        kind: Kind, device: String, sendID: String?, campaign: String?, at: Int64, action: String?, name: String?, value: Double?, currency: String?
    ) -> String {
        let fields = [kind.rawValue, device, sendID ?? "", campaign ?? "", String(at), action ?? "", name ?? "", value.map { "\($0)" } ?? "", currency ?? ""]
        let digits = String(Campaign.spread(FNV1a.hash(fields.joined(separator: "\n"))), radix: 16)
        return "e-" + String(repeating: "0", count: 16 - digits.count) + digits
    }

    private enum CodingKeys: String, CodingKey {
        case v, id, app, kind, device, campaign, variant, sendID = "send_id", at, action, name, value, currency, receivedAt = "received_at"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.field(.id)
        app = try container.field(.app)
        kind = try container.field(.kind)
        device = try container.field(.device)
        campaign = try container.optionalField(.campaign)
        variant = try container.optionalField(.variant)
        sendID = try container.optionalField(.sendID)
        at = try container.field(.at)
        action = try container.optionalField(.action)
        name = try container.optionalField(.name)
        value = try container.optionalField(.value)
        currency = try container.optionalField(.currency)
        receivedAt = try container.optionalField(.receivedAt)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.currentVersion, forKey: .v)
        try container.encode(id, forKey: .id)
        try container.encode(app, forKey: .app)
        try container.encode(kind, forKey: .kind)
        try container.encode(device, forKey: .device)
        try container.encodeIfPresent(campaign, forKey: .campaign)
        try container.encodeIfPresent(variant, forKey: .variant)
        try container.encodeIfPresent(sendID, forKey: .sendID)
        try container.encode(at, forKey: .at)
        try container.encodeIfPresent(action, forKey: .action)
        try container.encodeIfPresent(name, forKey: .name)
        try container.encodeIfPresent(value, forKey: .value)
        try container.encodeIfPresent(currency, forKey: .currency)
        try container.encodeIfPresent(receivedAt, forKey: .receivedAt)
    }

    /// The record's own rules; whether its device, campaign and send id exist is the
    /// reader's to check against the store.
    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(id, field: "id")
        try Rules.identifier(app, field: "app")
        try Rules.identifier(device, field: "device")
        if let campaign { try Rules.identifier(campaign, field: "campaign") }
        if let variant { try Rules.identifier(variant, field: "variant") }
        try Rules.epochMillis(at, field: "at")
        if let receivedAt { try Rules.epochMillis(receivedAt, field: "received_at") }
        if let sendID {
            guard EngagementMarker.isSendID(sendID) else {
                throw .invalidField("send_id", "must be the 16 lowercase hex digits of the push's marker, got \(Quote.clip(sendID, max: 40))")
            }
            guard campaign != nil else { throw .invalidField("campaign", "a send_id comes with its campaign: send both fields of the marker") }
        } else if kind.needsSendID {
            throw .invalidField("send_id", "a \(kind.rawValue) event is about one push: give the send_id of its marker")
        }
        if kind == .action {
            guard let action else { throw .invalidField("action", "an action event names the action's identifier") }
            try Rules.identifier(action, field: "action")
        } else if action != nil {
            throw .invalidField("action", "only action events name an action")
        }
        if kind == .custom {
            guard let name else { throw .invalidField("name", "a custom event has a name") }
            try Rules.identifier(name, field: "name")
        } else if name != nil {
            throw .invalidField("name", "only custom events have a name")
        }
        if kind != .converted, value != nil || currency != nil {
            throw .invalidField(value != nil ? "value" : "currency", "only converted events have a value and currency")
        }
        if let value, !(value.isFinite && value >= 0 && value <= 1e12) {
            throw .invalidField("value", "must be a number from 0 to 1e12, got \(value)")
        }
        if let currency {
            guard value != nil else { throw .invalidField("currency", "comes with a value") }
            guard currency.utf8.count == 3, currency.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else {
                throw .invalidField("currency", "must be an ISO 4217 code of three capital letters, got \(Quote.clip(currency, max: 20))")
            }
        }
    }
}

extension EngagementEvent {
    /// What the generic encoder writes, by hand: the API writes every event it takes, and
    /// `JSONEncoder` was 15 % of its CPU taking them (scripts/bench-events). A value is
    /// written as that encoder writes a Double: its shortest form, without a trailing `.0`.
    package var canonicalJSON: [UInt8]? {
        var out = CanonicalWriter(capacity: 160 + id.utf8.count + app.utf8.count + device.utf8.count + (campaign?.utf8.count ?? 0))
        out.literal("{")
        if let action { out.literal(#""action":"#); out.string(action); out.literal(",") }
        out.literal(#""app":"#); out.string(app)
        out.literal(#","at":"#); out.integer(at)
        if let campaign { out.literal(#","campaign":"#); out.string(campaign) }
        if let currency { out.literal(#","currency":"#); out.string(currency) }
        out.literal(#","device":"#); out.string(device)
        out.literal(#","id":"#); out.string(id)
        out.literal(#","kind":"#); out.string(kind.rawValue)
        if let name { out.literal(#","name":"#); out.string(name) }
        if let receivedAt { out.literal(#","received_at":"#); out.integer(receivedAt) }
        if let sendID { out.literal(#","send_id":"#); out.string(sendID) }
        out.literal(#","v":"#); out.integer(Self.currentVersion)
        if let value {
            // Not a value `validate` lets through; the generic encoder then has it.
            guard value.isFinite else { return nil }
            var text = value.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            out.literal(#","value":"#); out.text(text)
        }
        if let variant { out.literal(#","variant":"#); out.string(variant) }
        out.literal("}")
        return out.bytes
    }

    /// Reads back exactly what `MessageCodec.encode` writes for an event (sorted keys, no
    /// whitespace, strings without escapes), validated; nil for any other spelling, which
    /// the generic decoder then reads. The events role meets this form on every record the
    /// API wrote, and `JSONDecoder` cost it 35-80 µs per record.
    package init?(canonicalJSON bytes: UnsafeRawBufferPointer) {
        var reader = CanonicalReader(bytes: bytes)
        guard reader.literal("{"), let action = reader.optionalMember(#""action":"#),
              reader.literal(action == nil ? #""app":"# : #","app":"#), let app = reader.optionalString() ?? nil,
              reader.literal(#","at":"#), let at = reader.integer(),
              let campaign = reader.optionalMember(#","campaign":"#),
              let currency = reader.optionalMember(#","currency":"#),
              reader.literal(#","device":"#), let device = reader.optionalString() ?? nil,
              reader.literal(#","id":"#), let id = reader.optionalString() ?? nil,
              reader.literal(#","kind":"#), let kind = (reader.optionalString() ?? nil).flatMap(Kind.init(rawValue:)),
              let name = reader.optionalMember(#","name":"#)
        else { return nil }
        var receivedAt: Int64?
        if reader.literal(#","received_at":"#) {
            guard let given = reader.integer() else { return nil }
            receivedAt = given
        }
        guard let sendID = reader.optionalMember(#","send_id":"#),
              reader.literal(#","v":"#), reader.integer() == Int64(Self.currentVersion)
        else { return nil }
        var value: Double?
        if reader.literal(#","value":"#) {
            guard let given = reader.number() else { return nil }
            value = given
        }
        guard let variant = reader.optionalMember(#","variant":"#), reader.literal("}"), reader.atEnd else { return nil }
        self.init(
            id: id, app: app, kind: kind, device: device, campaign: campaign, variant: variant, sendID: sendID, at: at,
            action: action, name: name, value: value, currency: currency, receivedAt: receivedAt)
        guard (try? validate()) != nil else { return nil }
    }
}
