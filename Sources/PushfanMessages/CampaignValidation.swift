import Foundation
import PushfanAPNsModel
import PushfanSupport

// MARK: - Validation

extension Campaign {
    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(id, field: "id")
        try Rules.identifier(app, field: "app")
        try validateAudience()
        try validateNotification(variant: nil)
        // Checked once the push is known good: an update reaches the tokens of one running
        // activity, and without naming it there is no device it could go to.
        if notification.tokenKind == .liveActivityUpdate {
            switch audience {
            case .activity, .activities, .channel: break
            default:
                throw .invalidField(
                    "audience",
                    "a liveactivity update or end goes to running activities' tokens or to a broadcast channel: give audience.activity (the id the app registered the activity under), audience.activities (an attributes type and attributes to match) or audience.channel")
            }
        }
        try validateVariants()
        try validateOptions()
        try validateWinner()
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
        case .activity(let id):
            try Rules.identifier(id, field: "audience.activity")
            guard notification.tokenKind == .liveActivityUpdate else {
                throw .invalidField("audience.activity", "addresses a Live Activity's update tokens: only for push_type liveactivity with aps.event update or end")
            }
        case .activities(let filter):
            try filter.validate(field: "audience.activities")
            guard notification.tokenKind == .liveActivityUpdate else {
                throw .invalidField("audience.activities", "addresses running Live Activities' update tokens: only for push_type liveactivity with aps.event update or end")
            }
        case .channel(let id):
            if let problem = BroadcastChannel.problem(withID: id) { throw .invalidField("audience.channel", problem) }
            guard notification.tokenKind == .liveActivityUpdate else {
                throw .invalidField("audience.channel", "is a broadcast channel, which carries Live Activity updates only: push_type liveactivity with aps.event update or end")
            }
            if !variants.isEmpty || holdout != 0 {
                throw .invalidField("audience.channel", "one broadcast reaches every subscriber alike: a channel campaign has no variants or holdout")
            }
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

    /// The campaign's own rules (content and data shapes) first; then every payload it can
    /// send, the default texts' and each locale's, is built by the APNs model, which owns
    /// the rules of `aps`, push types, priority and size.
    /// `variant`: the variant whose devices get it (nil for the notification as given), for
    /// the engagement marker that every payload carries and that counts against its size.
    /// The payload checks again with Notificare's keys in every push, for an app whose
    /// devices run that SDK (which the API knows and the record does not): they take about
    /// 150 bytes of the limit.
    package func validatePayloads(notificareApplication application: String) throws(MessageDecodingError) {
        guard EngagementMarker.carried(by: notification.pushType) else { return }
        try checkPayloads(variant: nil, notificare: application)
        for (index, variant) in variants.enumerated() {
            try applying(variant: index).checkPayloads(variant: variant.id, notificare: application)
        }
    }

    func validateNotification(variant: String?) throws(MessageDecodingError) {
        try validateContent()
        if let name = notification.template { try Rules.identifier(name, field: "notification.template") }
        try validateTemplates()
        try validateActions()
        if let data = notification.data, data["aps"] != nil {
            throw .invalidField(
                "notification.data.aps",
                "custom data must not contain \"aps\"; put APNs keys in notification.aps")
        }
        if notification.data?[EngagementMarker.key] != nil, EngagementMarker.carried(by: notification.pushType) {
            throw .invalidField(
                "notification.data.\(EngagementMarker.key)",
                "is where every push carries Pushfan's engagement marker (campaign, variant, send id); give your key another name")
        }
        switch notification.pushType {
        case .alert:
            if notification.content?.defaultText == nil && notification.aps?["alert"] == nil {
                throw .invalidField(
                    "notification.content.default",
                    "an alert push needs default texts (for devices whose locale has no entry) or notification.aps.alert")
            }
        case .background:
            if notification.content != nil {
                throw .invalidField("notification.content", "a background push cannot show texts; remove content")
            }
        default:
            break
        }
        do {
            // `aps` as given, before a locale's texts replace its alert.
            _ = try APNsPayload.APS(json: notification.aps ?? [:])
        } catch {
            throw Self.refusal(error, locale: nil)
        }
        try checkPayloads(variant: variant, notificare: nil)
    }

    /// Each locale's payload, with the marker (and Notificare's keys for an app on that
    /// SDK), is one APNs accepts.
    private func checkPayloads(variant: String?, notificare application: String?) throws(MessageDecodingError) {
        let locales: [String?] = [nil] + (notification.content?.locales.keys.sorted() ?? []).map { Optional($0) }
        for locale in locales {
            let notificare = application.map { NotificareMarker(application: $0, campaign: id, variant: variant) }
            do {
                _ = try APNsPreparedPayload(campaign: self, locale: locale, marker: EngagementMarker(campaign: id, variant: variant, notificare: notificare))
            } catch {
                throw Self.refusal(error, locale: locale)
            }
        }
    }

    /// What the APNs model refused, named by the campaign field that holds it.
    private static func refusal(_ error: APNsRequestError, locale: String?) -> MessageDecodingError {
        guard let field = error.field else {
            let whole = locale.map { JSONPath.join("notification.content.locales", $0) } ?? "notification"
            let which = locale.map { "for locale \($0)" } ?? "with the default texts"
            let reason = "the payload \(which) cannot be sent: \(error.description)"
            return error.code == "payload_too_large" ? .payloadTooLarge(whole, reason) : .invalidField(whole, reason)
        }
        let campaignField: String = switch field {
        case "apns-priority": "options.priority"
        case "apns-expiration": "options.expiration"
        case "apns-collapse-id": "options.collapse_id"
        case "mdm": "notification.data.mdm"
        default: field.hasPrefix("aps") ? "notification." + field : field
        }
        return .invalidField(campaignField, error.code == "push_type_rule" ? error.description : error.detail)
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

    /// Priority is checked with the payloads; expiration and collapse id by the APNs
    /// model's header rules.
    private func validateOptions() throws(MessageDecodingError) {
        do {
            _ = try APNsNotification.check(APNsNotification.Expiration(epochSeconds: options.expiration))
            if let collapseID = options.collapseID { try APNsNotification.checkCollapseID(collapseID) }
        } catch {
            throw Self.refusal(error, locale: nil)
        }
        if let sendAt = options.sendAt { try Rules.epochMillis(sendAt, field: "options.send_at") }
        if options.sendAt != nil && options.localTime != nil {
            throw .invalidField("options.local_time", "cannot be given with options.send_at; choose one moment for everyone (send_at) or each device's own clock (local_time)")
        }
        if options.late != nil && options.localTime == nil {
            throw .invalidField("options.late", "applies only to a campaign with options.local_time")
        }
        if let rate = options.rate, rate <= 0 {
            throw .invalidField("options.rate", "must be more than 0 sends per second, got \(rate)")
        }
        if let window = options.attributionWindow, !(Self.minAttributionWindow...Self.maxAttributionWindow).contains(window) {
            throw .invalidField(
                "options.attribution_window_s",
                "must be \(Self.minAttributionWindow) to \(Self.maxAttributionWindow) seconds (a minute to 30 days), got \(window)")
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
