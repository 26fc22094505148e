import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

/// A payload that must be refused, with the error a user has to see.
struct RejectCase: Sendable, CustomTestStringConvertible {
    let name: String
    let payload: [UInt8]
    /// `MessageDecodingError.code`.
    let code: String
    /// `MessageDecodingError.field`: where the problem is.
    let field: String
    /// Text the reason must contain, so the message says what is wrong.
    let mentions: String

    init(_ name: String, json: String, code: String, field: String, mentions: String) {
        self.name = name
        self.payload = Array(json.utf8)
        self.code = code
        self.field = field
        self.mentions = mentions
    }

    init(_ name: String, bytes: [UInt8], code: String, field: String, mentions: String) {
        self.name = name
        self.payload = bytes
        self.code = code
        self.field = field
        self.mentions = mentions
    }

    init(_ name: String, value: JSONValue, code: String, field: String, mentions: String) {
        self.init(name, json: value.jsonText, code: code, field: field, mentions: mentions)
    }

    var testDescription: String { name }

    /// Decodes the payload as `M`, expecting the described refusal.
    func check<M: VersionedMessage>(as type: M.Type, sourceLocation: SourceLocation = #_sourceLocation) {
        let result = Result { () throws(MessageDecodingError) -> M in
            try MessageCodec.decode(M.self, from: payload)
        }
        guard case .failure(let error) = result else {
            Issue.record("\(name): payload was accepted", sourceLocation: sourceLocation)
            return
        }
        #expect(error.code == code, "\(name): \(error)", sourceLocation: sourceLocation)
        #expect(error.field == field, "\(name): \(error)", sourceLocation: sourceLocation)
        #expect(error.reason.contains(mentions), "\(name): \(error)", sourceLocation: sourceLocation)
        // The description leads with the field, so a log line says where.
        if !field.isEmpty {
            #expect(error.description.hasPrefix("\(field): "), "\(name): \(error)", sourceLocation: sourceLocation)
        }
        #expect(MessageDecodingError.allCodes.contains(error.code), sourceLocation: sourceLocation)
    }
}

extension JSONValue {
    /// Compact JSON text of the value.
    var jsonText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Test values are finite; encoding cannot fail.
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// A copy with the member at a dotted path set (nil removes it); missing
    /// objects on the way are created.
    func setting(_ path: String, _ value: JSONValue?) -> JSONValue {
        setting(path.split(separator: ".").map(String.init)[...], value)
    }

    private func setting(_ keys: ArraySlice<String>, _ value: JSONValue?) -> JSONValue {
        guard let key = keys.first else { return value ?? .null }
        var members = objectValue ?? [:]
        if keys.count == 1 {
            members[key] = value
        } else {
            members[key] = (members[key] ?? .object([:])).setting(keys.dropFirst(), value)
        }
        return .object(members)
    }
}

/// Decodes, failing the test with the error's description when refused.
func decodeOrRecord<M: VersionedMessage>(
    _ type: M.Type, _ bytes: some Collection<UInt8>, sourceLocation: SourceLocation = #_sourceLocation
) -> M? {
    do {
        return try MessageCodec.decode(M.self, from: bytes)
    } catch {
        Issue.record("refused: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The repository root, found from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()  // Tests/PushfanMessagesTests
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()


