import PushfanMessages
import PushfanStore
import Testing

@testable import PushfanCLI

/// What `pushfan devices repair-tokens` restores: a device invalidated only by pushes of
/// another kind's token with a wrong-topic reason; anything else leaves it invalid.
@Suite struct TokenRepairTests {
    static func campaign(_ id: String, _ notification: String) -> String {
        #"{"v":1,"id":"\#(id)","app":"shop","audience":{"segment":"locale = en_US"},"notification":\#(notification)}"#
    }
    static let voip = campaign("calls", #"{"push_type":"voip","data":{"call":"1"}}"#)
    static let widgets = campaign("scores", #"{"push_type":"widgets","aps":{"content-changed":true}}"#)
    static let alert = campaign("sale", #"{"push_type":"alert","content":{"default":{"body":"Hi"}}}"#)

    static func row(_ device: String, _ campaign: String, _ definition: String?, _ reason: String?) -> TokenInvalidation {
        TokenInvalidation(deviceID: device, campaign: campaign, definition: definition, ledgerReason: reason)
    }

    @Test func restoresOnlyDevicesInvalidatedByAnotherKind() {
        let repairs = DevicesRepairTokensCommand.repairs([
            Self.row("a", "calls", Self.voip, "DeviceTokenNotForTopic"),
            Self.row("b", "scores", Self.widgets, "BadDeviceToken"),
            Self.row("b", "calls", Self.voip, "DeviceTokenNotForTopic"),
            // An alert push's rejection is about the alert token itself.
            Self.row("c", "sale", Self.alert, "BadDeviceToken"),
            Self.row("d", "calls", Self.voip, "DeviceTokenNotForTopic"),
            Self.row("d", "sale", Self.alert, "BadDeviceToken"),
            // 410 says the app is gone from the device, whatever the topic.
            Self.row("e", "calls", Self.voip, "Unregistered"),
            // A campaign the repair cannot read is no evidence either way: left standing.
            Self.row("f", "lost", nil, "DeviceTokenNotForTopic"),
            Self.row("g", "odd", "{not json", "DeviceTokenNotForTopic"),
        ])
        #expect(repairs == [
            .init(deviceID: "a", campaign: "calls", pushType: .voip, reason: "DeviceTokenNotForTopic"),
            .init(deviceID: "b", campaign: "scores", pushType: .widgets, reason: "BadDeviceToken"),
        ])
        #expect(DevicesRepairTokensCommand.repairs([]).isEmpty)
    }
}
