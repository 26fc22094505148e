/// Which of a device's tokens a push is addressed to. APNs issues a different token for
/// each kind of push: the app's remote-notification token serves alert and background
/// pushes, PushKit issues a VoIP token, ActivityKit a push-to-start token per attributes
/// type and an update token per running activity, WidgetKit one for widgets, and so on.
/// A token sent with another kind's topic is answered 400 `DeviceTokenNotForTopic`, so a
/// push goes only to a token of its own kind, and a rejection says something only about
/// the token that was sent.
package enum APNsTokenKind: String, Sendable, CaseIterable, Codable {
    /// `registerForRemoteNotifications`: alert and background pushes. An MDM app's devices
    /// register their MDM token here too (its topic is the MDM certificate's, no suffix).
    case alert
    /// PushKit's VoIP token.
    case voip
    /// ActivityKit's push-to-start token, one per attributes type.
    case liveActivityStart = "liveactivity_start"
    /// A running activity's update token, one per activity; short-lived.
    case liveActivityUpdate = "liveactivity_update"
    /// WidgetKit's token for widget reloads.
    case widgets
    /// Controls (Control Center) reloads.
    case controls
    /// watchOS complications (PushKit).
    case complication
    /// File provider change signals (PushKit).
    case fileprovider
    /// The location push service extension's token.
    case location
    /// The Push to Talk framework's token.
    case pushtotalk

    /// The kind a push of `pushType` is sent to. A Live Activity push is for a running
    /// activity unless it starts one (`event: start`).
    package init(pushType: APNsPushType, startsActivity: Bool = false) {
        switch pushType {
        case .alert, .background, .mdm: self = .alert
        case .voip: self = .voip
        case .liveactivity: self = startsActivity ? .liveActivityStart : .liveActivityUpdate
        case .widgets: self = .widgets
        case .controls: self = .controls
        case .complication: self = .complication
        case .fileprovider: self = .fileprovider
        case .location: self = .location
        case .pushtotalk: self = .pushtotalk
        }
    }

    /// The outcome reason of a device that has no token of the kind a push needs: it is
    /// skipped without a request.
    package static let missingTokenReason = "no_token_for_push_type"
}
