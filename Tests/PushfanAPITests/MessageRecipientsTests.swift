import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport
import Testing

@testable import PushfanAPI

/// A transactional message's recipients: the shape refused with the field at fault, and the
/// plan from what the store found: each active device once, a report per recipient.
@Suite struct MessageRecipientsTests {
    private func parse(_ json: String) throws -> MessageRecipients {
        try MessageRecipients.parse(try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)))
    }

    private func refusal(_ json: String) -> APIError? {
        do {
            _ = try parse(json)
            return nil
        } catch {
            return error as? APIError
        }
    }

    @Test("users, aliases by name and devices are read in order")
    func parsesEveryKind() throws {
        let recipients = try parse(#"{"users":["42","43"],"aliases":{"crm_id":["C-1","C-2"],"email":["a@example.com"]},"devices":["d1"]}"#)
        #expect(recipients.users == ["42", "43"] && recipients.devices == ["d1"] && recipients.count == 6)
        #expect(recipients.aliasValues == ["crm_id": ["C-1", "C-2"], "email": ["a@example.com"]])
    }

    @Test("what is wrong is named: none, 1,001, an unknown kind, a non-string, a bad alias name, a bad device id")
    func refusesBadShapes() throws {
        #expect(refusal(#"{}"#)?.code == "no_recipients")
        #expect(refusal(#"[]"#)?.field == "recipients")
        let many = (0...1_000).map { "\"u\($0)\"" }.joined(separator: ",")
        let tooMany = refusal(#"{"users":[\#(many)]}"#)
        #expect(tooMany?.status == 400 && tooMany?.code == "too_many_recipients" && tooMany?.message.contains("got 1001") == true)
        #expect(refusal(#"{"segments":["x"]}"#)?.field == "recipients.segments")
        #expect(refusal(#"{"users":["42",7]}"#)?.field == "recipients.users[1]")
        #expect(refusal(#"{"users":""}"#)?.field == "recipients.users")
        #expect(refusal(#"{"aliases":{"CRM":["x"]}}"#)?.field == "recipients.aliases.CRM[0]")
        #expect(refusal(#"{"aliases":{"crm_id":"x"}}"#)?.field == "recipients.aliases.crm_id")
        #expect(refusal(#"{"devices":[""]}"#)?.field == "recipients.devices[0]")
        #expect(try parse(#"{"users":[\#((0..<1_000).map { "\"u\($0)\"" }.joined(separator: ","))]}"#).count == 1_000)
    }

    @Test("a user's invalid device is reported and not sent; a device reached twice is sent once; unknown users, aliases and devices are reported")
    func plansFromTheResolution() throws {
        let recipients = try parse(#"{"users":["42","nobody"],"aliases":{"crm_id":["C-42","C-0"]},"devices":["phone","other-apps"]}"#)
        var resolution = Users.Resolution()
        resolution.userDevices["42"] = [
            .init(deviceID: "phone", rowKey: 7, status: .active), .init(deviceID: "tablet", rowKey: 3, status: .active),
            .init(deviceID: "old", rowKey: 9, status: .invalid),
        ]
        resolution.aliasUsers["crm_id"] = ["C-42": "42"]
        resolution.devices["phone"] = .init(deviceID: "phone", rowKey: 7, status: .active)
        let plan = recipients.plan(resolution, tokenKind: .alert)
        #expect(plan.rowKeys == [3, 7] && plan.deviceIDs == ["tablet", "phone"])
        let report = plan.report.map(\.compactJSON)
        #expect(report == [
            #"{"devices":["phone","tablet"],"not_sent":[{"device":"old","status":"invalid"}],"user":"42"}"#,
            #"{"error":"unknown_user","message":"no device of the app names user nobody","user":"nobody"}"#,
            #"{"alias":{"crm_id":"C-42"},"devices":["phone","tablet"],"not_sent":[{"device":"old","status":"invalid"}],"user":"42"}"#,
            #"{"alias":{"crm_id":"C-0"},"error":"unknown_alias","message":"no user of the app has crm_id C-0"}"#,
            #"{"device":"phone","devices":["phone"]}"#,
            #"{"device":"other-apps","error":"unknown_device","message":"the app has no device other-apps"}"#,
        ])
    }

    @Test("a VoIP message reaches a user's device whose alert token APNs refused (that says nothing of its VoIP token), not an unregistered one")
    func otherKindsReachInvalidAlertTokens() throws {
        let recipients = try parse(#"{"users":["42"]}"#)
        var resolution = Users.Resolution()
        resolution.userDevices["42"] = [
            .init(deviceID: "phone", rowKey: 7, status: .invalid), .init(deviceID: "gone", rowKey: 3, status: .unregistered),
        ]
        let voip = recipients.plan(resolution, tokenKind: .voip)
        #expect(voip.deviceIDs == ["phone"] && voip.report.map(\.compactJSON) == [#"{"devices":["phone"],"not_sent":[{"device":"gone","status":"unregistered"}],"user":"42"}"#])
        #expect(recipients.plan(resolution, tokenKind: .alert).deviceIDs.isEmpty)
        // A device with no VoIP token is reported as such, not listed as sent.
        resolution.userDevices["42"] = [
            .init(deviceID: "phone", rowKey: 7, status: .invalid, hasToken: false), .init(deviceID: "tablet", rowKey: 8, status: .active),
        ]
        let partial = recipients.plan(resolution, tokenKind: .voip)
        #expect(partial.deviceIDs == ["tablet"] && partial.report.map(\.compactJSON) == [
            #"{"devices":["tablet"],"not_sent":[{"device":"phone","reason":"no_token_for_push_type","status":"invalid"}],"user":"42"}"#,
        ])
    }
}
