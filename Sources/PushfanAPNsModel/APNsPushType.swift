import PushfanSupport

/// The `apns-push-type` header values. The header must match the payload and
/// the topic suffix, or APNs rejects the request (`InvalidPushType`).
package enum APNsPushType: String, Codable, Sendable, CaseIterable {
    /// Visible notification: alert, sound, badge.
    case alert
    /// Silent wake-up: `content-available: 1`, no alert, sound or badge,
    /// priority 5.
    case background
    /// PushKit VoIP call.
    case voip
    /// watchOS complication update.
    case complication
    /// File provider change signal.
    case fileprovider
    /// MDM check-in request.
    case mdm
    /// Location query (location push service extension).
    case location
    /// Live Activity update.
    case liveactivity
    /// Push to Talk.
    case pushtotalk
    /// Widget reload.
    case widgets
    /// Controls (Control Center) reload.
    case controls

    package init(from decoder: any Decoder) throws {
        self = try StringEnum.decode(Self.self, from: decoder, what: "push type")
    }

    /// What APNs expects appended to the bundle id in `apns-topic`.
    package var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: return ""
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .location: return ".location-query"
        case .liveactivity: return ".push-type.liveactivity"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// Largest payload APNs accepts for this push type, in bytes.
    package var maxPayloadBytes: Int { self == .voip ? 5_120 : 4_096 }

    /// The one `apns-priority` APNs accepts for this push type, when it allows only one:
    /// 5 for background pushes (APNs answers anything else with BadPriority).
    package var requiredPriority: Int? { self == .background ? 5 : nil }

    /// The `apns-priority` a request of this type gets when none is given: the required
    /// one, else 10 (APNs' own default).
    package var defaultPriority: Int { requiredPriority ?? 10 }
}
