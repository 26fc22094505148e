import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport

/// Reads one NDJSON import line straight from its bytes into a `DeviceRegistration`.
///
/// Why not JSONSerialization: it builds an `NSDictionary` of `Any` for every line and the
/// casts back cost more than the rest of an import together (profiled at about 60% of the
/// parsing thread). This reader follows RFC 8259's grammar for the whole line, builds
/// strings only for the fields a device has, and keeps attributes as `JSONValue`.
package final class DeviceJSONReader {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    /// Nesting allowed inside `attributes` and ignored members.
    private static let maxDepth = 32

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private static let notAnObject = StoreError.invalidInput("not a JSON object")

    static func registration(_ line: UnsafeRawBufferPointer) throws(StoreError) -> DeviceRegistration {
        try DeviceJSONReader(line).readDevice(deviceID: nil)
    }

    /// One device as the API receives it: `deviceID` from the path; a `device_id` in the
    /// body must be the same.
    package static func registration(json: [UInt8], deviceID: String) throws(StoreError) -> DeviceRegistration {
        let registration = json.withUnsafeBytes { raw -> Result<DeviceRegistration, StoreError> in
            do throws(StoreError) { return .success(try DeviceJSONReader(raw).readDevice(deviceID: deviceID)) } catch { return .failure(error) }
        }
        return try registration.get()
    }

    /// A JSON object as `JSONValue` members (a stored attributes column); nil when the text
    /// is not one object and nothing else. A personalised campaign reads one per device sent;
    /// with JSONDecoder that cost as much as building the device's payload (profiled).
    static func object(_ text: String) -> [String: JSONValue]? {
        var text = text
        return text.withUTF8 { bytes -> [String: JSONValue]? in
            let reader = DeviceJSONReader(UnsafeRawBufferPointer(bytes))
            reader.skipSpace()
            guard reader.peek == UInt8(ascii: "{"), case .object(let members)? = try? reader.readValue(depth: 0) else { return nil }
            reader.skipSpace()
            return reader.index == bytes.count ? members : nil
        }
    }

    /// One of `tokens`: `{"kind", …}` with the rest as `KindToken.read` takes it.
    private static func kindToken(_ item: JSONValue, _ position: Int) throws(StoreError) -> KindToken {
        let field = "tokens[\(position)]."
        guard case .object(var members) = item else { throw StoreError.invalidInput("tokens[\(position)]: wrong type, expected an object") }
        guard case .string(let name)? = members.removeValue(forKey: "kind"), let kind = APNsTokenKind(rawValue: name) else {
            throw StoreError.invalidInput("\(field)kind: one of \(APNsTokenKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return try KindToken.read(members, kind: kind, field: field)
    }

    private func readDevice(deviceID pathID: String?) throws(StoreError) -> DeviceRegistration {
        skipSpace()
        guard peek == UInt8(ascii: "{") else { throw Self.notAnObject }
        var deviceID: String?
        var token: String?
        var environment: String?
        var registration = DeviceRegistration(deviceID: "", token: "")
        try readMembers { key throws(StoreError) in
            switch key {
            case "device_id": deviceID = try readOptionalString(key)
            case "token": token = try readOptionalString(key)
            case "environment": environment = try readOptionalString(key)
            case "locale": registration.locale = try readOptionalString(key)
            case "timezone": registration.timezone = try readOptionalString(key)
            case "user_id": if let user = try readOptionalString(key) { registration.attributes["user_id"] = .string(user) }
            case "app_version": registration.appVersion = try readOptionalString(key)
            case "os_version": registration.osVersion = try readOptionalString(key)
            case "tags":
                switch try readValue(depth: 0) {
                case .null: break
                case .array(let items):
                    registration.tags = try items.map { item throws(StoreError) in
                        guard case .string(let text) = item else { throw StoreError.invalidInput("tags: wrong type, expected strings") }
                        return text
                    }
                default: throw StoreError.invalidInput("tags: wrong type, expected an array of strings")
                }
            case "attributes":
                switch try readValue(depth: 0) {
                case .null: break
                // A top-level `user_id` wins over one inside `attributes`, in either order.
                case .object(let members): registration.attributes = members.merging(registration.attributes) { _, topLevel in topLevel }
                default: throw StoreError.invalidInput("attributes: wrong type, expected an object")
                }
            case "quiet_hours":
                switch try readValue(depth: 0) {
                case .null: break
                case .object(let window):
                    func time(_ name: String) throws(StoreError) -> String? {
                        switch window[name] {
                        case nil, .null?: return nil
                        case .string(let text)?: return text
                        default: throw StoreError.invalidInput("quiet_hours.\(name): wrong type, expected a time like \"22:00\"")
                        }
                    }
                    registration.quietHours = try Validation.quietHours(start: try time("start"), end: try time("end"))
                default: throw StoreError.invalidInput("quiet_hours: wrong type, expected an object like {\"start\": \"22:00\", \"end\": \"07:00\"}")
                }
            case "tokens":
                switch try readValue(depth: 0) {
                case .null: break
                case .array(let items): registration.tokens = try items.enumerated().map { position, item throws(StoreError) in try Self.kindToken(item, position) }
                default: throw StoreError.invalidInput("tokens: wrong type, expected an array of {\"kind\", \"token\", …}")
                }
            case "last_seen":
                switch try readValue(depth: 0) {
                case .null: break
                case .int(let milliseconds): registration.seenAt = milliseconds
                case .number(let value) where value == value.rounded() && abs(value) < 9.2e18: registration.seenAt = Int64(value)
                default: throw StoreError.invalidInput("last_seen: wrong type, expected milliseconds since the epoch")
                }
            default:
                _ = try readValue(depth: 0)
            }
        }
        skipSpace()
        guard index == bytes.count else { throw Self.notAnObject }
        if let pathID, let deviceID, deviceID != pathID {
            throw StoreError.invalidInput("device_id: \(deviceID.debugDescription) in the body is not the device \(pathID.debugDescription) of the path")
        }
        guard let deviceID = deviceID ?? pathID else { throw StoreError.invalidInput("missing field device_id") }
        guard let token else { throw StoreError.invalidInput("missing field token") }
        registration.deviceID = deviceID
        registration.token = token
        if let environment { registration.environment = try APNsEnvironment(parsing: environment) }
        return registration
    }

    /// An object at `index` (which is at its `{`): `member` reads each value after its key.
    private func readMembers(_ member: (String) throws(StoreError) -> Void) throws(StoreError) {
        index += 1
        skipSpace()
        if take(UInt8(ascii: "}")) { return }
        // Objects are small (a device's fields, at most 100 attributes): a list is cheaper
        // than a set to find a key given twice, which two readers could read two ways.
        var keys: [String] = []
        while true {
            skipSpace()
            guard peek == UInt8(ascii: "\"") else { throw Self.notAnObject }
            let key = try readString()
            guard !keys.contains(key) else { throw StoreError.invalidInput("duplicate key \(Validation.clip(key).debugDescription): a JSON object names each key once") }
            keys.append(key)
            skipSpace()
            guard take(UInt8(ascii: ":")) else { throw Self.notAnObject }
            skipSpace()
            try member(key)
            skipSpace()
            if take(UInt8(ascii: ",")) { continue }
            guard take(UInt8(ascii: "}")) else { throw Self.notAnObject }
            return
        }
    }

    private func readOptionalString(_ key: String) throws(StoreError) -> String? {
        if peek == UInt8(ascii: "\"") { return try readString() }
        guard case .null = try readValue(depth: 0) else { throw StoreError.invalidInput("\(key): wrong type, expected a string") }
        return nil
    }

    // MARK: JSON grammar

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D {
            index += 1
        }
    }

    private func readValue(depth: Int) throws(StoreError) -> JSONValue {
        guard depth <= Self.maxDepth else { throw StoreError.invalidInput("nested deeper than \(Self.maxDepth) levels") }
        guard let byte = peek else { throw Self.notAnObject }
        switch byte {
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "{"):
            var members: [String: JSONValue] = [:]
            try readMembers { key throws(StoreError) in members[key] = try readValue(depth: depth + 1) }
            return .object(members)
        case UInt8(ascii: "["):
            index += 1
            var items: [JSONValue] = []
            skipSpace()
            if take(UInt8(ascii: "]")) { return .array(items) }
            while true {
                skipSpace()
                items.append(try readValue(depth: depth + 1))
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "]")) else { throw Self.notAnObject }
                return .array(items)
            }
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        default: return try readNumber()
        }
    }

    private func literal(_ word: StaticString, _ value: JSONValue) throws(StoreError) -> JSONValue {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
              memcmp(bytes.baseAddress! + index, word.utf8Start, count) == 0
        else { throw Self.notAnObject }
        index += count
        return value
    }

    private func readNumber() throws(StoreError) -> JSONValue {
        let start = index
        _ = take(UInt8(ascii: "-"))
        guard let first = peek, (0x30...0x39).contains(first) else { throw Self.notAnObject }
        index += 1
        if first != 0x30 { while let digit = peek, (0x30...0x39).contains(digit) { index += 1 } }
        var integral = true
        if take(UInt8(ascii: ".")) {
            integral = false
            guard let digit = peek, (0x30...0x39).contains(digit) else { throw Self.notAnObject }
            while let digit = peek, (0x30...0x39).contains(digit) { index += 1 }
        }
        if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
            integral = false
            if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
            guard let digit = peek, (0x30...0x39).contains(digit) else { throw Self.notAnObject }
            while let digit = peek, (0x30...0x39).contains(digit) { index += 1 }
        }
        let digits = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        if integral {
            guard let value = ASCIIInteger.parse(digits) else {
                throw StoreError.invalidInput("an integer beyond 64 bits would lose its digits: send it as a string")
            }
            return .int(value)
        }
        guard let value = Double(String(decoding: digits, as: UTF8.self)) else { throw Self.notAnObject }
        guard value.isFinite else { throw StoreError.invalidInput("a number beyond the range of a double (about 1.8e308)") }
        return .number(value)
    }

    /// A string at `index` (which is at its opening quote): escapes resolved, UTF-8 checked.
    private func readString() throws(StoreError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes. ASCII needs no UTF-8 validation (the generic validating
        // initializer cost a quarter of parsing).
        var union: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if union < 0x80 { return String(decoding: raw, as: UTF8.self) }
                guard let text = String(validating: raw, as: UTF8.self) else { throw StoreError.invalidInput("not valid UTF-8") }
                return text
            }
            union |= byte
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw Self.notAnObject }
            index += 1
        }
        // Escapes: find the closing quote, then resolve the string whole.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let unescaped = JSONStringEscapes.resolve(raw) else { throw Self.notAnObject }
                guard let text = String(validating: unescaped, as: UTF8.self) else { throw StoreError.invalidInput("not valid UTF-8") }
                return text
            }
            guard byte >= 0x20 else { throw Self.notAnObject }
            index += byte == UInt8(ascii: "\\") ? 2 : 1
        }
        throw Self.notAnObject
    }
}
