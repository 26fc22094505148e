import Foundation
import PushfanSupport

/// A rich-push template an app keeps by name (Notificare's Rich Push Templates): the parts
/// of a notification that stay the same across campaigns, its category, rich media, thread,
/// hidden-preview summary, interruption level and actions. A campaign names it in
/// `notification.template`; its own `aps` keys, actions and data win over the template's.
package struct NotificationTemplate: Hashable, Sendable, Codable {
    package var category: String?
    /// `mutable-content: 1`: the app's notification service extension may change the push
    /// (download `media_url`). Set by itself when there is a media URL.
    package var mutableContent: Bool?
    /// Rich media for the service extension to attach, sent as the payload key `media_url`.
    package var mediaURL: String?
    package var threadID: String?
    /// The hidden-preview summary: "3 more notifications from `summary_arg`".
    package var summaryArg: String?
    package var summaryArgCount: Int?
    package var interruptionLevel: String?
    package var actions: [Campaign.Action]

    /// The payload key of `media_url`.
    package static let mediaURLKey = "media_url"
    /// Longest media URL accepted.
    package static let maxMediaURLBytes = 2_048

    package init(
        category: String? = nil, mutableContent: Bool? = nil, mediaURL: String? = nil, threadID: String? = nil, summaryArg: String? = nil,
        summaryArgCount: Int? = nil, interruptionLevel: String? = nil, actions: [Campaign.Action] = []
    ) {
        (self.category, self.mutableContent, self.mediaURL, self.threadID) = (category, mutableContent, mediaURL, threadID)
        (self.summaryArg, self.summaryArgCount, self.interruptionLevel, self.actions) = (summaryArg, summaryArgCount, interruptionLevel, actions)
    }

    private enum CodingKeys: String, CodingKey {
        case category, mutableContent = "mutable_content", mediaURL = "media_url", threadID = "thread_id", summaryArg = "summary_arg"
        case summaryArgCount = "summary_arg_count", interruptionLevel = "interruption_level", actions
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        category = try container.optionalField(.category)
        mutableContent = try container.optionalField(.mutableContent)
        mediaURL = try container.optionalField(.mediaURL)
        threadID = try container.optionalField(.threadID)
        summaryArg = try container.optionalField(.summaryArg)
        summaryArgCount = try container.optionalField(.summaryArgCount)
        interruptionLevel = try container.optionalField(.interruptionLevel)
        actions = try container.optionalField(.actions) ?? []
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(category, forKey: .category)
        try container.encodeIfPresent(mutableContent, forKey: .mutableContent)
        try container.encodeIfPresent(mediaURL, forKey: .mediaURL)
        try container.encodeIfPresent(threadID, forKey: .threadID)
        try container.encodeIfPresent(summaryArg, forKey: .summaryArg)
        try container.encodeIfPresent(summaryArgCount, forKey: .summaryArgCount)
        try container.encodeIfPresent(interruptionLevel, forKey: .interruptionLevel)
        if !actions.isEmpty { try container.encode(actions, forKey: .actions) }
    }

    /// Compact JSON with sorted keys: the same template always has the same bytes.
    package var canonicalJSON: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings, booleans, integers and JSONValue parameters always encode.
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }

    /// The `aps` keys the template sets.
    package var aps: [String: JSONValue] {
        var aps: [String: JSONValue] = [:]
        if let category { aps["category"] = .string(category) }
        if mutableContent == true || mediaURL != nil { aps["mutable-content"] = 1 }
        if let threadID { aps["thread-id"] = .string(threadID) }
        if let summaryArg { aps["summary-arg"] = .string(summaryArg) }
        if let summaryArgCount { aps["summary-arg-count"] = .int(Int64(summaryArgCount)) }
        if let interruptionLevel { aps["interruption-level"] = .string(interruptionLevel) }
        return aps
    }

    /// Reads and checks a template document; errors name the template's field.
    package static func decode(_ bytes: some Collection<UInt8>) throws(MessageDecodingError) -> NotificationTemplate {
        let template = try MessageCodec.decodeDocument(NotificationTemplate.self, from: Data(bytes))
        try template.validate()
        return template
    }

    /// Each field's own rules, and the template applied to a plain alert builds a payload
    /// (its actions' parameters within the size limit).
    package func validate() throws(MessageDecodingError) {
        for (field, value) in [("category", category), ("thread_id", threadID), ("summary_arg", summaryArg)] {
            if let value, value.isEmpty || value.utf8.count > 255 || value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                throw .invalidField(field, "must be 1 to 255 bytes without control characters")
            }
        }
        if let count = summaryArgCount, count < 1 {
            throw .invalidField("summary_arg_count", "must be at least 1, got \(count)")
        }
        if let level = interruptionLevel, !["passive", "active", "time-sensitive", "critical"].contains(level) {
            throw .invalidField("interruption_level", "must be passive, active, time-sensitive or critical; got \(level.debugDescription)")
        }
        if let mediaURL {
            guard mediaURL.utf8.count <= Self.maxMediaURLBytes, let url = URL(string: mediaURL), url.scheme == "https", url.host?.isEmpty == false else {
                throw .invalidField("media_url", "must be an https URL of at most \(Self.maxMediaURLBytes) bytes, got \(Quote.clip(mediaURL, max: 60))")
            }
        }
        if !actions.isEmpty && category == nil {
            throw .invalidField("actions", "needs category: the category your app registered with these action identifiers")
        }
        let probe = Campaign(
            id: "template-check", app: "template-check", audience: .devices(["d"]),
            notification: Campaign.Notification(content: Campaign.Content(defaultText: Campaign.LocalizedText(body: "template check"))))
        do {
            try probe.applying(self).validateNotification(variant: nil)
        } catch {
            throw error.moved(to: error.field.hasPrefix("notification.actions") ? "actions" + error.field.dropFirst("notification.actions".count) : "")
        }
    }
}

extension Campaign {
    /// The campaign with a stored template under it, checked whole as any campaign is (its
    /// actions need a category from one or the other, the payloads fit).
    package func resolved(with template: NotificationTemplate) throws(MessageDecodingError) -> Campaign {
        let resolved = applying(template)
        try resolved.validate()
        return resolved
    }

    /// The campaign with a stored template under it: the template's `aps` keys, actions
    /// and media URL, each unless the campaign gives its own; no template named any more.
    func applying(_ template: NotificationTemplate) -> Campaign {
        var copy = self
        copy.notification.template = nil
        copy.notification.aps = template.aps.merging(notification.aps ?? [:]) { _, own in own }
        if notification.actions.isEmpty { copy.notification.actions = template.actions }
        if let mediaURL = template.mediaURL, notification.data?[NotificationTemplate.mediaURLKey] == nil {
            copy.notification.data = (notification.data ?? [:]).merging([NotificationTemplate.mediaURLKey: .string(mediaURL)]) { own, _ in own }
        }
        return copy
    }
}
