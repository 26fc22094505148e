import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages

/// Which token each push type is addressed to: the remote-notification token only for
/// alert, background and MDM pushes; every other push type to a token of its own.
@Suite struct APNsTokenKindTests {
    @Test(arguments: Campaign.PushType.allCases)
    func everyPushTypeHasItsKind(_ pushType: Campaign.PushType) {
        let kind = APNsTokenKind(pushType: pushType)
        let expected: APNsTokenKind = switch pushType {
        case .alert, .background, .mdm: .alert
        case .voip: .voip
        case .liveactivity: .liveActivityUpdate
        case .widgets: .widgets
        case .controls: .controls
        case .complication: .complication
        case .fileprovider: .fileprovider
        case .location: .location
        case .pushtotalk: .pushtotalk
        }
        #expect(kind == expected)
    }

    @Test func aLiveActivityStartGoesToPushToStartTokens() {
        var notification = Campaign.Notification(pushType: .liveactivity, aps: ["event": "start", "timestamp": 1, "content-state": [:]])
        #expect(notification.tokenKind == .liveActivityStart)
        notification.aps?["event"] = "end"
        #expect(notification.tokenKind == .liveActivityUpdate)
        #expect(Campaign.Notification(pushType: .voip).tokenKind == .voip)
        #expect(Campaign.Notification().tokenKind == .alert)
    }
}
