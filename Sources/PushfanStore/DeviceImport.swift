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
        if text.allSatisfy(\.isWhitespace) { return nil }
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

    private struct Line: Decodable {
        let device_id: String
        let token: String
        let environment: String?
        let locale: String?
        let timezone: String?
        let app_version: String?
        let os_version: String?
        let tags: [String]?
        let attributes: [String: JSONValue]?
        let last_seen: Int64?
    }

    private static func ndjson(_ text: String) throws(StoreError) -> DeviceRegistration {
        let line: Line
        do {
            line = try JSONDecoder().decode(Line.self, from: Data(text.utf8))
        } catch let DecodingError.keyNotFound(key, _) {
            throw StoreError.invalidInput("missing field \(key.stringValue)")
        } catch let DecodingError.typeMismatch(_, context) {
            throw StoreError.invalidInput("\(context.codingPath.map(\.stringValue).joined(separator: ".")): wrong type")
        } catch {
            throw StoreError.invalidInput("not a JSON object")
        }
        var registration = DeviceRegistration(deviceID: line.device_id, token: line.token)
        if let environment = line.environment { registration.environment = try APNsEnvironment(parsing: environment) }
        registration.locale = line.locale
        registration.timezone = line.timezone
        registration.appVersion = line.app_version
        registration.osVersion = line.os_version
        registration.tags = line.tags ?? []
        registration.attributes = line.attributes ?? [:]
        registration.seenAt = line.last_seen
        return registration
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
