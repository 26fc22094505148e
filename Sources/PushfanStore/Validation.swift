import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSchedule
import PushfanSegments
import PushfanSupport

/// A registration that passed validation, normalised and ready to write.
package struct ValidatedDevice: Sendable, Equatable {
    package let deviceID: String
    package let token: String
    package let environment: APNsEnvironment
    package let locale: String?
    package let timezone: String?
    package let appVersion: String?
    package let appVersionKey: String?
    package let osVersion: String?
    package let osVersionKey: String?
    package let tags: [String]
    package let attributesJSON: String
    package let seenAt: Int64?
    package var quietHours: QuietHours? = nil
    /// Its user (the `user_id` attribute), if it has one.
    package var userID: String? = nil
    /// Its tokens of other kinds, checked (`KindToken.validated`).
    package var tokens: [KindToken] = []
}

/// Input rules for the store; every refusal says what was wrong.
package enum Validation {
    static let maxTagLength = 64
    static let maxTags = 64
    static let maxAttributes = 100
    /// Tokens of other kinds in one registration: one per kind, a few Live Activities.
    static let maxKindTokens = 32
    /// The attributes of one device as stored JSON: 100 of them at 160 bytes each.
    static let maxAttributeBytes = 16 * 1024
    /// IANA zone names, read once: building a `TimeZone` per device is slow.
    static let knownTimeZones: Set<String> = Set(TimeZone.knownTimeZoneIdentifiers).union(["UTC", "GMT"])

    package static func appKey(_ app: String) throws(StoreError) {
        guard (1...128).contains(app.utf8.count),
              app.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._:-".unicodeScalars.contains($0)) })
        else { throw StoreError.invalidInput("app key must be 1-128 characters of A-Z a-z 0-9 . _ : -, got '\(clip(app))'") }
    }

    /// The one rule for device ids, the same as for every id on the topics (docs/messages.md):
    /// a device id is part of its result's Kafka key, where `/` and `#` separate ids.
    package static func deviceID(_ id: String) throws(StoreError) {
        guard Rules.isIdentifier(id) else {
            throw StoreError.invalidInput(
                "device id must be 1-\(Campaign.maxIdentifierLength) characters of A-Z a-z 0-9 . _ : - (it is part of result keys), got \(clip(id).debugDescription)")
        }
    }

    /// Template names follow the id rule, as `notification.template` does.
    package static func templateName(_ name: String) throws(StoreError) {
        guard Rules.isIdentifier(name) else {
            throw StoreError.invalidInput("template name must be 1-\(Campaign.maxIdentifierLength) characters of A-Z a-z 0-9 . _ : -, got \(clip(name).debugDescription)")
        }
    }

    /// Quoted input in a refusal stays short, whatever was sent.
    static func clip(_ text: String) -> String {
        text.count <= 40 ? text : String(text.prefix(40)) + "…"
    }

    package static func segmentName(_ name: String) throws(StoreError) {
        guard (1...128).contains(name.utf8.count),
              name.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) })
        else { throw StoreError.invalidInput("segment name must be 1-128 characters of A-Z a-z 0-9 . _ -, got '\(clip(name))'") }
    }

    /// Lowercase even-length hex of a sane length (APNs tokens are 32 bytes today; Live
    /// Activity tokens of 80 bytes were seen).
    package static func token(_ token: String) throws(StoreError) -> String {
        do {
            return try DeviceToken(token).hex
        } catch {
            throw StoreError.invalidInput("\(error)")
        }
    }

    /// `de-DE` and `de_de` become `de_DE`; the language is lowercased, the region uppercased.
    package static func locale(_ text: String) throws(StoreError) -> String {
        // Already canonical (the common case in imports): `ll` or `ll_RR`.
        let bytes = Array(text.utf8)
        let lower = { (byte: UInt8) in byte >= 0x61 && byte <= 0x7A }
        let upper = { (byte: UInt8) in byte >= 0x41 && byte <= 0x5A }
        if (bytes.count == 2 && lower(bytes[0]) && lower(bytes[1]))
            || (bytes.count == 5 && lower(bytes[0]) && lower(bytes[1]) && bytes[2] == 0x5F && upper(bytes[3]) && upper(bytes[4])) {
            return text
        }
        let parts = text.split(whereSeparator: { $0 == "-" || $0 == "_" }).map(String.init)
        guard text.split(separator: "_", omittingEmptySubsequences: false).allSatisfy({ !$0.isEmpty }),
              text.split(separator: "-", omittingEmptySubsequences: false).allSatisfy({ !$0.isEmpty }) else {
            throw StoreError.invalidInput("locale must look like en, en_US or zh_Hant_TW, got '\(clip(text))'")
        }
        guard (1...3).contains(parts.count), parts.allSatisfy({ !$0.isEmpty && $0.count <= 8 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }) else {
            throw StoreError.invalidInput("locale must look like en, en_US or zh_Hant_TW, got '\(clip(text))'")
        }
        var normalized = [parts[0].lowercased()]
        for part in parts.dropFirst() {
            normalized.append(part.count == 2 ? part.uppercased() : part.prefix(1).uppercased() + part.dropFirst().lowercased())
        }
        return normalized.joined(separator: "_")
    }

    /// A-Z a-z 0-9 . _ -
    static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2E || byte == 0x5F || byte == 0x2D
    }

    /// C0 and C1 control characters (NUL, newlines, escapes...): a cheap byte check.
    static func hasControlCharacters(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F } || text.unicodeScalars.contains { (0x80..<0xA0).contains($0.value) }
    }

    /// `now`: the time `last_seen` may not be more than a day past.
    package static func device(_ registration: DeviceRegistration, now: Int64) throws(StoreError) -> ValidatedDevice {
        let id = registration.deviceID
        try deviceID(id)
        let token = try token(registration.token)
        let locale = try registration.locale.map(locale)
        if let timezone = registration.timezone { try timeZone(timezone) }
        var tags: [String] = []
        for tag in registration.tags {
            guard (1...maxTagLength).contains(tag.utf8.count), !hasControlCharacters(tag) else {
                throw StoreError.invalidInput("tag must be 1-\(maxTagLength) bytes without control characters, got '\(clip(tag))'")
            }
            if !tags.contains(tag) { tags.append(tag) }
        }
        guard tags.count <= maxTags else { throw StoreError.invalidInput("at most \(maxTags) tags per device") }
        for key in registration.attributes.keys {
            guard (1...64).contains(key.utf8.count), key.utf8.allSatisfy(isNameByte) else {
                throw StoreError.invalidInput("attribute name must be 1-64 characters of A-Z a-z 0-9 . _ -, got '\(clip(key))'")
            }
        }
        var userID: String?
        if let user = registration.attributes[Users.attribute] {
            // The device's user (`Users`): looked up as text, so only text is one.
            guard case .string(let id) = user else {
                throw StoreError.invalidInput("attributes.user_id: the device's user is a string (or absent), got \(user.compactJSON)")
            }
            try Users.checkID(id, field: "user_id")
            userID = id
        }
        guard registration.attributes.count <= maxAttributes else {
            throw StoreError.invalidInput("attributes: at most \(maxAttributes) per device, got \(registration.attributes.count)")
        }
        // From 2000 to a day ahead (clocks drift); anything else is a unit or a client mistake.
        if let seen = registration.seenAt, !(946_684_800_000...(now + 86_400_000)).contains(seen) {
            throw StoreError.invalidInput("last_seen: milliseconds since the epoch, from 2000 to a day from now, got \(seen)")
        }
        let attributes = registration.attributes.isEmpty ? "{}" : JSONValue.object(registration.attributes).compactJSON
        guard attributes.utf8.count <= maxAttributeBytes else {
            throw StoreError.invalidInput("attributes: at most \(maxAttributeBytes) bytes as JSON per device, got \(attributes.utf8.count)")
        }
        guard registration.tokens.count <= maxKindTokens else {
            throw StoreError.invalidInput("tokens: at most \(maxKindTokens) per registration, got \(registration.tokens.count)")
        }
        var kindTokens: [KindToken] = []
        for (position, kindToken) in registration.tokens.enumerated() {
            do { kindTokens.append(try kindToken.validated()) } catch { throw StoreError.invalidInput("tokens[\(position)].\(error.message)") }
        }
        return ValidatedDevice(
            deviceID: id, token: token, environment: registration.environment, locale: locale, timezone: registration.timezone,
            appVersion: registration.appVersion, appVersionKey: registration.appVersion.flatMap(VersionKey.key),
            osVersion: registration.osVersion, osVersionKey: registration.osVersion.flatMap(VersionKey.key),
            tags: tags, attributesJSON: attributes, seenAt: registration.seenAt, quietHours: registration.quietHours, userID: userID,
            tokens: kindTokens)
    }

    /// Quiet hours from their `HH:MM` start and end: both or neither.
    package static func quietHours(start: String?, end: String?) throws(StoreError) -> QuietHours? {
        switch (start, end) {
        case (nil, nil): return nil
        case (let start?, let end?):
            do { return try QuietHours(start: start, end: end) } catch { throw StoreError.invalidInput(error.description) }
        default: throw StoreError.invalidInput("quiet hours need both a start and an end, like 22:00 and 07:00")
        }
    }

    /// An IANA zone name. Foundation's list lacks some current names the system's zone
    /// database has (`Asia/Kolkata` beside the old `Asia/Calcutta`), so a name it does not
    /// list is looked up once in the database and remembered.
    package static func timeZone(_ name: String) throws(StoreError) {
        if knownTimeZones.contains(name) || lookedUpZones.withLock({ $0.contains(name) }) { return }
        guard name.contains("/"), TimeZone(identifier: name) != nil else {
            throw StoreError.invalidInput("unknown time zone '\(name)' (use an IANA name like Europe/Berlin)")
        }
        lookedUpZones.withLock { _ = $0.insert(name) }
    }

    private static let lookedUpZones = Locked<Set<String>>([])
}
