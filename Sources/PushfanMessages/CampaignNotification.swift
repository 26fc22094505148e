import Foundation
import PushfanAPNsModel
import PushfanSupport

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

    /// The `apns-push-type` header values: the APNs model's, with their rules.
    package typealias PushType = APNsPushType

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
