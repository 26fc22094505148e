import Foundation
import PushfanAPNsModel
import PushfanMessages

/// Parses bulk-import lines (NDJSON or CSV) into validated devices. A bad line yields an
/// error with its reason; the caller reports it with the line number and goes on.
package struct DeviceImportParser: Sendable {
    package enum Format: String, Sendable { case ndjson, csv }

    package let format: Format
    /// CSV columns from the header line; nil until it was read.
    private var columns: [String]?
    /// Whether the first line has been seen: it may start with a UTF-8 byte order mark.
    private var pastFirstLine = false

    /// A CSV import whose header has not been read (or was refused): no later line can be
    /// read, so an error now ends the import.
    package var needsHeader: Bool { format == .csv && columns == nil }

    package static let csvColumns: Set<String> = ["device_id", "token", "environment", "locale", "timezone", "app_version", "os_version", "tags", "last_seen", "quiet_start", "quiet_end"]

    /// When the import runs: `last_seen` may not be more than a day past it.
    package let now: Int64

    package init(format: Format, now: Int64) { (self.format, self.now) = (format, now) }

    /// `parse` for a line given as bytes (without its newline), the import's fast path:
    /// NDJSON lines are read without making a `String` of the whole line first.
    package mutating func parse(bytes: UnsafeRawBufferPointer) throws(StoreError) -> ValidatedDevice? {
        var line = bytes
        if !pastFirstLine {
            pastFirstLine = true
            // Spreadsheet exports often begin with a byte order mark; it is not data.
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line = UnsafeRawBufferPointer(rebasing: line.dropFirst(3)) }
        }
        guard format == .ndjson else { return try parse(String(decoding: line, as: UTF8.self)) }
        if line.last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return nil }
        return try Validation.device(DeviceJSONReader.registration(line), now: now)
    }

    /// nil for lines that carry no device (blank lines, the CSV header).
    package mutating func parse(_ line: some StringProtocol) throws(StoreError) -> ValidatedDevice? {
        var text = line.hasSuffix("\r") ? line.dropLast() : line[...]
        if !pastFirstLine {
            pastFirstLine = true
            if text.hasPrefix("\u{FEFF}") { text = text.dropFirst() }
        }
        // Byte check: iterating Characters of every line is measurably slow.
        if text.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return nil }
        switch format {
        case .ndjson:
            let bytes = Array(text.utf8)
            let registration: Result<DeviceRegistration, StoreError> = bytes.withUnsafeBytes { raw in
                do throws(StoreError) { return .success(try DeviceJSONReader.registration(raw)) } catch { return .failure(error) }
            }
            return try Validation.device(registration.get(), now: now)
        case .csv:
            let fields = try Self.csvFields(String(text))
            guard let columns else {
                try readHeader(fields)
                return nil
            }
            guard fields.count == columns.count else {
                throw StoreError.invalidInput("expected \(columns.count) fields as in the header, found \(fields.count)")
            }
            return try Validation.device(Self.registration(Dictionary(zip(columns, fields), uniquingKeysWith: { first, _ in first })), now: now)
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

    private static func registration(_ row: [String: String]) throws(StoreError) -> DeviceRegistration {
        func value(_ name: String) -> String? { row[name].flatMap { $0.isEmpty ? nil : $0 } }
        var registration = DeviceRegistration(deviceID: row["device_id"] ?? "", token: row["token"] ?? "")
        if let environment = value("environment") { registration.environment = try APNsEnvironment(parsing: environment) }
        registration.locale = value("locale")
        registration.timezone = value("timezone")
        registration.appVersion = value("app_version")
        registration.osVersion = value("os_version")
        registration.tags = value("tags").map { $0.split(separator: ";").map(String.init) } ?? []
        registration.quietHours = try Validation.quietHours(start: value("quiet_start"), end: value("quiet_end"))
        if let seen = value("last_seen") {
            guard let millis = Int64(seen) else { throw StoreError.invalidInput("last_seen must be milliseconds since the epoch, got '\(Validation.clip(seen))'") }
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
