import Foundation
import PushfanSupport

/// One APNs request, checked against the provider API's header and payload
/// rules when it is made: a value of this type is something APNs can accept,
/// short of the token's and credentials' standing with Apple.
///
/// The rules enforced here (see docs/apns.md):
/// - the topic gets its push type's suffix (`.voip`, `.push-type.liveactivity`,
///   ...) unless it already ends with it; a topic carrying another push type's
///   suffix is refused;
/// - background: priority 5, `content-available: 1`, no alert, sound or badge;
/// - liveactivity: `event` and `timestamp`; `content-state` for start and
///   update; `attributes-type` and `attributes` for start;
/// - mdm: no `aps`, a string `mdm` (the PushMagic) beside it;
/// - collapse id: 1 to 64 bytes, no control characters;
/// - expiration: epoch seconds, 0 meaning try once;
/// - payload: at most 4,096 bytes (5,120 for VoIP) as serialised.
package struct APNsNotification: Sendable, Hashable {
    /// `apns-priority`.
    package enum Priority: Int, Sendable, Hashable, CaseIterable {
        /// 10: deliver immediately. APNs' default.
        case immediate = 10
        /// 5: deliver when it suits the device's power state; the only value
        /// allowed for background pushes.
        case powerConsiderate = 5
        /// 1: power-considerate and never wakes the device.
        case low = 1
    }

    /// `apns-expiration`: until when APNs stores and retries the notification
    /// for an offline device. Pushfan's `RetryPolicy` stops resending after it
    /// too.
    package enum Expiration: Sendable, Hashable {
        /// No header: APNs applies its own storage policy.
        case unspecified
        /// `0`: deliver now or never; APNs tries once and does not store it.
        case immediately
        /// Epoch seconds.
        case at(epochSeconds: Int64)

        /// Expires at `date`, rounded down to whole seconds.
        package static func until(_ date: Date) -> Expiration {
            .at(epochSeconds: Int64(date.timeIntervalSince1970.rounded(.down)))
        }

        /// A campaign's `options.expiration`: nil, 0 or epoch seconds.
        package init(epochSeconds: Int64?) {
            switch epochSeconds {
            case nil: self = .unspecified
            case 0?: self = .immediately
            case let seconds?: self = .at(epochSeconds: seconds)
            }
        }

        /// The header value; nil means no header.
        package var headerValue: String? {
            switch self {
            case .unspecified: return nil
            case .immediately: return "0"
            case .at(let seconds): return String(seconds)
            }
        }
    }

    /// Where a request goes: one device's token (`/3/device/<token>`), or an iOS 18
    /// broadcast channel (`/4/broadcasts/apps/<bundle id>` with `apns-channel-id`).
    package enum Destination: Sendable, Hashable {
        case device(DeviceToken)
        case channel(String)
    }

    package let destination: Destination
    /// The device's token; nil for a broadcast.
    package var token: DeviceToken? {
        if case .device(let token) = destination { token } else { nil }
    }
    /// `apns-topic` as sent: the bundle id with the push type's suffix.
    package let topic: String
    /// `apns-push-type`.
    package let pushType: APNsPushType
    package let priority: Priority
    package let expiration: Expiration
    /// `apns-collapse-id`: notifications with the same id replace each other
    /// on the device, which also hides a duplicate from a resend.
    package let collapseID: String?
    /// `apns-id`: sent on every request (so a retry carries the same id and a
    /// rejection can be matched), lowercase in the header.
    package let apnsID: UUID
    /// The serialised payload; `payload.count` is what APNs measures.
    package let payload: Data

    /// Longest `apns-collapse-id`, in UTF-8 bytes.
    package static let maxCollapseIDBytes = 64

    /// A random (version 4) UUID for `apns-id`. Foundation's `UUID()` opens, reads and
    /// closes /dev/urandom on each call on Linux (about a sixth of the sender's CPU in a
    /// profile); this takes its 122 random bits from the system generator (one getrandom
    /// call per 8 bytes), as random and without the file.
    package static func randomID() -> UUID {
        var generator = SystemRandomNumberGenerator()
        let high = (generator.next() as UInt64) & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000  // version 4
        let low = (generator.next() as UInt64) & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000  // variant 10
        func byte(_ value: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: value >> UInt64(56 - 8 * index)) }
        return UUID(uuid: (
            byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5), byte(high, 6), byte(high, 7),
            byte(low, 0), byte(low, 1), byte(low, 2), byte(low, 3), byte(low, 4), byte(low, 5), byte(low, 6), byte(low, 7)))
    }

    /// Builds a request, enforcing the rules above. `topic` is the app's bundle
    /// id; `priority` defaults to 5 for background pushes and 10 otherwise.
    package init(
        token: DeviceToken,
        topic: String,
        pushType: APNsPushType = .alert,
        payload: APNsPayload,
        priority: Priority? = nil,
        expiration: Expiration = .unspecified,
        collapseID: String? = nil,
        apnsID: UUID = APNsNotification.randomID()
    ) throws(APNsRequestError) {
        try self.init(
            token: token, topic: topic, prepared: APNsPreparedPayload(payload, pushType: pushType, priority: priority),
            expiration: expiration, collapseID: collapseID, apnsID: apnsID)
    }

    /// Builds a request from a payload already checked and serialised, for
    /// sending the same content to many devices: only the per-request headers
    /// are checked here.
    package init(
        token: DeviceToken,
        topic: String,
        prepared: APNsPreparedPayload,
        expiration: Expiration = .unspecified,
        collapseID: String? = nil,
        apnsID: UUID = APNsNotification.randomID()
    ) throws(APNsRequestError) {
        self.topic = try Self.requestTopic(topic, pushType: prepared.pushType)
        self.expiration = try Self.check(expiration)
        if let collapseID { try Self.checkCollapseID(collapseID) }
        self.destination = .device(token)
        self.pushType = prepared.pushType
        self.priority = prepared.priority
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = prepared.bytes
    }

    /// A broadcast of a Live Activity update or end to every subscriber of `channel`
    /// (iOS 18). APNs wants `apns-expiration` on every broadcast (a channel without message
    /// storage takes only `0`, which `unspecified` becomes), no collapse id, and the bundle
    /// id in the path rather than a topic header.
    package init(
        channel: String, bundleID: String, prepared: APNsPreparedPayload, expiration: Expiration = .immediately,
        apnsID: UUID = APNsNotification.randomID()
    ) throws(APNsRequestError) {
        guard prepared.pushType == .liveactivity else {
            throw .pushTypeRule(prepared.pushType, "cannot be broadcast: channels carry Live Activity updates only", field: "apns-push-type")
        }
        if let problem = BroadcastChannel.problem(withID: channel) { throw .invalidChannel(problem) }
        self.topic = try Self.requestTopic(bundleID, pushType: .alert)
        self.expiration = expiration == .unspecified ? .immediately : try Self.check(expiration)
        self.destination = .channel(channel)
        self.pushType = prepared.pushType
        self.priority = prepared.priority
        self.collapseID = nil
        self.apnsID = apnsID
        self.payload = prepared.bytes
    }

    /// `/3/device/<hex token>`, or `/4/broadcasts/apps/<bundle id>` for a broadcast.
    package var path: String {
        switch destination {
        case .device(let token): "/3/device/" + token.hex
        case .channel: "/4/broadcasts/apps/" + topic
        }
    }

    /// `apns-id` as sent: a lowercase UUID.
    package var apnsIDString: String { apnsID.uuidString.lowercased() }

    /// The APNs headers as `writeHeaders` writes them, for reading and tests.
    package var headers: [(String, String)] {
        var collected = CollectedHeaders()
        writeHeaders(to: &collected)
        return collected.pairs
    }

    /// The one encoder of a request's APNs headers, names in lowercase as HTTP/2 requires,
    /// in a fixed order, without intermediate strings: every transport writes what this
    /// writes. Without `authorization`: the transport adds the provider token (or uses the
    /// TLS client certificate).
    package func writeHeaders<Sink: APNsHeaderSink>(to sink: inout Sink) {
        switch destination {
        case .device: Self.emit("apns-topic", topic, to: &sink)
        case .channel(let id): Self.emit("apns-channel-id", id, to: &sink)
        }
        Self.emit("apns-push-type", pushType.rawValue, to: &sink)
        let priorityValue: StaticString = switch priority {
        case .immediate: "10"
        case .powerConsiderate: "5"
        case .low: "1"
        }
        sink.header("apns-priority", UnsafeRawBufferPointer(start: priorityValue.utf8Start, count: priorityValue.utf8CodeUnitCount))
        if let value = expiration.headerValue { Self.emit("apns-expiration", value, to: &sink) }
        if let collapseID { Self.emit("apns-collapse-id", collapseID, to: &sink) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { buffer in
            Self.writeLowercase(apnsID, into: buffer)
            sink.header("apns-id", UnsafeRawBufferPointer(buffer))
        }
    }

    private static func emit<Sink: APNsHeaderSink>(_ name: StaticString, _ value: String, to sink: inout Sink) {
        var value = value
        value.withUTF8 { sink.header(name, UnsafeRawBufferPointer($0)) }
    }

    /// The UUID as APNs wants it: lowercase, with hyphens, 36 bytes.
    private static func writeLowercase(_ uuid: UUID, into buffer: UnsafeMutableBufferPointer<UInt8>) {
        let digits: StaticString = "0123456789abcdef"
        var at = 0
        withUnsafeBytes(of: uuid.uuid) { bytes in
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    buffer[at] = UInt8(ascii: "-")
                    at += 1
                }
                buffer[at] = digits.utf8Start[Int(byte >> 4)]
                buffer[at + 1] = digits.utf8Start[Int(byte & 0x0F)]
                at += 2
            }
        }
    }
}

/// Where `APNsNotification.writeHeaders` writes: a transport's header list or frame. The
/// value's bytes are valid only during the call.
package protocol APNsHeaderSink {
    mutating func header(_ name: StaticString, _ value: UnsafeRawBufferPointer)
}

private struct CollectedHeaders: APNsHeaderSink {
    var pairs: [(String, String)] = []

    mutating func header(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        pairs.append((name.description, String(decoding: value, as: UTF8.self)))
    }
}

// MARK: - Rules

extension APNsNotification {
    /// Suffixes of all push types, to notice a topic meant for another one.
    private static let knownSuffixes: [(suffix: String, pushType: APNsPushType)] =
        APNsPushType.allCases.filter { !$0.topicSuffix.isEmpty }.map { ($0.topicSuffix, $0) }

    /// The topic as sent: `base` checked, with `pushType`'s suffix appended
    /// unless already there.
    package static func requestTopic(_ base: String, pushType: APNsPushType) throws(APNsRequestError) -> String {
        guard !base.isEmpty else { throw .invalidTopic("is empty; give the app's bundle id") }
        if !base.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
            for (offset, character) in base.enumerated() {
                guard let ascii = character.asciiValue, (0x21...0x7E).contains(ascii) else {
                    throw .invalidTopic(
                        "must be a bundle id of printable ASCII; found \(APNsQuote.character(character)) at position \(offset + 1)")
                }
            }
        }
        let suffix = pushType.topicSuffix
        guard !suffix.isEmpty else { return base }
        if base.hasSuffix(suffix) { return base }
        // `.voip` is not a suffix of `.voip-ptt` topics, nor the reverse, so a
        // plain hasSuffix test tells the types apart.
        if let other = knownSuffixes.first(where: { base.hasSuffix($0.suffix) }) {
            throw .invalidTopic(
                "\(APNsQuote.text(base, max: 80)) ends with \(other.suffix), the suffix of \(other.pushType.rawValue) pushes, "
                    + "but the push type is \(pushType.rawValue); give the base bundle id")
        }
        return base + suffix
    }

    /// The push type's payload and priority rules; returns the priority to send.
    fileprivate static func checkRules(
        pushType: APNsPushType, payload: APNsPayload, priority: Priority?
    ) throws(APNsRequestError) -> Priority {
        let aps = payload.aps
        try aps.validate()
        if let required = pushType.requiredPriority, let priority, priority.rawValue != required {
            throw .pushTypeRule(pushType, "must have apns-priority \(required) (APNs refuses \(priority.rawValue)); found \(priority.rawValue)", field: "apns-priority")
        }
        switch pushType {
        case .background:
            for (key, present) in [("alert", aps.alert != nil), ("sound", aps.sound != nil), ("badge", aps.badge != nil)] where present {
                throw .pushTypeRule(.background, "cannot have aps.\(key); remove it or send an alert push", field: "aps.\(key)")
            }
            guard aps.contentAvailable else {
                throw .pushTypeRule(.background, "needs aps.content-available: 1", field: "aps.content-available")
            }
        case .liveactivity:
            guard let event = aps.event else {
                throw .pushTypeRule(.liveactivity, "needs aps.event (start, update or end)", field: "aps.event")
            }
            guard aps.timestamp != nil else {
                throw .pushTypeRule(.liveactivity, "needs aps.timestamp (epoch seconds of this update)", field: "aps.timestamp")
            }
            if event != .end, aps.contentState == nil {
                throw .pushTypeRule(.liveactivity, "with event \(event.rawValue) needs aps.content-state", field: "aps.content-state")
            }
            if event == .start {
                if aps.attributesType == nil {
                    throw .pushTypeRule(.liveactivity, "with event start needs aps.attributes-type", field: "aps.attributes-type")
                }
                if aps.attributes == nil {
                    throw .pushTypeRule(.liveactivity, "with event start needs aps.attributes", field: "aps.attributes")
                }
            }
        case .mdm:
            if !aps.jsonObject.isEmpty {
                throw .pushTypeRule(.mdm, "cannot have aps keys; its payload is {\"mdm\": PushMagic}", field: "aps")
            }
            guard payload.custom["mdm"]?.stringValue != nil else {
                throw .pushTypeRule(.mdm, "needs a string \"mdm\" (the device's PushMagic) beside aps", field: "mdm")
            }
        case .alert, .voip, .complication, .fileprovider, .location, .pushtotalk, .widgets, .controls:
            break
        }
        return priority ?? Priority(rawValue: pushType.defaultPriority) ?? .immediate
    }

    /// `apns-expiration`'s rule: epoch seconds, 0 meaning try once.
    package static func check(_ expiration: Expiration) throws(APNsRequestError) -> Expiration {
        guard case .at(let seconds) = expiration else { return expiration }
        if seconds == 0 { return .immediately }
        if seconds < 0 {
            throw .invalidExpiration("must be seconds since the epoch (0 = try once); found \(seconds)")
        }
        if seconds >= 100_000_000_000 {
            throw .invalidExpiration("must be seconds since the epoch; \(seconds) looks like milliseconds")
        }
        return expiration
    }

    /// `apns-collapse-id`'s rule: 1 to 64 bytes, no control characters.
    package static func checkCollapseID(_ collapseID: String) throws(APNsRequestError) {
        if collapseID.isEmpty {
            throw .invalidCollapseID("must not be empty; leave it out instead")
        }
        let bytes = collapseID.utf8.count
        if bytes > maxCollapseIDBytes {
            throw .invalidCollapseID("is \(bytes) bytes, APNs allows at most \(maxCollapseIDBytes)")
        }
        // A CR or LF would end the header; no control character belongs in one.
        if let bad = collapseID.unicodeScalars.firstIndex(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            let position = collapseID.unicodeScalars.distance(from: collapseID.unicodeScalars.startIndex, to: bad) + 1
            throw .invalidCollapseID(
                "must not contain control characters; found \(APNsQuote.text(String(collapseID.unicodeScalars[bad]))) at position \(position)")
        }
    }
}

/// A payload checked against its push type's rules (background, Live
/// Activity, MDM, priority, size) and serialised once. Only this initializer
/// makes one, so a prepared payload is always one APNs can accept.
package struct APNsPreparedPayload: Sendable, Hashable {
    package let pushType: APNsPushType
    /// The `apns-priority` to send: as given, or 5 for background and 10
    /// otherwise.
    package let priority: APNsNotification.Priority
    /// The exact body, at most `pushType.maxPayloadBytes` long.
    package private(set) var bytes: Data
    /// Where in `bytes` the engagement marker's send id goes (`stamped(sendID:)`); nil
    /// without a marker.
    private(set) var sendIDRange: Range<Int>?

    /// `payload` with a per-device stamp: the custom value under `key` holds a stamp of
    /// `length` characters, written here as a placeholder; `stamped(sendID:)` writes each
    /// device's own into the serialised bytes, so the payload is checked and encoded once.
    /// `value(fill)` is that custom value with the stamp written as `length` copies of `fill`.
    package init(
        _ payload: APNsPayload, pushType: APNsPushType, priority: APNsNotification.Priority?,
        stampUnder key: String, length: Int, value: (Character) -> JSONValue
    ) throws(APNsRequestError) {
        var payload = payload
        try payload.setCustom(value("0"), forKey: key)
        try self.init(payload, pushType: pushType, priority: priority)
        // The stamp's place: where the same payload with another fill differs.
        try payload.setCustom(value("f"), forKey: key)
        let other = payload.encoded(for: pushType)
        guard other.count == bytes.count, let start = zip(bytes, other).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset
        else { preconditionFailure("the stamp is not where the writer put it") }
        sendIDRange = start..<start + length
    }

    /// The payload for one device: its send id written into the marker.
    package func stamped(sendID: String) -> APNsPreparedPayload {
        guard let sendIDRange else { return self }
        precondition(sendID.utf8.count == sendIDRange.count, "a send id is \(sendIDRange.count) characters")
        var copy = self
        copy.bytes.replaceSubrange(sendIDRange, with: sendID.utf8)
        return copy
    }

    package init(
        _ payload: APNsPayload, pushType: APNsPushType, priority: APNsNotification.Priority? = nil
    ) throws(APNsRequestError) {
        self.priority = try APNsNotification.checkRules(pushType: pushType, payload: payload, priority: priority)
        let bytes = payload.encoded(for: pushType)
        guard bytes.count <= pushType.maxPayloadBytes else {
            throw .payloadTooLarge(bytes: bytes.count, limit: pushType.maxPayloadBytes, pushType: pushType)
        }
        self.pushType = pushType
        self.bytes = bytes
    }
}
