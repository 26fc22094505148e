import PushfanSupport

/// Which running Live Activities an update reaches when it names no single activity: every
/// activity of one attributes type whose registered attributes include each given pair, e.g.
/// every `MatchActivity` with `match` = `1234`. In JSON
/// `{"attributes_type": "MatchActivity", "attributes": {"match": "1234"}}` (`attributes` may
/// be left out: every activity of the type).
///
/// The attributes are what the app registered with each update token (the static attributes
/// of its `ActivityAttributes`, as strings), so matching is exact string equality.
package struct ActivityFilter: Hashable, Sendable, Codable {
    /// Most pairs a filter may name.
    package static let maxAttributes = 8
    /// Longest attribute value, in bytes, here and when an update token is registered.
    package static let maxValueBytes = 256

    package var attributesType: String
    package var attributes: [String: String]

    package init(attributesType: String, attributes: [String: String] = [:]) {
        (self.attributesType, self.attributes) = (attributesType, attributes)
    }

    private enum CodingKeys: String, CodingKey {
        case attributesType = "attributes_type", attributes
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        attributesType = try container.field(.attributesType)
        attributes = try container.optionalField(.attributes) ?? [:]
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(attributesType, forKey: .attributesType)
        if !attributes.isEmpty { try container.encode(attributes, forKey: .attributes) }
    }

    /// Checks the type and each pair; `field` is where the filter sits ("audience.activities").
    package func validate(field: String) throws(MessageDecodingError) {
        try Rules.identifier(attributesType, field: "\(field).attributes_type")
        try Self.validate(attributes, field: "\(field).attributes")
    }

    /// The rules for attributes, shared with registration: at most `maxAttributes` pairs,
    /// names that are identifiers, values of at most `maxValueBytes`.
    package static func validate(_ attributes: [String: String], field: String) throws(MessageDecodingError) {
        if attributes.count > maxAttributes {
            throw .invalidField(field, "names \(attributes.count) attributes, at most \(maxAttributes) are allowed")
        }
        for (name, value) in attributes.sorted(by: { $0.key < $1.key }) {
            try Rules.identifier(name, field: "\(field).\(name)")
            if value.utf8.count > maxValueBytes {
                throw .invalidField("\(field).\(name)", "is \(value.utf8.count) bytes, at most \(maxValueBytes) are allowed")
            }
        }
    }
}
