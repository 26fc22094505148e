import PushfanMessages
import PushfanSupport

/// Reading a JSON body's fields by name, each refusal a 400 naming the field.
enum BodyFields {
    static func optionalText(_ body: [String: JSONValue], _ field: String) throws -> String? {
        switch body[field] {
        case nil, .null?: return nil
        case .string(let value)?: return value
        default: throw APIError(400, "invalid_input", "\(field): expected a string", field: field)
        }
    }

    static func text(_ body: [String: JSONValue], _ field: String) throws -> String {
        guard let value = try optionalText(body, field), !value.isEmpty else { throw APIError(400, "invalid_input", "\(field): required", field: field) }
        return value
    }

    static func number(_ body: [String: JSONValue], _ field: String) throws -> Int? {
        switch body[field] {
        case nil, .null?: return nil
        case .int(let value)?: return Int(value)
        default: throw APIError(400, "invalid_input", "\(field): expected a whole number", field: field)
        }
    }
}
