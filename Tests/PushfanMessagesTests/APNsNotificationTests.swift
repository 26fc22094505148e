import Foundation
import Testing

@testable import PushfanAPNsModel
@testable import PushfanMessages
@testable import PushfanSupport

@Suite("APNs notification")
struct APNsNotificationTests {
    static let token = try! DeviceToken(String(repeating: "a1", count: 32))
    static let id = UUID(uuidString: "6F1B1D2C-3A4B-4C5D-8E6F-7A8B9C0D1E2F")!
    static let bundle = "com.example.shop"

    /// The smallest payload each push type accepts.
    static func minimalPayload(_ pushType: Campaign.PushType) -> APNsPayload {
        switch pushType {
        case .background:
            return try! APNsPayload(aps: .init(contentAvailable: true))
        case .liveactivity:
            return try! APNsPayload(aps: .init(contentState: ["score": 1], timestamp: 1_700_000_000, event: .update))
        case .mdm:
            return try! APNsPayload(custom: ["mdm": "PushMagic-1"])
        case .alert, .voip, .complication, .fileprovider, .location, .pushtotalk, .widgets, .controls:
            return try! APNsPayload(aps: .init(alert: .text("hi")))
        }
    }

    static let expectedSuffix: [Campaign.PushType: String] = [
        .alert: "", .background: "", .mdm: "", .voip: ".voip", .complication: ".complication",
        .fileprovider: ".pushkit.fileprovider", .location: ".location-query",
        .liveactivity: ".push-type.liveactivity", .pushtotalk: ".voip-ptt",
        .widgets: ".push-type.widgets", .controls: ".push-type.controls",
    ]

    @Test("a generated apns-id is a version 4, variant 1 UUID, different every time")
    func generatedIDs() {
        let ids = (0..<1000).map { _ in APNsNotification.randomID() }
        #expect(Set(ids).count == 1000)
        for id in ids {
            let text = id.uuidString.lowercased()
            #expect(Array(text)[14] == "4", "\(text)")
            #expect("89ab".contains(Array(text)[19]), "\(text)")
        }
    }

    @Test("every push type: suffix added to the topic, headers, default priority", arguments: Campaign.PushType.allCases)
    func pushTypeHeaders(_ pushType: Campaign.PushType) throws {
        let notification = try APNsNotification(
            token: Self.token, topic: Self.bundle, pushType: pushType, payload: Self.minimalPayload(pushType), apnsID: Self.id)
        let suffix = try #require(Self.expectedSuffix[pushType])
        #expect(notification.topic == Self.bundle + suffix)
        let headers = Dictionary(uniqueKeysWithValues: notification.headers)
        #expect(headers["apns-topic"] == Self.bundle + suffix)
        #expect(headers["apns-push-type"] == pushType.rawValue)
        #expect(headers["apns-priority"] == (pushType == .background ? "5" : "10"))
        #expect(headers["apns-id"] == "6f1b1d2c-3a4b-4c5d-8e6f-7a8b9c0d1e2f")
        #expect(headers["authorization"] == nil)
        #expect(notification.path == "/3/device/" + String(repeating: "a1", count: 32))
    }

    @Test("every push type: a topic that already has its suffix is kept", arguments: Campaign.PushType.allCases)
    func suffixNotDoubled(_ pushType: Campaign.PushType) throws {
        let full = Self.bundle + pushType.topicSuffix
        let notification = try APNsNotification(
            token: Self.token, topic: full, pushType: pushType, payload: Self.minimalPayload(pushType))
        #expect(notification.topic == full)
    }

    @Test("every push type: a topic with another push type's suffix is refused",
          arguments: Campaign.PushType.allCases.filter { !$0.topicSuffix.isEmpty })
    func otherSuffix(_ pushType: Campaign.PushType) {
        let other: Campaign.PushType = pushType == .voip ? .liveactivity : .voip
        let topic = Self.bundle + other.topicSuffix
        #expect {
            try APNsNotification(token: Self.token, topic: topic, pushType: pushType, payload: Self.minimalPayload(pushType))
        } throws: { error in
            let error = error as? APNsRequestError
            return error?.code == "invalid_topic"
                && error?.description == "apns-topic '\(topic)' ends with \(other.topicSuffix), the suffix of \(other.rawValue) pushes, "
                    + "but the push type is \(pushType.rawValue); give the base bundle id"
        }
    }

    @Test("every push type: the payload limit is exact, in bytes", arguments: Campaign.PushType.allCases)
    func payloadLimit(_ pushType: Campaign.PushType) throws {
        let limit = pushType == .voip ? 5_120 : 4_096
        #expect(pushType.maxPayloadBytes == limit)
        var payload = Self.minimalPayload(pushType)
        try payload.setCustom("", forKey: "pad")
        let padding = limit - payload.encoded(for: pushType).count
        try payload.setCustom(.string(String(repeating: "x", count: padding)), forKey: "pad")
        #expect(payload.encoded(for: pushType).count == limit)
        let atLimit = try APNsNotification(token: Self.token, topic: Self.bundle, pushType: pushType, payload: payload)
        #expect(atLimit.payload.count == limit)

        try payload.setCustom(.string(String(repeating: "x", count: padding + 1)), forKey: "pad")
        #expect(throws: APNsRequestError.payloadTooLarge(bytes: limit + 1, limit: limit, pushType: pushType)) {
            try APNsNotification(token: Self.token, topic: Self.bundle, pushType: pushType, payload: payload)
        }
    }

    @Test("oversize messages state the bytes and the limit")
    func oversizeMessages() throws {
        // {"aps":{"alert":"…"}} is 20 bytes around the text.
        func alert(_ length: Int) throws -> APNsPayload {
            try APNsPayload(aps: .init(alert: .text(String(repeating: "a", count: length))))
        }
        #expect(try APNsNotification(token: Self.token, topic: Self.bundle, payload: alert(4_076)).payload.count == 4_096)
        #expect {
            try APNsNotification(token: Self.token, topic: Self.bundle, payload: alert(4_077))
        } throws: {
            ($0 as? APNsRequestError)?.description
                == "payload is 4097 bytes, APNs allows at most 4096 for alert pushes (1 too many)"
        }
        #expect(try APNsNotification(token: Self.token, topic: Self.bundle, pushType: .voip, payload: alert(5_100)).payload.count == 5_120)
        #expect {
            try APNsNotification(token: Self.token, topic: Self.bundle, pushType: .voip, payload: alert(5_101))
        } throws: {
            ($0 as? APNsRequestError)?.description
                == "payload is 5121 bytes, APNs allows at most 5120 for voip pushes (1 too many)"
        }
        // Multi-byte text counts in bytes, not characters: 2,039 × "é" is 4,078 bytes.
        #expect {
            try APNsNotification(token: Self.token, topic: Self.bundle, payload: APNsPayload(aps: .init(alert: .text(String(repeating: "é", count: 2_039)))))
        } throws: { ($0 as? APNsRequestError)?.description.hasPrefix("payload is 4098 bytes") == true }
    }

    // MARK: background

    struct RuleCase: Sendable, CustomTestStringConvertible {
        let name: String
        let pushType: Campaign.PushType
        let aps: APNsPayload.APS
        var custom: [String: JSONValue] = [:]
        var priority: APNsNotification.Priority?
        let message: String
        var testDescription: String { name }
    }

    static let ruleBreaks: [RuleCase] = [
        RuleCase(name: "background at priority 10", pushType: .background, aps: .init(contentAvailable: true), priority: .immediate,
                 message: "a background push must have apns-priority 5 (APNs refuses 10); found 10"),
        RuleCase(name: "background at priority 1", pushType: .background, aps: .init(contentAvailable: true), priority: .low,
                 message: "a background push must have apns-priority 5 (APNs refuses 1); found 1"),
        RuleCase(name: "background with alert", pushType: .background, aps: .init(alert: .text("x"), contentAvailable: true),
                 message: "a background push cannot have aps.alert; remove it or send an alert push"),
        RuleCase(name: "background with sound", pushType: .background, aps: .init(sound: .named("default"), contentAvailable: true),
                 message: "a background push cannot have aps.sound; remove it or send an alert push"),
        RuleCase(name: "background with badge", pushType: .background, aps: .init(badge: 1, contentAvailable: true),
                 message: "a background push cannot have aps.badge; remove it or send an alert push"),
        RuleCase(name: "background without content-available", pushType: .background, aps: .init(),
                 message: "a background push needs aps.content-available: 1"),
        RuleCase(name: "live activity without event", pushType: .liveactivity, aps: .init(contentState: [:], timestamp: 1),
                 message: "a liveactivity push needs aps.event (start, update or end)"),
        RuleCase(name: "live activity without timestamp", pushType: .liveactivity, aps: .init(contentState: [:], event: .update),
                 message: "a liveactivity push needs aps.timestamp (epoch seconds of this update)"),
        RuleCase(name: "live activity update without content-state", pushType: .liveactivity, aps: .init(timestamp: 1, event: .update),
                 message: "a liveactivity push with event update needs aps.content-state"),
        RuleCase(name: "live activity start without content-state", pushType: .liveactivity,
                 aps: .init(timestamp: 1, event: .start, attributesType: "A", attributes: [:]),
                 message: "a liveactivity push with event start needs aps.content-state"),
        RuleCase(name: "live activity start without attributes-type", pushType: .liveactivity,
                 aps: .init(contentState: [:], timestamp: 1, event: .start, attributes: [:]),
                 message: "a liveactivity push with event start needs aps.attributes-type"),
        RuleCase(name: "live activity start without attributes", pushType: .liveactivity,
                 aps: .init(contentState: [:], timestamp: 1, event: .start, attributesType: "A"),
                 message: "a liveactivity push with event start needs aps.attributes"),
        RuleCase(name: "mdm with aps", pushType: .mdm, aps: .init(alert: .text("x")), custom: ["mdm": "m"],
                 message: "an mdm push cannot have aps keys; its payload is {\"mdm\": PushMagic}"),
        RuleCase(name: "mdm without PushMagic", pushType: .mdm, aps: .init(), custom: ["x": 1],
                 message: "an mdm push needs a string \"mdm\" (the device's PushMagic) beside aps"),
    ]

    @Test("push-type rules are enforced by construction", arguments: ruleBreaks)
    func ruleBreak(_ rule: RuleCase) throws {
        let payload = try APNsPayload(aps: rule.aps, custom: rule.custom)
        #expect {
            try APNsNotification(token: Self.token, topic: Self.bundle, pushType: rule.pushType, payload: payload, priority: rule.priority)
        } throws: { error in
            let error = error as? APNsRequestError
            return error?.description == rule.message && error?.code == "push_type_rule"
        }
    }

    @Test("valid special cases: background at 5, live activity start and end, mdm")
    func validSpecialCases() throws {
        let background = try APNsNotification(
            token: Self.token, topic: Self.bundle, pushType: .background,
            payload: APNsPayload(aps: .init(contentAvailable: true), custom: ["sync": true]), priority: .powerConsiderate)
        #expect(background.priority == .powerConsiderate)
        #expect(String(decoding: background.payload, as: UTF8.self) == #"{"aps":{"content-available":1},"sync":true}"#)

        _ = try APNsNotification(
            token: Self.token, topic: Self.bundle, pushType: .liveactivity,
            payload: APNsPayload(aps: .init(
                alert: .fields(.init(title: "Kick-off", body: "Live now")), contentState: ["score": "0:0"], timestamp: 1_700_000_000,
                event: .start, attributesType: "MatchAttributes", attributes: ["home": "A", "away": "B"])))
        let end = try APNsNotification(
            token: Self.token, topic: Self.bundle, pushType: .liveactivity,
            payload: APNsPayload(aps: .init(timestamp: 1_700_000_000, event: .end, dismissalDate: 1_700_000_600)))
        #expect(end.topic == "com.example.shop.push-type.liveactivity")

        let mdm = try APNsNotification(token: Self.token, topic: "com.apple.mgmt.External.1234", pushType: .mdm, payload: Self.minimalPayload(.mdm))
        #expect(String(decoding: mdm.payload, as: UTF8.self) == #"{"mdm":"PushMagic-1"}"#)
        #expect(mdm.topic == "com.apple.mgmt.External.1234")
    }

    @Test("other priorities are allowed for non-background pushes", arguments: APNsNotification.Priority.allCases)
    func priorities(_ priority: APNsNotification.Priority) throws {
        let notification = try APNsNotification(
            token: Self.token, topic: Self.bundle, payload: Self.minimalPayload(.alert), priority: priority)
        #expect(notification.headers.first { $0.0 == "apns-priority" }?.1 == String(priority.rawValue))
    }

    @Test("a prepared payload is checked once and reused for many devices")
    func prepared() throws {
        let prepared = try APNsPreparedPayload(Self.minimalPayload(.voip), pushType: .voip)
        #expect(prepared.priority == .immediate)
        let other = try DeviceToken(String(repeating: "b2", count: 32))
        let first = try APNsNotification(token: Self.token, topic: Self.bundle, prepared: prepared, collapseID: "c")
        let second = try APNsNotification(token: other, topic: Self.bundle, prepared: prepared, expiration: .immediately)
        #expect(first.payload == second.payload)
        #expect(first.topic == "com.example.shop.voip" && second.topic == "com.example.shop.voip")
        #expect(second.path.hasSuffix(String(repeating: "b2", count: 32)))
        // The rules hold for prepared payloads too.
        #expect(throws: APNsRequestError.pushTypeRule(.background, "needs aps.content-available: 1", field: "aps.content-available")) {
            try APNsPreparedPayload(APNsPayload(), pushType: .background)
        }
        #expect(throws: APNsRequestError.invalidCollapseID("is 65 bytes, APNs allows at most 64")) {
            try APNsNotification(token: Self.token, topic: Self.bundle, prepared: prepared, collapseID: String(repeating: "c", count: 65))
        }
    }

    // MARK: headers

    @Test("headers: exact names, values and order")
    func headerList() throws {
        let notification = try APNsNotification(
            token: Self.token, topic: Self.bundle, pushType: .voip, payload: Self.minimalPayload(.voip),
            priority: .immediate, expiration: .at(epochSeconds: 1_800_000_000), collapseID: "call-42", apnsID: Self.id)
        let expected: [(String, String)] = [
            ("apns-topic", "com.example.shop.voip"),
            ("apns-push-type", "voip"),
            ("apns-priority", "10"),
            ("apns-expiration", "1800000000"),
            ("apns-collapse-id", "call-42"),
            ("apns-id", "6f1b1d2c-3a4b-4c5d-8e6f-7a8b9c0d1e2f"),
        ]
        #expect(notification.headers.map(\.0) == expected.map(\.0))
        #expect(notification.headers.map(\.1) == expected.map(\.1))
    }

    @Test("expiration: none, try once, epoch seconds, a date")
    func expirationHeader() throws {
        func value(_ expiration: APNsNotification.Expiration) throws -> String? {
            try APNsNotification(token: Self.token, topic: Self.bundle, payload: Self.minimalPayload(.alert), expiration: expiration)
                .headers.first { $0.0 == "apns-expiration" }?.1
        }
        #expect(try value(.unspecified) == nil)
        #expect(try value(.immediately) == "0")
        #expect(try value(.at(epochSeconds: 0)) == "0")
        #expect(try value(.at(epochSeconds: 1_750_000_000)) == "1750000000")
        #expect(try value(.until(Date(timeIntervalSince1970: 1_750_000_000.9))) == "1750000000")
        #expect(APNsNotification.Expiration(epochSeconds: nil) == .unspecified)
        #expect(APNsNotification.Expiration(epochSeconds: 0) == .immediately)
        #expect(throws: APNsRequestError.invalidExpiration("must be seconds since the epoch (0 = try once); found -5")) {
            try value(.at(epochSeconds: -5))
        }
        #expect(throws: APNsRequestError.invalidExpiration("must be seconds since the epoch; 1750000000000 looks like milliseconds")) {
            try value(.at(epochSeconds: 1_750_000_000_000))
        }
    }

    @Test("apns-id is generated when not given, and lowercase")
    func generatedID() throws {
        let notification = try APNsNotification(token: Self.token, topic: Self.bundle, payload: Self.minimalPayload(.alert))
        let header = try #require(notification.headers.first { $0.0 == "apns-id" }?.1)
        #expect(header == header.lowercased())
        #expect(UUID(uuidString: header) == notification.apnsID)
    }

    // MARK: collapse id

    @Test("collapse id: 64 bytes pass, 65 do not; bytes, not characters")
    func collapseID() throws {
        func build(_ collapseID: String) throws -> APNsNotification {
            try APNsNotification(token: Self.token, topic: Self.bundle, payload: Self.minimalPayload(.alert), collapseID: collapseID)
        }
        #expect(try build(String(repeating: "c", count: 64)).collapseID?.utf8.count == 64)
        #expect(throws: APNsRequestError.invalidCollapseID("is 65 bytes, APNs allows at most 64")) {
            try build(String(repeating: "c", count: 65))
        }
        #expect(try build(String(repeating: "é", count: 32)).collapseID?.count == 32)
        #expect(throws: APNsRequestError.invalidCollapseID("is 66 bytes, APNs allows at most 64")) {
            try build(String(repeating: "é", count: 33))
        }
        #expect(throws: APNsRequestError.invalidCollapseID("must not be empty; leave it out instead")) {
            try build("")
        }
        #expect(throws: APNsRequestError.invalidCollapseID("must not contain control characters; found '\\r' at position 2")) {
            try build("a\r\nx-evil: 1")
        }
    }

    // MARK: topic

    @Test("topic: empty or unprintable is refused")
    func badTopics() {
        #expect(throws: APNsRequestError.invalidTopic("is empty; give the app's bundle id")) {
            try APNsNotification(token: Self.token, topic: "", payload: Self.minimalPayload(.alert))
        }
        #expect(throws: APNsRequestError.invalidTopic("must be a bundle id of printable ASCII; found ' ' at position 4")) {
            try APNsNotification(token: Self.token, topic: "com example", payload: Self.minimalPayload(.alert))
        }
        #expect(throws: APNsRequestError.invalidTopic("must be a bundle id of printable ASCII; found '\\n' at position 4")) {
            try APNsNotification(token: Self.token, topic: "com\nx", payload: Self.minimalPayload(.alert))
        }
    }

    // MARK: campaigns

    @Test("a campaign's request: its push type, priority, expiration, collapse id and localized payload")
    func fromCampaign() throws {
        let campaign = Campaign(
            id: "spring-sale-2026", app: "shop-ios", audience: .segment("tag:a"),
            notification: .init(
                content: .init(defaultText: .init(title: "Sale"), locales: ["de": .init(title: "Angebot")]),
                aps: ["sound": "default"], data: ["deeplink": "shop://sale"]),
            options: .init(priority: 5, expiration: 1_800_000_000))
        let notification = try APNsNotification(campaign: campaign, token: Self.token, topic: Self.bundle, locale: "de", apnsID: Self.id)
        #expect(notification.headers.map(\.1) == [
            "com.example.shop", "alert", "5", "1800000000", "spring-sale-2026", "6f1b1d2c-3a4b-4c5d-8e6f-7a8b9c0d1e2f",
        ])
        #expect(String(decoding: notification.payload, as: UTF8.self)
            == #"{"aps":{"alert":{"title":"Angebot"},"sound":"default"},"deeplink":"shop://sale"}"#)

        var background = campaign
        background.notification = .init(pushType: .background, aps: ["content-available": 1])
        background.options = .init()
        let silent = try APNsNotification(campaign: background, token: Self.token, topic: Self.bundle, locale: nil)
        #expect(silent.priority == .powerConsiderate)
        #expect(silent.expiration == .unspecified)
    }
}
