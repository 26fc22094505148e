import Foundation
import PushfanCore

/// Parses bulk-import lines (NDJSON or CSV) into validated devices. A bad line yields an
/// error with its reason; the caller reports it with the line number and goes on.
package struct DeviceImportParser: Sendable {
    package enum Format: String, Sendable { case ndjson, csv }

    package let format: Format
    /// CSV columns from the header line; nil until it was read.
    private var columns: [String]?

    package static let csvColumns: Set<String> = ["device_id", "token", "environment", "locale", "timezone", "app_version", "os_version", "tags", "last_seen"]

    package init(format: Format) { self.format = format }

    /// nil for lines that carry no device (blank lines, the CSV header).
    package mutating func parse(_ line: some StringProtocol) throws(StoreError) -> ValidatedDevice? {
        let text = line.hasSuffix("\r") ? line.dropLast() : line[...]
        // Byte check: iterating Characters of every line is measurably slow.
        if text.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return nil }
        switch format {
        case .ndjson: return try Validation.device(Self.ndjson(String(text)))
        case .csv:
            let fields = try Self.csvFields(String(text))
            guard let columns else {
                try readHeader(fields)
                return nil
            }
            guard fields.count == columns.count else {
                throw StoreError.invalidInput("expected \(columns.count) fields as in the header, found \(fields.count)")
            }
            return try Validation.device(Self.registration(Dictionary(zip(columns, fields), uniquingKeysWith: { first, _ in first })))
        }
    }

    private mutating func readHeader(_ fields: [String]) throws(StoreError) {
        for field in fields where !Self.csvColumns.contains(field) && !field.hasPrefix("attr.") {
            throw StoreError.invalidInput("unknown CSV column '\(field)'; known: \(Self.csvColumns.sorted().joined(separator: ", ")), attr.NAME")
        }
        guard fields.contains("device_id"), fields.contains("token") else {
            throw StoreError.invalidInput("the CSV header must name device_id and token columns")
        }
        columns = fields
    }

    /// Parsed with JSONSerialization rather than a Decodable: several times faster for
    /// these small objects with free-form attributes.
    private static func ndjson(_ text: String) throws(StoreError) -> DeviceRegistration {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
            throw StoreError.invalidInput("not a JSON object")
        }
        func string(_ key: String) throws(StoreError) -> String? {
            switch object[key] {
            case nil, is NSNull: return nil
            case let text as String: return text
            default: throw StoreError.invalidInput("\(key): wrong type, expected a string")
            }
        }
        guard let deviceID = try string("device_id") else { throw StoreError.invalidInput("missing field device_id") }
        guard let token = try string("token") else { throw StoreError.invalidInput("missing field token") }
        var registration = DeviceRegistration(deviceID: deviceID, token: token)
        if let environment = try string("environment") { registration.environment = try APNsEnvironment(parsing: environment) }
        registration.locale = try string("locale")
        registration.timezone = try string("timezone")
        registration.appVersion = try string("app_version")
        registration.osVersion = try string("os_version")
        switch object["tags"] {
        case nil, is NSNull: break
        case let tags as [Any]:
            registration.tags = try tags.map { tag throws(StoreError) in
                guard let text = tag as? String else { throw StoreError.invalidInput("tags: wrong type, expected strings") }
                return text
            }
        default: throw StoreError.invalidInput("tags: wrong type, expected an array of strings")
        }
        switch object["attributes"] {
        case nil, is NSNull: break
        case let attributes as [String: Any]:
            for (key, value) in attributes { registration.attributes[key] = jsonValue(value) }
        default: throw StoreError.invalidInput("attributes: wrong type, expected an object")
        }
        switch object["last_seen"] {
        case nil, is NSNull: break
        case let number as NSNumber where !isBoolean(number) && number.doubleValue == Double(number.int64Value):
            registration.seenAt = number.int64Value
        default: throw StoreError.invalidInput("last_seen: wrong type, expected milliseconds since the epoch")
        }
        return registration
    }

    /// JSONSerialization gives booleans as NSNumber too; their type encoding is "c".
    private static func isBoolean(_ number: NSNumber) -> Bool { String(cString: number.objCType) == "c" }

    private static func jsonValue(_ value: Any) -> JSONValue {
        switch value {
        case let text as String: return .string(text)
        case let number as NSNumber:
            if isBoolean(number) { return .bool(number.boolValue) }
            let type = String(cString: number.objCType)
            return type == "d" || type == "f" ? .number(number.doubleValue) : .int(number.int64Value)
        case let array as [Any]: return .array(array.map(jsonValue))
        case let object as [String: Any]: return .object(object.mapValues(jsonValue))
        default: return .null
        }
    }

    private static func registration(_ row: [String: String]) throws(StoreError) -> DeviceRegistration {
        func value(_ name: String) -> String? { row[name].flatMap { $0.isEmpty ? nil : $0 } }
        var registration = DeviceRegistration(deviceID: row["device_id"] ?? "", token: row["token"] ?? "")
        if let environment = value("environment") { registration.environment = try APNsEnvironment(parsing: environment) }
        registration.locale = value("locale")
        registration.timezone = value("timezone")
        registration.appVersion = value("app_version")
        registration.osVersion = value("os_version")
        registration.tags = value("tags").map { $0.split(separator: ";").map(String.init) } ?? []
        if let seen = value("last_seen") {
            guard let millis = Int64(seen) else { throw StoreError.invalidInput("last_seen must be milliseconds since the epoch, got '\(seen)'") }
            registration.seenAt = millis
        }
        for (column, text) in row where column.hasPrefix("attr.") && !text.isEmpty {
            // Numbers stay numbers so that numeric segment comparisons work.
            registration.attributes[String(column.dropFirst(5))] = .inferred(from: text)
        }
        return registration
    }

    /// RFC 4180 fields: commas separate, double quotes quote, `""` is a quote.
    static func csvFields(_ line: String) throws(StoreError) -> [String] {
        var fields: [String] = []
        var current = ""
        var quoted = false
        var iterator = line.makeIterator()
        var afterQuote = false
        while let character = iterator.next() {
            if quoted {
                if character == "\"" {
                    quoted = false
                    afterQuote = true
                } else {
                    current.append(character)
                }
            } else if character == "\"" {
                if afterQuote { current.append("\"") }
                quoted = true
                afterQuote = false
            } else if character == "," {
                fields.append(current)
                current = ""
                afterQuote = false
            } else {
                current.append(character)
                afterQuote = false
            }
        }
        guard !quoted else { throw StoreError.invalidInput("unterminated quoted field") }
        fields.append(current)
        return fields
    }
}
