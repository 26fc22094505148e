import PushfanMessages
import PushfanSegments

/// What a campaign names that must already exist for it to reach anyone: its broadcast
/// channel, the Live Activity attributes type it starts or updates. A record can be valid and
/// still name something the app never made; that is the producer's mistake, refused with the
/// field it names (422 from the API, a dead letter from the planner) rather than sent to no one.
package struct MissingReference: Error, Equatable, CustomStringConvertible {
    /// `unknown_channel` or `unknown_attributes_type`.
    package let code: String
    package let field: String
    package let reason: String

    package var description: String { "\(field): \(reason)" }
}

extension DeviceStore {
    /// The first thing `campaign` names that its app does not have; nil when all is there.
    package func missingReference(in campaign: Campaign) async throws(StoreError) -> MissingReference? {
        let app = campaign.app
        if case .channel(let id) = campaign.audience, try await channels.get(app: app, id: id) == nil {
            return MissingReference(
                code: "unknown_channel", field: "audience.channel",
                reason: "app \(app) has no broadcast channel \(id.debugDescription) (POST /v1/apps/\(app)/channels makes one)")
        }
        if case .activities(let filter) = campaign.audience,
           try await !tokens.anyHolder(app: app, kind: .liveActivityUpdate, attributesType: filter.attributesType) {
            return MissingReference(
                code: "unknown_attributes_type", field: "audience.activities.attributes_type",
                reason: "no device of app \(app) registered an update token of attributes type \(filter.attributesType.debugDescription)")
        }
        if campaign.notification.tokenKind == .liveActivityStart, let type = campaign.notification.aps?["attributes-type"]?.stringValue,
           try await !tokens.anyHolder(app: app, kind: .liveActivityStart, attributesType: type) {
            return MissingReference(
                code: "unknown_attributes_type", field: "notification.aps.attributes-type",
                reason: "no device of app \(app) registered a push-to-start token of attributes type \(type.debugDescription)")
        }
        return nil
    }
}

extension DeviceStore {
    /// What the store keeps of an accepted campaign: its record, the stored template it names
    /// as it is now, checked under the campaign (the campaign's actions need a category, its
    /// payloads must fit), and the saved segment it names as it is now. Senders use these
    /// copies, so a template or segment changed later reaches only campaigns accepted after
    /// the change. Throws `MissingReference` for a template or saved segment the app does not
    /// have (`unknown_template`, `unknown_segment`), a saved segment that no longer parses
    /// (`invalid_segment`), or a template the campaign cannot use (the template's own code).
    package func definition(of campaign: Campaign) async throws -> CampaignDefinition {
        let record = String(decoding: MessageCodec.encode(campaign), as: UTF8.self)
        var template: String?
        if let name = campaign.notification.template {
            guard let stored = try await templates.get(app: campaign.app, name: name) else {
                throw MissingReference(
                    code: "unknown_template", field: "notification.template",
                    reason: "app \(campaign.app) has no template \(name.debugDescription) (pushfan templates set)")
            }
            do { _ = try campaign.resolved(with: stored) } catch {
                throw MissingReference(code: error.code, field: error.field.isEmpty ? "notification.template" : error.field, reason: "with template \(name): \(error.description)")
            }
            template = NotificationTemplates.document(stored)
        }
        var segment: String?
        if case .named(let name) = campaign.audience {
            let text = try await savedSegment(app: campaign.app, name: name)
            _ = try Self.parse(text, field: "audience.named", origin: "saved segment \(name)")
            segment = text
        }
        return CampaignDefinition(record: record, template: template, segment: segment)
    }

    /// The segment a campaign's devices are read with, decided in this one place for the
    /// planner, the senders and the demo: its own expression (`audience.segment`), or its
    /// saved segment's as `definition` froze it (`audience.named`; a campaign stored before
    /// segments were frozen reads the saved one as it is now); nil for every other audience.
    /// Throws `MissingReference` (`unknown_segment`, `invalid_segment`).
    package func segment(of campaign: Campaign, definition: CampaignDefinition?) async throws -> SegmentExpression? {
        switch campaign.audience {
        case .segment(let text):
            return try Self.parse(text, field: "audience.segment", origin: nil)
        case .named(let name):
            let text: String
            if let frozen = definition?.segment { text = frozen } else { text = try await savedSegment(app: campaign.app, name: name) }
            return try Self.parse(text, field: "audience.named", origin: "saved segment \(name)")
        case .devices, .activity, .activities, .channel:
            return nil
        }
    }

    private func savedSegment(app: String, name: String) async throws -> String {
        guard let text = try await audience.savedSegment(app: app, name: name) else {
            throw MissingReference(
                code: "unknown_segment", field: "audience.named", reason: "app \(app) has no saved segment \(name.debugDescription)")
        }
        return text
    }

    /// `origin` names a saved segment in the reason (the field names the campaign's own).
    /// Untyped `throws`: declared `throws(MissingReference)`, the release build's compiler
    /// crashed splitting `segment(of:definition:)`, its async caller.
    private static func parse(_ text: String, field: String, origin: String?) throws -> SegmentExpression {
        do { return try SegmentParser.parse(text) } catch {
            throw MissingReference(code: "invalid_segment", field: field, reason: origin.map { "\($0): \(error)" } ?? "\(error)")
        }
    }
}
