import PushfanSupport

/// An operator's command for a running campaign. Topic `control`, Kafka key =
/// `<app>/<campaign>`, so the latest record per campaign is its wanted state. Every
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

    /// App key: campaign ids are named within their app.
    package var app: String
    /// Campaign id (within `app`).
    package var campaign: String
    package var action: Action
    /// When the command was given, in milliseconds since the epoch.
    package var at: Int64

    package init(campaign: CampaignKey, action: Action, at: Int64) {
        self.app = campaign.app
        self.campaign = campaign.id
        self.action = action
        self.at = at
    }

    /// The campaign's name across the system.
    package var campaignKey: CampaignKey { CampaignKey(app: app, id: campaign) }

    /// `<app>/<campaign>`.
    package var kafkaKey: String { campaignKey.stored }

    private enum CodingKeys: String, CodingKey { case v, app, campaign, action, at }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        app = try container.field(.app)
        campaign = try container.field(.campaign)
        action = try container.field(.action)
        at = try container.field(.at)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.currentVersion, forKey: .v)
        try container.encode(app, forKey: .app)
        try container.encode(campaign, forKey: .campaign)
        try container.encode(action, forKey: .action)
        try container.encode(at, forKey: .at)
    }

    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(app, field: "app")
        try Rules.identifier(campaign, field: "campaign")
        try Rules.epochMillis(at, field: "at")
    }
}
