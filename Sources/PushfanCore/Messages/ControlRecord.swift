/// An operator's command for a running campaign. Topic `control`, Kafka key =
/// campaign id, so the latest record per campaign is its wanted state. Every
/// worker reads the whole topic.
package struct ControlRecord: VersionedMessage, Hashable {
    package static let currentVersion = 1

    package enum Action: String, Codable, Sendable, CaseIterable {
        /// Stop for good: devices not yet sent to end as `cancelled`.
        case cancel
        /// Stop sending until `resume`; nothing is lost.
        case pause
        /// Continue a paused campaign.
        case resume

        package init(from decoder: any Decoder) throws {
            self = try StringEnum.decode(Self.self, from: decoder, what: "action")
        }
    }

    /// Campaign id.
    package var campaign: String
    package var action: Action
    /// When the command was given, in milliseconds since the epoch.
    package var at: Int64

    package init(campaign: String, action: Action, at: Int64) {
        self.campaign = campaign
        self.action = action
        self.at = at
    }

    /// The campaign id.
    package var kafkaKey: String { campaign }

    private enum CodingKeys: String, CodingKey { case v, campaign, action, at }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        campaign = try container.field(.campaign)
        action = try container.field(.action)
        at = try container.field(.at)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.currentVersion, forKey: .v)
        try container.encode(campaign, forKey: .campaign)
        try container.encode(action, forKey: .action)
        try container.encode(at, forKey: .at)
    }

    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(campaign, field: "campaign")
        try Rules.epochMillis(at, field: "at")
    }
}
