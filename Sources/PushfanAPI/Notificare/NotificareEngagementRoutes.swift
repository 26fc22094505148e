import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTemplates
import PushfanTopics

/// What Notificare's iOS SDK asks about pushes, at its paths and in its terms (HTTP Basic
/// with the app's key and secret): the notification it opens (`GET /notification/{id}`),
/// the events it reports (`POST /event`) and the actions it replies with (`POST /reply`).
/// A push of an app whose devices run that SDK carries its notification id
/// (`NotificareMarker`); an event naming it is counted as the native events call counts it
/// (the send id follows from the campaign and the device), so both SDKs' apps get the
/// same stats.
enum NotificareEngagementRoutes {
    /// Notificare's event types that Pushfan counts, and as what.
    static let counted: [String: EngagementEvent.Kind] = [
        "re.notifica.event.notification.Receive": .received,
        "re.notifica.event.notification.Open": .opened,
    ]
    /// Custom events: the type is this prefix and the event's name.
    static let customPrefix = "re.notifica.event.custom."

    static func add(to router: inout Router<Route>, store: DeviceStore, writer: ResultsWriter) {
        let roles: Set<AppRole> = [.application, .master]
        router.add("GET", "/notification/{notification}", Route(roles: roles) { call in
            let app = call.parameter("app")
            let id = call.parameter("notification")
            guard let (campaignID, variant) = NotificareMarker.campaign(ofNotificationID: id) else {
                throw APIError(404, "not_found", "notification not found: \(String(id.prefix(60)).debugDescription) is not an id Pushfan gave a push")
            }
            let key = CampaignKey(app: app, id: campaignID)
            guard let definition = try await store.campaigns.stored(key), let createdAt = try await store.campaigns.createdAt(key) else {
                throw APIError(404, "not_found", "notification not found: app \(app) has no campaign \(campaignID)")
            }
            var campaign = try definition.campaign(key)
            if let variant {
                guard let index = campaign.variants.firstIndex(where: { $0.id == variant }) else {
                    throw APIError(404, "not_found", "notification not found: campaign \(campaignID) has no variant \(variant)")
                }
                campaign = campaign.applying(variant: index)
            }
            let locale = call.request.header("accept-language").flatMap(preferredLocale)
            var shown = campaign.notification
            if shown.isPersonalised {
                // The SDK asks without naming its device: each placeholder gets its default.
                var templates = TemplateCache()
                shown = shown.personalised(for: TemplateDevice(id: "", locale: locale), locale: locale, templates: &templates)
            }
            return .json(200, ["notification": notification(shown, id: id, locale: locale, createdAt: createdAt)])
        })

        router.add("POST", "/event", Route(roles: roles) { call in
            let app = call.parameter("app")
            let body = try APIService.jsonObject(call.request)
            guard case .string(let type)? = body["type"], !type.isEmpty else {
                throw APIError(400, "invalid_input", "type: required, the event's type (re.notifica.event.…)", field: "type")
            }
            try checkOptional(body, strings: ["notification", "sessionID", "userID"])
            let at = try timestamp(body)
            let device = try text(body, "deviceID", required: true)!
            let kind: EngagementEvent.Kind
            var name: String?
            if let known = counted[type] {
                kind = known
            } else if type.hasPrefix(customPrefix) {
                kind = .custom
                name = String(type.dropFirst(customPrefix.count))
            } else {
                // Application, session, geo and in-app events, and Influenced (it follows an
                // Open of the same push, which is what is counted): taken, not kept.
                return .json(202, ["message": "event is being processed"])
            }
            var campaign: (campaign: String, variant: String?)?
            if kind != .custom || body["notification"] != nil {
                campaign = try named(try text(body, "notification", required: kind != .custom)!)
            }
            let event = try engagementEvent(
                kind: kind, app: app, device: device, campaign: campaign, action: nil, name: name, at: at, identifiedAt: at, receivedAt: store.clock.wallMillis)
            try await take(event, store: store, writer: writer)
            return .json(202, ["message": "event is being processed"])
        })

        // A reply to an action: Pushfan's actions are identifiers, and the notification the
        // SDK fetched gives each one as its label.
        router.add("POST", "/reply", Route(roles: roles) { call in
            let app = call.parameter("app")
            let body = try APIService.jsonObject(call.request)
            try checkOptional(body, strings: ["userID"])
            let device = try text(body, "deviceID", required: true)!
            let notification = try text(body, "notification", required: true)!
            let label = try text(body, "label", required: true)!
            let campaign = try named(notification)
            let key = CampaignKey(app: app, id: campaign.campaign)
            guard let definition = try await store.campaigns.stored(key) else {
                throw APIError(404, "not_found", "notification: app \(app) has no campaign \(campaign.campaign)", field: "notification")
            }
            guard try definition.campaign(key).notification.actions.contains(where: { $0.id == label }) else {
                throw APIError(404, "not_found", "label: notification \(notification) has no action \(String(label.prefix(60)).debugDescription)", field: "label")
            }
            // The SDK sends no time: the reply is identified without one, so a retry (a new
            // arrival time) is the same event, and a device's reply to a push counts once.
            let now = store.clock.wallMillis
            let event = try engagementEvent(kind: .action, app: app, device: device, campaign: campaign, action: label, name: nil, at: now, identifiedAt: 0, receivedAt: now)
            try await take(event, store: store, writer: writer)
            return .json(201, ["message": "reply registered"])
        })
    }

    // MARK: - Events

    /// The native event an SDK event stands for: its send id from the campaign and the
    /// device, its id derived from its fields with the time `identifiedAt` (the SDK retries
    /// with the same body, which is then the same event).
    static func engagementEvent(
        kind: EngagementEvent.Kind, app: String, device: String, campaign: (campaign: String, variant: String?)?, action: String?, name: String?, at: Int64,
        identifiedAt: Int64, receivedAt: Int64
    ) throws -> EngagementEvent {
        let sendID = campaign.map { EngagementMarker.sendID(campaign: CampaignKey(app: app, id: $0.campaign), device: device) }
        let id = EngagementEvent.derivedID(
            kind: kind, device: device, sendID: sendID, campaign: campaign?.campaign, at: identifiedAt, action: action, name: name, value: nil, currency: nil)
        let event = EngagementEvent(
            id: id, app: app, kind: kind, device: device, campaign: campaign?.campaign, variant: campaign?.variant, sendID: sendID, at: at,
            action: action, name: name, value: nil, currency: nil, receivedAt: receivedAt)
        do {
            try event.validate()
        } catch {
            throw APIError(422, "invalid_event", "\(sdkField(error.field)): \(error.reason)", field: sdkField(error.field))
        }
        return event
    }

    /// The campaign and variant a notification id names; 404 when it names none.
    private static func named(_ notification: String) throws -> (campaign: String, variant: String?) {
        guard let named = NotificareMarker.campaign(ofNotificationID: notification) else {
            throw APIError(404, "not_found", "notification not found: \(String(notification.prefix(60)).debugDescription) is not the id of a push Pushfan sent", field: "notification")
        }
        return named
    }

    /// Counts it as the native call would, or refuses it in the SDK's field names: 404 for
    /// a device or campaign the app does not have, 422 for the rest.
    private static func take(_ event: EngagementEvent, store: DeviceStore, writer: ResultsWriter) async throws {
        let now = store.clock.wallMillis
        if case .failure(let refusal)? = try await store.engagement.resolve([event], app: event.app, now: now).first {
            let field = sdkField(refusal.field)
            if refusal.field == "device_id" || refusal.field == "campaign" {
                throw APIError(404, "not_found", "\(field): \(refusal.reason)", field: field)
            }
            throw APIError(422, "invalid_event", "\(field): \(refusal.reason)", field: field)
        }
        try await writer.events([event])
    }

    /// The SDK's name of a native event's field.
    private static func sdkField(_ field: String) -> String {
        switch field {
        case "device", "device_id": "deviceID"
        case "campaign", "variant", "send_id": "notification"
        case "at": "timestamp"
        case "name": "type"
        case "action": "label"
        default: field
        }
    }

    private static func text(_ body: [String: JSONValue], _ field: String, required: Bool) throws -> String? {
        switch body[field] {
        case .string(let value)? where !value.isEmpty: return value
        case nil, .null?: if !required { return nil }
        default: break
        }
        throw APIError(400, "invalid_input", "\(field): required, a string", field: field)
    }

    /// The optional members are of their types when present: these strings, and `data` an
    /// object.
    private static func checkOptional(_ body: [String: JSONValue], strings: [String]) throws {
        for field in strings {
            switch body[field] {
            case nil, .null?, .string?: continue
            default: throw APIError(400, "invalid_input", "\(field): expected a string", field: field)
            }
        }
        switch body["data"] {
        case nil, .null?, .object?: break
        default: throw APIError(400, "invalid_input", "data: expected an object", field: "data")
        }
    }

    /// The SDK's `timestamp`, milliseconds since the epoch.
    /// Milliseconds since the epoch, from the year 1 to 9999 (the range the OpenAPI document gives).
    private static func timestamp(_ body: [String: JSONValue]) throws -> Int64 {
        let range: ClosedRange<Int64> = -62_135_596_800_000...253_402_300_799_999
        switch body["timestamp"] {
        case .int(let millis)? where range.contains(millis): return millis
        case .number(let millis)? where millis.rounded() == millis && abs(millis) < 1e15 && range.contains(Int64(millis)): return Int64(millis)
        default: throw APIError(400, "invalid_input", "timestamp: required, milliseconds since the epoch (years 1 to 9999)", field: "timestamp")
        }
    }

    // MARK: - The notification

    /// The notification as the SDK decodes it: `_id`, `type`, `time` (ISO 8601 with
    /// milliseconds), `title`, `subtitle`, `message`, `content`, `actions` (each action's
    /// identifier as its label: the app's category names it on the device), `attachments`
    /// (the rich media) and `extra` (the push's custom data).
    static func notification(_ notification: Campaign.Notification, id: String, locale: String?, createdAt: Int64) -> JSONValue {
        let text = notification.content?.text(forLocale: locale)
        let alert = notification.aps?["alert"]
        var custom = notification.custom
        custom.removeValue(forKey: Campaign.actionParamsKey)
        let media = custom[NotificationTemplate.mediaURLKey]?.stringValue
        var object: [String: JSONValue] = [
            "_id": .string(id),
            "type": .string(NotificareMarker.notificationType),
            "time": .string(isoMillis(createdAt)),
            "message": .string(text?.body ?? alert?.objectValue?["body"]?.stringValue ?? alert?.stringValue ?? ""),
            "content": [],
            "actions": .array(notification.actions.map { action in
                ["type": "re.notifica.action.Callback", "label": .string(action.id), "destructive": false, "keyboard": false, "camera": false]
            }),
            "attachments": .array(media.map { [["mimeType": .string(NotificareMarker.mimeType(of: $0)), "uri": .string($0)]] } ?? []),
            "extra": .object(custom),
        ]
        if let title = text?.title ?? alert?.objectValue?["title"]?.stringValue { object["title"] = .string(title) }
        if let subtitle = text?.subtitle ?? alert?.objectValue?["subtitle"]?.stringValue { object["subtitle"] = .string(subtitle) }
        return .object(object)
    }

    /// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`, the form the SDK parses.
    static func isoMillis(_ millis: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1_000))
    }

    /// The first language of an `Accept-Language` header (`de-CH, de;q=0.9` → `de-CH`).
    static func preferredLocale(_ header: String) -> String? {
        let first = header.split(separator: ",").first?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces) ?? ""
        return first.isEmpty || first == "*" ? nil : first
    }
}
