import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport

@Suite("APNs payload")
struct APNsPayloadTests {
    static func text(_ payload: APNsPayload) -> String {
        String(decoding: payload.encoded(), as: UTF8.self)
    }

    @Test("every aps key is written under its APNs name, compact and in key order")
    func everyKey() throws {
        let aps = APNsPayload.APS(
            alert: .fields(.init(
                title: "T", subtitle: "S", body: "B", launchImage: "L.png",
                titleLocKey: "TK", titleLocArgs: ["a"], subtitleLocKey: "SK", subtitleLocArgs: ["b"],
                locKey: "BK", locArgs: ["c", "d"])),
            badge: 3,
            sound: .detailed(name: "alarm.caf", critical: true, volume: 0.5),
            threadID: "th", category: "cat", contentAvailable: true, mutableContent: true,
            targetContentID: "tc", interruptionLevel: .timeSensitive, relevanceScore: 1,
            filterCriteria: "work", staleDate: 1_700_000_100, contentState: ["score": 2],
            timestamp: 1_700_000_000, event: .update, dismissalDate: 1_700_000_200,
            attributesType: "MatchAttributes", attributes: ["home": "A"])
        let payload = try APNsPayload(aps: aps, custom: ["deeplink": "shop://x"])
        let expected = #"{"aps":{"alert":{"body":"B","launch-image":"L.png","loc-args":["c","d"],"loc-key":"BK","#
            + #""subtitle":"S","subtitle-loc-args":["b"],"subtitle-loc-key":"SK","title":"T","title-loc-args":["a"],"#
            + #""title-loc-key":"TK"},"attributes":{"home":"A"},"attributes-type":"MatchAttributes","badge":3,"#
            + #""category":"cat","content-available":1,"content-state":{"score":2},"dismissal-date":1700000200,"#
            + #""event":"update","filter-criteria":"work","interruption-level":"time-sensitive","mutable-content":1,"#
            + #""relevance-score":1,"sound":{"critical":1,"name":"alarm.caf","volume":0.5},"stale-date":1700000100,"#
            + #""target-content-id":"tc","thread-id":"th","timestamp":1700000000},"deeplink":"shop://x"}"#
        #expect(Self.text(payload) == expected)
        // And it reads back into the same typed payload.
        #expect(try APNsPayload(jsonBytes: payload.encoded()) == payload)
    }

    @Test("alert as a string, sound as a name")
    func simpleForms() throws {
        let payload = try APNsPayload(aps: .init(alert: .text("Hi"), badge: 0, sound: .named("default")))
        #expect(Self.text(payload) == #"{"aps":{"alert":"Hi","badge":0,"sound":"default"}}"#)
    }

    @Test("strings are escaped as JSON requires and no more")
    func escaping() throws {
        let tricky = "quote \" backslash \\ slash / newline \n tab \t cr \r bell \u{7} nul \u{0} é 🎉"
        let payload = try APNsPayload(aps: .init(alert: .text(tricky)))
        let text = Self.text(payload)
        #expect(text == #"{"aps":{"alert":"quote \" backslash \\ slash / newline \n tab \t cr \r bell \u0007 nul \u0000 é 🎉"}}"#)
        let parsed = try JSONSerialization.jsonObject(with: payload.encoded()) as? [String: Any]
        let aps = parsed?["aps"] as? [String: Any]
        #expect(aps?["alert"] as? String == tricky)
    }

    @Test("aps is always there, empty at the least; only an MDM push has none")
    func emptyForms() throws {
        #expect(Self.text(try APNsPayload()) == #"{"aps":{}}"#)
        #expect(Self.text(try APNsPayload(custom: ["call": "id"])) == #"{"aps":{},"call":"id"}"#)
        let mdm = try APNsPayload(custom: ["mdm": "magic"])
        #expect(String(decoding: mdm.encoded(for: .mdm), as: UTF8.self) == #"{"mdm":"magic"}"#)
        #expect(String(decoding: mdm.encoded(for: .voip), as: UTF8.self) == #"{"aps":{},"mdm":"magic"}"#)
    }

    @Test("the same payload always gives the same bytes")
    func deterministic() throws {
        let custom: [String: JSONValue] = Dictionary(uniqueKeysWithValues: (0..<50).map { ("k\($0)", .int(Int64($0))) })
        let first = try APNsPayload(aps: .init(alert: .text("x")), custom: custom).encoded()
        for _ in 0..<10 {
            #expect(try APNsPayload(aps: .init(alert: .text("x")), custom: custom).encoded() == first)
        }
    }

    // MARK: custom data cannot overwrite aps

    static let customAPSMessage =
        "aps: custom data must not contain \"aps\"; it would overwrite the APNs dictionary, put APNs keys in aps"

    @Test("custom data named aps is refused when building")
    func customAPSRefused() {
        #expect(throws: APNsRequestError.invalidPayload(
            "aps", "custom data must not contain \"aps\"; it would overwrite the APNs dictionary, put APNs keys in aps"))
        {
            try APNsPayload(aps: .init(alert: .text("real")), custom: ["aps": ["alert": "fake"]])
        }
    }

    @Test("custom data named aps is refused when set later; other keys are fine")
    func setCustom() throws {
        var payload = try APNsPayload(aps: .init(alert: .text("real")))
        #expect {
            try payload.setCustom(["alert": "fake"], forKey: "aps")
        } throws: { ($0 as? APNsRequestError)?.description == Self.customAPSMessage }
        try payload.setCustom("x", forKey: "id")
        #expect(Self.text(payload) == #"{"aps":{"alert":"real"},"id":"x"}"#)
        try payload.setCustom(nil, forKey: "id")
        #expect(payload.custom.isEmpty)
    }

    @Test("a campaign whose data holds aps cannot replace the real aps")
    func campaignDataAPS() {
        let notification = Campaign.Notification(
            content: .init(defaultText: .init(title: "Hello")), data: ["aps": ["badge": 99]])
        #expect {
            try APNsPayload(notification: notification, locale: nil)
        } throws: { ($0 as? APNsRequestError)?.description == Self.customAPSMessage }
    }

    @Test("a whole payload read from JSON keeps aps as aps and the rest as custom data")
    func fromJSON() throws {
        let payload = try APNsPayload(jsonBytes: Array(#"{"aps":{"alert":"a","x-new":true},"id":7}"#.utf8))
        #expect(payload.aps.alert == .text("a"))
        #expect(payload.aps.passThrough == ["x-new": true])
        #expect(payload.custom == ["id": 7])
        #expect(Self.text(payload) == #"{"aps":{"alert":"a","x-new":true},"id":7}"#)
    }

    // MARK: campaigns

    @Test("a campaign's payload: locale texts merged into its aps, data beside")
    func fromCampaign() throws {
        let notification = Campaign.Notification(
            content: .init(
                defaultText: .init(title: "Sale", body: "20% off"),
                locales: ["de": .init(title: "Angebot", body: "20 % Rabatt")]),
            aps: ["sound": "default", "badge": 1, "alert": ["loc-key": "SALE_BODY", "loc-args": ["20"]]],
            data: ["deeplink": "shop://sale"])
        let german = try APNsPayload(notification: notification, locale: "de_DE")
        #expect(Self.text(german)
            == #"{"aps":{"alert":{"body":"20 % Rabatt","loc-args":["20"],"loc-key":"SALE_BODY","title":"Angebot"},"#
            + #""badge":1,"sound":"default"},"deeplink":"shop://sale"}"#)
        let other = try APNsPayload(notification: notification, locale: "fr")
        guard case .fields(let alert)? = other.aps.alert else {
            Issue.record("expected an alert dictionary")
            return
        }
        #expect(alert.title == "Sale")
        #expect(alert.locKey == "SALE_BODY")
        #expect(alert.locArgs == ["20"])
    }

    @Test("localized-key alerts for apps that ship their own texts")
    func localizedKeys() throws {
        let notification = Campaign.Notification(
            aps: ["alert": ["title-loc-key": "T", "title-loc-args": ["Ann"], "loc-key": "B", "loc-args": ["3", "4"]]])
        let payload = try APNsPayload(notification: notification, locale: "ja")
        #expect(Self.text(payload) == #"{"aps":{"alert":{"loc-args":["3","4"],"loc-key":"B","title-loc-args":["Ann"],"title-loc-key":"T"}}}"#)
    }

    // MARK: bad aps values

    struct BadAPS: Sendable, CustomTestStringConvertible {
        let name: String
        let json: String
        let message: String
        var testDescription: String { name }
    }

    static let badAPS: [BadAPS] = [
        BadAPS(name: "aps is a string", json: #"{"aps":"x"}"#, message: "aps: must be an object, found a string"),
        BadAPS(name: "alert is a number", json: #"{"aps":{"alert":3}}"#, message: "aps.alert: must be a string or an object, found an integer"),
        BadAPS(name: "badge is a string", json: #"{"aps":{"badge":"1"}}"#,
               message: "aps.badge: must be an integer of 0 or more (0 clears the badge), found '1'"),
        BadAPS(name: "negative badge", json: #"{"aps":{"badge":-1}}"#,
               message: "aps.badge: must be an integer of 0 or more (0 clears the badge), found -1"),
        BadAPS(name: "sound without name", json: #"{"aps":{"sound":{"critical":1}}}"#,
               message: "aps.sound.name: a sound object needs a sound file name (\"default\" for the system sound)"),
        BadAPS(name: "loud sound", json: #"{"aps":{"sound":{"name":"a","volume":2}}}"#,
               message: "aps.sound.volume: must be a number from 0 to 1, found 2"),
        BadAPS(name: "content-available 2", json: #"{"aps":{"content-available":2}}"#,
               message: "aps.content-available: must be 1 (or 0), found 2"),
        BadAPS(name: "unknown interruption level", json: #"{"aps":{"interruption-level":"loud"}}"#,
               message: "aps.interruption-level: must be one of passive, active, time-sensitive, critical, found 'loud'"),
        BadAPS(name: "relevance above 1", json: #"{"aps":{"relevance-score":1.5}}"#,
               message: "aps.relevance-score: must be a number from 0 to 1, found 1.5"),
        BadAPS(name: "loc-args with a number", json: #"{"aps":{"alert":{"loc-args":["a",2]}}}"#,
               message: "aps.alert.loc-args[1]: must be a string, found an integer"),
        BadAPS(name: "title is an object", json: #"{"aps":{"alert":{"title":{}}}}"#,
               message: "aps.alert.title: must be a string, found an object"),
        BadAPS(name: "timestamp in milliseconds", json: #"{"aps":{"timestamp":1700000000000}}"#,
               message: "aps.timestamp: must be seconds since the epoch; 1700000000000 looks like milliseconds"),
        BadAPS(name: "stale-date as text", json: #"{"aps":{"stale-date":"soon"}}"#,
               message: "aps.stale-date: must be whole seconds since the epoch, found 'soon'"),
        BadAPS(name: "unknown event", json: #"{"aps":{"event":"pause"}}"#,
               message: "aps.event: must be start, update or end, found 'pause'"),
        BadAPS(name: "content-state is an array", json: #"{"aps":{"content-state":[]}}"#,
               message: "aps.content-state: must be an object, found an array"),
    ]

    @Test("aps values of the wrong type or range are refused with their path", arguments: badAPS)
    func rejectsBadAPS(_ bad: BadAPS) {
        #expect {
            try APNsPayload(jsonBytes: Array(bad.json.utf8))
        } throws: { error in
            let error = error as? APNsRequestError
            return error?.description == bad.message && error?.code == "invalid_payload"
        }
    }

    @Test("garbage JSON text is an error, never a crash", arguments: [
        APNsGarbage("empty", ""), APNsGarbage("nul", "nul"), APNsGarbage("array", "[1,2]"),
        APNsGarbage("string", "\"aps\""), APNsGarbage("cut short", "{\"aps\":"), APNsGarbage("trailing brace", "{\"a\":1}}"),
        APNsGarbage("10,000 nested arrays", String(repeating: "[", count: 10_000)),
        APNsGarbage("5,000 nested objects", String(repeating: "{\"a\":", count: 5_000)),
    ])
    func garbage(_ garbage: APNsGarbage) {
        #expect(throws: APNsRequestError.self) { try APNsPayload(jsonBytes: Array(garbage.text.utf8)) }
    }

    @Test("bytes that are not UTF-8 are an error")
    func notUTF8() {
        #expect(throws: APNsRequestError.invalidPayload("", "is not valid JSON")) {
            try APNsPayload(jsonBytes: [0x7B, 0xFF, 0xFE, 0x7D])
        }
    }

    @Test("typed values set in code are range-checked too")
    func validateTyped() {
        #expect(throws: APNsRequestError.invalidPayload("aps.relevance-score", "must be a number from 0 to 1, found 2.0")) {
            try APNsPayload.APS(relevanceScore: 2).validate()
        }
        #expect(throws: APNsRequestError.invalidPayload("aps.badge", "must be 0 or more (0 clears the badge), found -2")) {
            try APNsPayload.APS(badge: -2).validate()
        }
    }
}

/// Input for the never-crash tests, named so huge inputs do not flood the log.
struct APNsGarbage: Sendable, CustomTestStringConvertible {
    let name: String
    let text: String
    init(_ name: String, _ text: String) {
        self.name = name
        self.text = text
    }
    var testDescription: String { name }
}
