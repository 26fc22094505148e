import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

/// A transactional message's body, read once: the recipients as given, the notification and
/// options by the campaign's decoding, what is not a message's noted for the API to refuse.
@Suite struct MessageBodyTests {
    static let notification = #"{"push_type":"alert","content":{"default":{"title":"Shipped","body":"Order 7 is on its way"}}}"#

    static func read(_ text: String) throws(MessageDecodingError) -> MessageBody {
        try MessageCodec.decodeDocument(MessageBody.self, from: Data(text.utf8))
    }

    @Test("a message skips quiet hours and frequency caps unless its options say otherwise; the options it gives are kept")
    func transactionalDefaults() throws {
        let plain = try Self.read(#"{"recipients":{"users":["42"]},"notification":\#(Self.notification)}"#)
        #expect(plain.refusal == nil)
        #expect(plain.recipients == ["users": ["42"]])
        #expect(plain.options.ignoreQuietHours && plain.options.ignoreFrequencyCaps)
        #expect(plain.notification.content?.defaultText?.title == "Shipped")

        let given = try Self.read(
            #"{"recipients":{"devices":["d1"]},"notification":\#(Self.notification),"options":{"ignore_frequency_caps":false,"collapse_id":"order-7","priority":5}}"#)
        #expect(given.options.ignoreQuietHours, "not given: skipped")
        #expect(!given.options.ignoreFrequencyCaps, "given false: the caps hold")
        #expect(given.options.collapseID == "order-7" && given.options.priority == 5)

        let nulls = try Self.read(
            #"{"recipients":{"devices":["d1"]},"notification":\#(Self.notification),"options":{"ignore_quiet_hours":null,"ignore_frequency_caps":null}}"#)
        #expect(nulls.options.ignoreQuietHours && nulls.options.ignoreFrequencyCaps, "null is absent: the message's defaults")

        let campaign = try given.campaign(id: "msg-1", app: "shop", devices: ["d1"], now: Date())
        #expect(campaign.audience == .devices(["d1"]) && campaign.id == "msg-1" && campaign.app == "shop")
        #expect(campaign.options == given.options && campaign.submittedAt != nil)
    }

    @Test("a member or option that is not a message's, or options that are not an object, is noted and nothing after it is read")
    func refusals() throws {
        #expect(try Self.read(#"{"recipients":{},"notification":{"bad":1},"audience":{"segment":"x"}}"#).refusal == .unknownMember("audience"))
        #expect(try Self.read(#"{"recipients":{},"notification":\#(Self.notification),"options":[1]}"#).refusal == .optionsNotAnObject)
        #expect(try Self.read(#"{"recipients":{},"notification":\#(Self.notification),"options":null}"#).refusal == .optionsNotAnObject)
        #expect(try Self.read(#"{"notification":\#(Self.notification),"options":{"send_at":1,"rate":3}}"#).refusal == .unknownOption("rate"))
    }

    @Test("the campaign's own rules refuse a bad notification or option, with the field's path")
    func campaignRules() throws {
        do {
            _ = try Self.read(#"{"recipients":{},"notification":{"push_type":"alert"}}"#).campaign(id: "msg-1", app: "shop", devices: ["d"], now: Date())
            Issue.record("a notification without content was accepted")
        } catch {
            #expect(error.code == "invalid_field" && error.field == "notification.content.default", "\(error)")
        }
        do {
            _ = try Self.read(#"{"recipients":{},"notification":\#(Self.notification),"options":{"priority":"high"}}"#)
            Issue.record("a priority that is a string was accepted")
        } catch {
            #expect(error.field == "options.priority", "\(error)")
        }
        do {
            _ = try Self.read(#"{"recipients":{}}"#)
            Issue.record("a message without a notification was accepted")
        } catch {
            #expect(error.field == "notification", "\(error)")
        }
    }
}
