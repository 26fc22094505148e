import PushfanSupport

/// What Notificare's iOS SDK needs in a push to take it as its own, for apps whose devices
/// run that SDK (they registered through the Notificare-compatible calls): `x-sender:
/// notificare`, the application's id as `/application/info` gives it (`x-application`), and
/// the notification's id under `id` (which the SDK fetches, `GET /notification/{id}`, and
/// reports opens with) and `notificationId` (which it reports receipts with), plus
/// `notificationType` and, for rich media, `attachment` for its fallback when the fetch
/// fails (docs/api.md, "Notificare's SDK").
///
/// A Notificare notification id names a campaign and its variant: `<campaign>` or
/// `<campaign>~<variant>`. `~` is in no identifier, so the id reads back unambiguously, and
/// an event the SDK reports with it and its device id gives the push's send id.
package struct NotificareMarker: Sendable, Hashable {
    /// The app's id: what the SDK compares `x-application` with.
    package let application: String
    package let notificationID: String

    /// The type of every notification Pushfan sends: an alert the SDK shows as it came.
    package static let notificationType = "re.notifica.notification.Alert"

    package init(application: String, campaign: String, variant: String?) {
        self.application = application
        notificationID = Self.notificationID(campaign: campaign, variant: variant)
    }

    package static func notificationID(campaign: String, variant: String?) -> String {
        variant.map { "\(campaign)~\($0)" } ?? campaign
    }

    /// The campaign and variant a notification id names; nil when it names none.
    package static func campaign(ofNotificationID id: String) -> (campaign: String, variant: String?)? {
        let parts = id.split(separator: "~", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(parts.count), parts.allSatisfy(Rules.isIdentifier) else { return nil }
        return (parts[0], parts.count == 2 ? parts[1] : nil)
    }

    /// The payload's top-level keys. `mediaURL`: the push's rich media, which the SDK's
    /// service extension attaches.
    package func keys(mediaURL: String?) -> [String: JSONValue] {
        var keys: [String: JSONValue] = [
            "x-sender": "notificare", "x-application": .string(application), "id": .string(notificationID),
            "notificationId": .string(notificationID), "notificationType": .string(Self.notificationType),
        ]
        if let mediaURL { keys["attachment"] = ["mimeType": .string(Self.mimeType(of: mediaURL)), "uri": .string(mediaURL)] }
        return keys
    }

    /// The media type a URL's file extension names (the SDK attaches by it); images are
    /// what rich pushes carry most, so an unknown extension is taken for a JPEG.
    package static func mimeType(of url: String) -> String {
        let path = url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
        let fileExtension = path.split(separator: "/").last?.split(separator: ".").dropFirst().last?.lowercased() ?? ""
        switch fileExtension {
        case "png": return "image/png"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "heic": return "image/heic"
        case "mp4", "m4v": return "video/mp4"
        case "mov": return "video/quicktime"
        case "mp3": return "audio/mpeg"
        case "m4a": return "audio/mp4"
        case "wav": return "audio/wav"
        default: return "image/jpeg"
        }
    }
}
