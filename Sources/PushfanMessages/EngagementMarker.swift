import PushfanAPNsModel
import PushfanSupport

/// What every campaign push carries beside `aps`, so the app can report back what became of
/// it (docs/messages.md, "The engagement marker"):
/// `"pushfan": {"campaign": "<id>", "send_id": "<16 hex>", "variant": "<id>"}`, `variant`
/// only for a device in one of the campaign's variants. Its bytes count against the payload
/// limit like any other key. MDM pushes have no room for it (their body is Apple's).
package struct EngagementMarker: Sendable, Hashable {
    /// The custom key it travels under; a campaign's own data may not use it.
    package static let key = "pushfan"
    /// Hex digits in a send id.
    package static let sendIDLength = 16

    /// The campaign's id within its app.
    package let campaign: String
    /// The device's variant (nil for a campaign without variants).
    package let variant: String?
    /// For an app whose devices run Notificare's SDK, the keys it looks for beside ours.
    package let notificare: NotificareMarker?

    package init(campaign: String, variant: String?, notificare: NotificareMarker? = nil) {
        self.campaign = campaign
        self.variant = variant
        self.notificare = notificare
    }

    /// The id of the push of `campaign` to `device`, 16 hex digits: the campaign's tag (8,
    /// `campaignTag`) and a check of the device within it (8). The same for every attempt (a
    /// retry, or a re-send after a worker's crash, is the same push); with the device's id
    /// it names its campaign among the app's and is checked against both.
    package static func sendID(campaign: CampaignKey, device: String) -> String {
        SendIDs(campaign).sendID(device: device)
    }

    /// The first half of its campaign's send ids.
    package static func campaignTag(_ campaign: CampaignKey) -> UInt32 {
        UInt32(truncatingIfNeeded: Campaign.spread(FNV1a.hash("tag\n\(campaign.stored)")))
    }

    /// One campaign's send ids, what they share worked out once: a sender makes one per
    /// device, so the campaign's tag and the hash of its part of each device's check are
    /// not made again for each.
    package struct SendIDs: Sendable {
        private let tag: UInt32
        /// FNV-1a of `send\n<campaign>\n`, the part of every device's check before its id.
        private let checkPrefix: UInt64

        package init(_ campaign: CampaignKey) {
            tag = EngagementMarker.campaignTag(campaign)
            checkPrefix = FNV1a.hash("send\n\(campaign.stored)\n")
        }

        package func sendID(device: String) -> String {
            let check = UInt32(truncatingIfNeeded: Campaign.spread(FNV1a.hash(device, after: checkPrefix)))
            let value = UInt64(tag) << 32 | UInt64(check)
            return String(unsafeUninitializedCapacity: EngagementMarker.sendIDLength) { digits in
                for index in 0..<EngagementMarker.sendIDLength {
                    let nibble = UInt8(truncatingIfNeeded: value >> (60 - 4 * index)) & 0xF
                    digits[index] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
                }
                return EngagementMarker.sendIDLength
            }
        }
    }

    /// The campaign tag a well-formed send id starts with; nil for anything else.
    package static func campaignTag(ofSendID text: String) -> UInt32? {
        guard isSendID(text) else { return nil }
        return UInt32(text.prefix(8), radix: 16)
    }

    /// True when `text` has a send id's shape: 16 lowercase hex digits.
    package static func isSendID(_ text: String) -> Bool {
        text.utf8.count == sendIDLength && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// Whether pushes of `pushType` carry it.
    package static func carried(by pushType: Campaign.PushType) -> Bool { pushType != .mdm }

    /// The marker as a payload holds it, its send id `fill` repeated: the payload is built
    /// once per locale and variant, and each device's send id written over the fill.
    func jsonValue(sendIDFill fill: Character) -> JSONValue {
        var members: [String: JSONValue] = [
            "campaign": .string(campaign), "send_id": .string(String(repeating: fill, count: Self.sendIDLength)),
        ]
        if let variant { members["variant"] = .string(variant) }
        return .object(members)
    }
}
