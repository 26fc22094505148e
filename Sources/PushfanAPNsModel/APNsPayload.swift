import Foundation
import PushfanSupport

/// The JSON body of an APNs request: the `aps` dictionary Apple defines, and
/// custom keys beside it for the app.
///
/// Custom data can never replace `aps`: a custom key named `aps` is refused
/// when the payload is built, and the writer always takes `aps` from the typed
/// field. `encoded()` gives the exact bytes that go on the wire; their count is
/// what APNs measures against its limit (`APNsNotification` checks it).
package struct APNsPayload: Sendable, Hashable {
    /// Apple's keys.
    package var aps: APS
    /// Keys beside `aps`, for the app (deep links, ids). Never contains `aps`.
    package private(set) var custom: [String: JSONValue]

    /// Refuses `custom["aps"]`.
    package init(aps: APS = APS(), custom: [String: JSONValue] = [:]) throws(APNsRequestError) {
        try Self.checkCustom(custom)
        self.aps = aps
        self.custom = custom
    }

    /// Sets or (with nil) removes one custom key; `aps` is refused.
    package mutating func setCustom(_ value: JSONValue?, forKey key: String) throws(APNsRequestError) {
        if key == "aps" { throw Self.customAPSError }
        custom[key] = value
    }

    /// A whole payload given as JSON, e.g. from `pushfan send --payload`: `aps`
    /// is read into the typed form (so its keys are type-checked), everything
    /// else becomes custom data. `aps` may be absent (MDM pushes have none).
    package init(json: [String: JSONValue]) throws(APNsRequestError) {
        var custom = json
        let apsValue = custom.removeValue(forKey: "aps")
        let aps: APS
        switch apsValue {
        case nil: aps = APS()
        case .object(let members)?: aps = try APS(json: members)
        case let other?:
            throw .invalidPayload("aps", "must be an object, found \(other.kindDescription)")
        }
        try self.init(aps: aps, custom: custom)
    }

    /// A whole payload given as JSON text. Never traps on bad input: anything
    /// that is not a JSON object is an `invalid_payload` error.
    package init(jsonBytes: some Collection<UInt8>) throws(APNsRequestError) {
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(jsonBytes))
        } catch {
            throw .invalidPayload("", "is not valid JSON")
        }
        guard case .object(let members) = value else {
            throw .invalidPayload("", "must be a JSON object, found \(value.kindDescription)")
        }
        try self.init(json: members)
    }

    /// The payload as a JSON value, always with an `aps` dictionary (APNs
    /// expects one, even empty, in every push but MDM's).
    package var jsonValue: JSONValue { jsonValue(for: nil) }

    /// As sent for `pushType`: MDM's `{"mdm": ...}` has no `aps` at all.
    package func jsonValue(for pushType: APNsPushType?) -> JSONValue {
        var members = custom
        let apsObject = aps.jsonObject
        if !apsObject.isEmpty || pushType != .mdm { members["aps"] = .object(apsObject) }
        return .object(members)
    }

    /// The exact bytes sent: compact, keys sorted, UTF-8 (see `JSONWriter`).
    package func encoded(for pushType: APNsPushType? = nil) -> Data {
        Data(JSONWriter.bytes(jsonValue(for: pushType)))
    }

    private static let customAPSError = APNsRequestError.invalidPayload(
        "aps", "custom data must not contain \"aps\"; it would overwrite the APNs dictionary, put APNs keys in aps")

    private static func checkCustom(_ custom: [String: JSONValue]) throws(APNsRequestError) {
        if custom["aps"] != nil { throw customAPSError }
    }
}

// MARK: - aps

extension APNsPayload {
    /// The `aps` dictionary. Every key Apple documents has a typed field; keys
    /// Apple adds later (or ones Pushfan does not model) travel in
    /// `passThrough`, where a typed field of the same name wins.
    package struct APS: Sendable, Hashable {
        /// `alert`: a plain string or title/subtitle/body and localization keys.
        package var alert: Alert?
        /// `badge`: the number on the app icon; 0 clears it.
        package var badge: Int?
        /// `sound`: a sound file name, or a critical-alert sound.
        package var sound: Sound?
        /// `thread-id`: groups notifications in Notification Center.
        package var threadID: String?
        /// `category`: the notification's actionable category.
        package var category: String?
        /// `content-available: 1`: wake the app in the background. Required
        /// (and alone with custom data) for background pushes.
        package var contentAvailable: Bool
        /// `mutable-content: 1`: let a notification service extension edit it.
        package var mutableContent: Bool
        /// `target-content-id`: the window or content to bring forward.
        package var targetContentID: String?
        /// `interruption-level` (iOS 15+).
        package var interruptionLevel: InterruptionLevel?
        /// `relevance-score` from 0 to 1: ranking in notification summaries and
        /// Live Activities.
        package var relevanceScore: Double?
        /// `filter-criteria`: Focus filter matching.
        package var filterCriteria: String?
        /// `stale-date`: Live Activity; epoch seconds after which it is stale.
        package var staleDate: Int64?
        /// `content-state`: Live Activity; the dynamic state, as the app's
        /// `ContentState` encodes it.
        package var contentState: [String: JSONValue]?
        /// `timestamp`: Live Activity; epoch seconds of this update. The device
        /// drops updates older than the last one it showed.
        package var timestamp: Int64?
        /// `event`: Live Activity; start, update or end.
        package var event: LiveActivityEvent?
        /// `dismissal-date`: Live Activity; epoch seconds when an ended
        /// activity leaves the Lock Screen.
        package var dismissalDate: Int64?
        /// `attributes-type`: Live Activity push-to-start; the Swift type name
        /// of the app's `ActivityAttributes`.
        package var attributesType: String?
        /// `attributes`: Live Activity push-to-start; the static attributes.
        package var attributes: [String: JSONValue]?
        /// Other `aps` keys, written as given.
        package var passThrough: [String: JSONValue]

        package init(
            alert: Alert? = nil, badge: Int? = nil, sound: Sound? = nil, threadID: String? = nil,
            category: String? = nil, contentAvailable: Bool = false, mutableContent: Bool = false,
            targetContentID: String? = nil, interruptionLevel: InterruptionLevel? = nil,
            relevanceScore: Double? = nil, filterCriteria: String? = nil, staleDate: Int64? = nil,
            contentState: [String: JSONValue]? = nil, timestamp: Int64? = nil, event: LiveActivityEvent? = nil,
            dismissalDate: Int64? = nil, attributesType: String? = nil, attributes: [String: JSONValue]? = nil,
            passThrough: [String: JSONValue] = [:]
        ) {
            self.alert = alert
            self.badge = badge
            self.sound = sound
            self.threadID = threadID
            self.category = category
            self.contentAvailable = contentAvailable
            self.mutableContent = mutableContent
            self.targetContentID = targetContentID
            self.interruptionLevel = interruptionLevel
            self.relevanceScore = relevanceScore
            self.filterCriteria = filterCriteria
            self.staleDate = staleDate
            self.contentState = contentState
            self.timestamp = timestamp
            self.event = event
            self.dismissalDate = dismissalDate
            self.attributesType = attributesType
            self.attributes = attributes
            self.passThrough = passThrough
        }
    }

    /// `aps.alert`.
    package enum Alert: Sendable, Hashable {
        /// `"alert": "text"`: shown as the body.
        case text(String)
        /// `"alert": {...}`.
        case fields(AlertFields)
    }

    /// The dictionary form of `aps.alert`. The `*-loc-key`/`*-loc-args` fields
    /// name strings in the app's own `Localizable.strings`, for apps that ship
    /// their texts and want the device to pick the language.
    package struct AlertFields: Sendable, Hashable {
        package var title: String?
        package var subtitle: String?
        package var body: String?
        /// `launch-image`.
        package var launchImage: String?
        /// `title-loc-key`, `title-loc-args`.
        package var titleLocKey: String?
        package var titleLocArgs: [String]?
        /// `subtitle-loc-key`, `subtitle-loc-args`.
        package var subtitleLocKey: String?
        package var subtitleLocArgs: [String]?
        /// `loc-key`, `loc-args`: the body.
        package var locKey: String?
        package var locArgs: [String]?
        /// Other alert keys, written as given.
        package var passThrough: [String: JSONValue]

        package init(
            title: String? = nil, subtitle: String? = nil, body: String? = nil, launchImage: String? = nil,
            titleLocKey: String? = nil, titleLocArgs: [String]? = nil,
            subtitleLocKey: String? = nil, subtitleLocArgs: [String]? = nil,
            locKey: String? = nil, locArgs: [String]? = nil, passThrough: [String: JSONValue] = [:]
        ) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
            self.launchImage = launchImage
            self.titleLocKey = titleLocKey
            self.titleLocArgs = titleLocArgs
            self.subtitleLocKey = subtitleLocKey
            self.subtitleLocArgs = subtitleLocArgs
            self.locKey = locKey
            self.locArgs = locArgs
            self.passThrough = passThrough
        }
    }

    /// `aps.sound`.
    package enum Sound: Sendable, Hashable {
        /// `"sound": "name"` (`default` for the system sound).
        case named(String)
        /// `"sound": {"critical": 1, "name": ..., "volume": ...}`. Critical
        /// sounds need Apple's entitlement; volume is 0 to 1.
        case detailed(name: String, critical: Bool, volume: Double?)
    }

    /// `aps.interruption-level`.
    package enum InterruptionLevel: String, Sendable, Hashable, CaseIterable {
        case passive, active
        case timeSensitive = "time-sensitive"
        case critical
    }

    /// `aps.event` of a Live Activity push.
    package enum LiveActivityEvent: String, Sendable, Hashable, CaseIterable {
        case start, update, end
    }
}

// MARK: - To JSON

extension APNsPayload.APS {
    /// The dictionary as written; false flags and nil fields are left out.
    package var jsonObject: [String: JSONValue] {
        var object = passThrough
        func put(_ key: String, _ value: JSONValue?) { if let value { object[key] = value } }
        switch alert {
        case .text(let text)?: object["alert"] = .string(text)
        case .fields(let fields)?: object["alert"] = .object(fields.jsonObject)
        case nil: break
        }
        put("badge", badge.map { .int(Int64($0)) })
        switch sound {
        case .named(let name)?:
            object["sound"] = .string(name)
        case .detailed(let name, let critical, let volume)?:
            var members: [String: JSONValue] = ["name": .string(name), "critical": .int(critical ? 1 : 0)]
            if let volume { members["volume"] = Self.number(volume) }
            object["sound"] = .object(members)
        case nil:
            break
        }
        put("thread-id", threadID.map(JSONValue.string))
        put("category", category.map(JSONValue.string))
        if contentAvailable { object["content-available"] = .int(1) }
        if mutableContent { object["mutable-content"] = .int(1) }
        put("target-content-id", targetContentID.map(JSONValue.string))
        put("interruption-level", interruptionLevel.map { .string($0.rawValue) })
        put("relevance-score", relevanceScore.map(Self.number))
        put("filter-criteria", filterCriteria.map(JSONValue.string))
        put("stale-date", staleDate.map(JSONValue.int))
        put("content-state", contentState.map(JSONValue.object))
        put("timestamp", timestamp.map(JSONValue.int))
        put("event", event.map { .string($0.rawValue) })
        put("dismissal-date", dismissalDate.map(JSONValue.int))
        put("attributes-type", attributesType.map(JSONValue.string))
        put("attributes", attributes.map(JSONValue.object))
        return object
    }

    /// Whole numbers are written without a fraction (`1`, not `1.0`).
    private static func number(_ value: Double) -> JSONValue {
        if value.rounded() == value, abs(value) < 9e15 { return .int(Int64(value)) }
        return .number(value)
    }
}

extension APNsPayload.AlertFields {
    package var jsonObject: [String: JSONValue] {
        var object = passThrough
        func put(_ key: String, _ value: String?) { if let value { object[key] = .string(value) } }
        func put(_ key: String, _ value: [String]?) { if let value { object[key] = .array(value.map(JSONValue.string)) } }
        put("title", title)
        put("subtitle", subtitle)
        put("body", body)
        put("launch-image", launchImage)
        put("title-loc-key", titleLocKey)
        put("title-loc-args", titleLocArgs)
        put("subtitle-loc-key", subtitleLocKey)
        put("subtitle-loc-args", subtitleLocArgs)
        put("loc-key", locKey)
        put("loc-args", locArgs)
        return object
    }
}

// MARK: - From JSON

extension APNsPayload.APS {
    /// Reads an `aps` dictionary, checking the type and range of every key
    /// Apple defines; unknown keys go to `passThrough` unchecked. Errors carry
    /// the key's path (`aps.sound.volume`).
    package init(json: [String: JSONValue]) throws(APNsRequestError) {
        self.init()
        var rest = json
        func take(_ key: String) -> JSONValue? {
            guard let value = rest.removeValue(forKey: key), value != .null else { return nil }
            return value
        }
        if let value = take("alert") {
            switch value {
            case .string(let text): alert = .text(text)
            case .object(let members): alert = .fields(try APNsPayload.AlertFields(json: members))
            default: throw .invalidPayload("aps.alert", "must be a string or an object, found \(value.kindDescription)")
            }
        }
        if let value = take("badge") {
            guard let number = value.intValue, number >= 0, number <= Int64(Int32.max) else {
                throw .invalidPayload("aps.badge", "must be an integer of 0 or more (0 clears the badge), found \(Self.describe(value))")
            }
            badge = Int(number)
        }
        if let value = take("sound") { sound = try Self.sound(value) }
        threadID = try Self.string(take("thread-id"), "aps.thread-id")
        category = try Self.string(take("category"), "aps.category")
        contentAvailable = try Self.flag(take("content-available"), "aps.content-available")
        mutableContent = try Self.flag(take("mutable-content"), "aps.mutable-content")
        targetContentID = try Self.string(take("target-content-id"), "aps.target-content-id")
        if let value = take("interruption-level") {
            guard let text = value.stringValue, let level = APNsPayload.InterruptionLevel(rawValue: text) else {
                let allowed = APNsPayload.InterruptionLevel.allCases.map(\.rawValue).joined(separator: ", ")
                throw .invalidPayload("aps.interruption-level", "must be one of \(allowed), found \(Self.describe(value))")
            }
            interruptionLevel = level
        }
        if let value = take("relevance-score") {
            guard let score = value.doubleValue, (0...1).contains(score) else {
                throw .invalidPayload("aps.relevance-score", "must be a number from 0 to 1, found \(Self.describe(value))")
            }
            relevanceScore = score
        }
        filterCriteria = try Self.string(take("filter-criteria"), "aps.filter-criteria")
        staleDate = try Self.epochSeconds(take("stale-date"), "aps.stale-date")
        contentState = try Self.object(take("content-state"), "aps.content-state")
        timestamp = try Self.epochSeconds(take("timestamp"), "aps.timestamp")
        if let value = take("event") {
            guard let text = value.stringValue, let parsed = APNsPayload.LiveActivityEvent(rawValue: text) else {
                throw .invalidPayload("aps.event", "must be start, update or end, found \(Self.describe(value))")
            }
            event = parsed
        }
        dismissalDate = try Self.epochSeconds(take("dismissal-date"), "aps.dismissal-date")
        attributesType = try Self.string(take("attributes-type"), "aps.attributes-type")
        attributes = try Self.object(take("attributes"), "aps.attributes")
        passThrough = rest
        try validate()
    }

    /// Range checks for values set in code rather than parsed (parsing
    /// already enforces them). Called by `APNsNotification`.
    package func validate() throws(APNsRequestError) {
        if let badge, badge < 0 {
            throw .invalidPayload("aps.badge", "must be 0 or more (0 clears the badge), found \(badge)")
        }
        if case .detailed(_, _, let volume?)? = sound, !(0...1).contains(volume) {
            throw .invalidPayload("aps.sound.volume", "must be a number from 0 to 1, found \(volume)")
        }
        if let relevanceScore, !(0...1).contains(relevanceScore) {
            throw .invalidPayload("aps.relevance-score", "must be a number from 0 to 1, found \(relevanceScore)")
        }
        for (field, value) in [("aps.stale-date", staleDate), ("aps.timestamp", timestamp), ("aps.dismissal-date", dismissalDate)] {
            if let value { try Self.checkEpochSeconds(value, field) }
        }
    }

    private static func sound(_ value: JSONValue) throws(APNsRequestError) -> APNsPayload.Sound {
        switch value {
        case .string(let name):
            return .named(name)
        case .object(let members):
            guard let name = members["name"]?.stringValue else {
                throw .invalidPayload("aps.sound.name", "a sound object needs a sound file name (\"default\" for the system sound)")
            }
            let critical = try flag(members["critical"], "aps.sound.critical")
            var volume: Double?
            if let raw = members["volume"], raw != .null {
                guard let number = raw.doubleValue, (0...1).contains(number) else {
                    throw .invalidPayload("aps.sound.volume", "must be a number from 0 to 1, found \(describe(raw))")
                }
                volume = number
            }
            return .detailed(name: name, critical: critical, volume: volume)
        default:
            throw .invalidPayload("aps.sound", "must be a sound file name or a critical-sound object, found \(value.kindDescription)")
        }
    }

    fileprivate static func string(_ value: JSONValue?, _ field: String) throws(APNsRequestError) -> String? {
        guard let value, value != .null else { return nil }
        guard let text = value.stringValue else {
            throw .invalidPayload(field, "must be a string, found \(value.kindDescription)")
        }
        return text
    }

    fileprivate static func strings(_ value: JSONValue?, _ field: String) throws(APNsRequestError) -> [String]? {
        guard let value, value != .null else { return nil }
        guard let elements = value.arrayValue else {
            throw .invalidPayload(field, "must be an array of strings, found \(value.kindDescription)")
        }
        var result: [String] = []
        for (index, element) in elements.enumerated() {
            guard let text = element.stringValue else {
                throw .invalidPayload("\(field)[\(index)]", "must be a string, found \(element.kindDescription)")
            }
            result.append(text)
        }
        return result
    }

    /// `0`/`1`, also `false`/`true`.
    private static func flag(_ value: JSONValue?, _ field: String) throws(APNsRequestError) -> Bool {
        switch value {
        case nil, .null?, .int(0)?, .bool(false)?: return false
        case .int(1)?, .bool(true)?: return true
        case let other?: throw .invalidPayload(field, "must be 1 (or 0), found \(describe(other))")
        }
    }

    private static func object(_ value: JSONValue?, _ field: String) throws(APNsRequestError) -> [String: JSONValue]? {
        guard let value, value != .null else { return nil }
        guard let members = value.objectValue else {
            throw .invalidPayload(field, "must be an object, found \(value.kindDescription)")
        }
        return members
    }

    private static func epochSeconds(_ value: JSONValue?, _ field: String) throws(APNsRequestError) -> Int64? {
        guard let value, value != .null else { return nil }
        guard let seconds = value.intValue else {
            throw .invalidPayload(field, "must be whole seconds since the epoch, found \(describe(value))")
        }
        try checkEpochSeconds(seconds, field)
        return seconds
    }

    private static func checkEpochSeconds(_ seconds: Int64, _ field: String) throws(APNsRequestError) {
        if seconds < 0 {
            throw .invalidPayload(field, "must be seconds since the epoch, found \(seconds)")
        }
        if seconds >= 100_000_000_000 {
            throw .invalidPayload(field, "must be seconds since the epoch; \(seconds) looks like milliseconds")
        }
    }

    fileprivate static func describe(_ value: JSONValue) -> String {
        switch value {
        case .int(let number): return String(number)
        case .number(let number): return String(number)
        case .bool(let flag): return String(flag)
        case .string(let text): return APNsQuote.text(text)
        default: return value.kindDescription
        }
    }
}

extension APNsPayload.AlertFields {
    /// Reads the dictionary form of `aps.alert`; unknown keys pass through.
    package init(json: [String: JSONValue]) throws(APNsRequestError) {
        typealias APS = APNsPayload.APS
        var rest = json
        func take(_ key: String) -> JSONValue? { rest.removeValue(forKey: key) }
        self.init(
            title: try APS.string(take("title"), "aps.alert.title"),
            subtitle: try APS.string(take("subtitle"), "aps.alert.subtitle"),
            body: try APS.string(take("body"), "aps.alert.body"),
            launchImage: try APS.string(take("launch-image"), "aps.alert.launch-image"),
            titleLocKey: try APS.string(take("title-loc-key"), "aps.alert.title-loc-key"),
            titleLocArgs: try APS.strings(take("title-loc-args"), "aps.alert.title-loc-args"),
            subtitleLocKey: try APS.string(take("subtitle-loc-key"), "aps.alert.subtitle-loc-key"),
            subtitleLocArgs: try APS.strings(take("subtitle-loc-args"), "aps.alert.subtitle-loc-args"),
            locKey: try APS.string(take("loc-key"), "aps.alert.loc-key"),
            locArgs: try APS.strings(take("loc-args"), "aps.alert.loc-args"))
        passThrough = rest
    }
}
