import PushfanSupport

/// A text with placeholders over the device it goes to: `Hi {{ attr.first_name | default: "there" }}`.
///
/// The language is small on purpose, because campaign texts come from outside: a
/// placeholder is one variable and a chain of filters, nothing else: no code, no
/// conditions, no loops. Variables and filters are known when the text is parsed, so an
/// unknown one is refused when the campaign is accepted, never found per device. Rendering
/// yields a plain string that the payload's JSON writer escapes like any other text.
package struct TextTemplate: Hashable, Sendable {
    /// What a placeholder reads from the device.
    package enum Variable: Hashable, Sendable {
        case deviceID, locale, timezone, appVersion, osVersion
        /// A member of the device's attributes object (`attr.first_name`).
        case attribute(String)

        /// The spelling of the fixed `device.` variables.
        static let deviceFields: [(String, Variable)] = [
            ("id", .deviceID), ("locale", .locale), ("timezone", .timezone), ("app_version", .appVersion), ("os_version", .osVersion),
        ]
    }

    /// What a filter does to the value before it.
    enum Filter: Hashable, Sendable {
        /// This text when the value is missing, null or empty.
        case fallback(String)
        case upcase, downcase
        /// The first character in upper case, the rest as it is.
        case capitalize
        /// At most this many characters (grapheme clusters, so an emoji or an accented
        /// letter is never split), the last one `…` when it was cut.
        case truncate(Int)

        static let names = ["default", "upcase", "downcase", "capitalize", "truncate"]
    }

    struct Placeholder: Hashable, Sendable {
        let variable: Variable
        let filters: [Filter]
    }

    enum Piece: Hashable, Sendable {
        case text(String)
        case placeholder(Placeholder)
    }

    let pieces: [Piece]

    /// Longest `truncate` allowed: nothing APNs accepts is longer.
    package static let maxTruncate = 4_096

    /// True when `text` may hold a placeholder: the cheap test before parsing.
    package static func mayHoldPlaceholders(_ text: String) -> Bool { text.utf8.contains(UInt8(ascii: "{")) && text.contains("{{") }

    /// The variables the text reads.
    package var variables: [Variable] {
        pieces.compactMap { if case .placeholder(let placeholder) = $0 { placeholder.variable } else { nil } }
    }

    /// True when the text has at least one placeholder.
    package var isPersonalised: Bool { !variables.isEmpty }

    /// The text for one device.
    package func render(for device: TemplateDevice) -> String {
        var out = ""
        for piece in pieces {
            switch piece {
            case .text(let text): out += text
            case .placeholder(let placeholder):
                var value = device.value(of: placeholder.variable)
                for filter in placeholder.filters { value = filter.apply(to: value) }
                out += value ?? ""
            }
        }
        return out
    }
}

extension TextTemplate.Filter {
    /// Missing values (nil) pass through every filter but `default`.
    func apply(to value: String?) -> String? {
        switch self {
        case .fallback(let text): return (value ?? "").isEmpty ? text : value
        case .upcase: return value?.uppercased()
        case .downcase: return value?.lowercased()
        case .capitalize:
            guard let value, let first = value.first else { return value }
            return first.uppercased() + value.dropFirst()
        case .truncate(let limit):
            guard let value, value.count > limit else { return value }
            return String(value.prefix(limit - 1)) + "…"
        }
    }
}

/// The traits of one device that placeholders read.
package struct TemplateDevice: Sendable, Equatable {
    package var id: String
    package var locale: String?
    package var timezone: String?
    package var appVersion: String?
    package var osVersion: String?
    package var attributes: [String: JSONValue]

    package init(
        id: String, locale: String? = nil, timezone: String? = nil, appVersion: String? = nil, osVersion: String? = nil,
        attributes: [String: JSONValue] = [:]
    ) {
        (self.id, self.locale, self.timezone, self.appVersion, self.osVersion, self.attributes) = (id, locale, timezone, appVersion, osVersion, attributes)
    }

    /// A variable's text; nil when the device has none. An attribute that is a string,
    /// number or boolean reads as its text (`42`, `2.5`, `true`); null, an object or an
    /// array reads as missing.
    func value(of variable: TextTemplate.Variable) -> String? {
        switch variable {
        case .deviceID: return id
        case .locale: return locale
        case .timezone: return timezone
        case .appVersion: return appVersion
        case .osVersion: return osVersion
        case .attribute(let name):
            switch attributes[name] {
            case .string(let text)?: return text
            case .int(let number)?: return String(number)
            case .number(let number)?: return number.description
            case .bool(let flag)?: return flag ? "true" : "false"
            case .null?, .array?, .object?, nil: return nil
            }
        }
    }
}

/// Why a text's placeholders do not parse: the character position (from 1) and the problem.
package struct TemplateError: Error, Equatable, CustomStringConvertible {
    package let position: Int
    package let message: String

    package var description: String { "at \(position): \(message)" }
}
