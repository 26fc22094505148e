import Foundation
import PushfanTestSupport
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

@Suite("MessageCodec")
struct MessageCodecTests {
    static let minimalCampaign: JSONValue = [
        "v": 1,
        "id": "c1",
        "app": "shop-ios",
        "audience": ["segment": "tag:sports"],
        "notification": ["content": ["default": ["title": "Hi"]]],
    ]

    // MARK: Envelope: bytes, JSON, version

    static let envelopeRejects: [RejectCase] = [
        RejectCase("empty payload", bytes: [], code: "not_json", field: "", mentions: "empty"),
        RejectCase("only whitespace", json: " \n\t", code: "not_json", field: "", mentions: "whitespace"),
        RejectCase("plain text", json: "hello, world", code: "not_json", field: "", mentions: "starts with \"hello, world\""),
        RejectCase("truncated JSON", json: "{\"v\":1,\"id\":\"c1\"", code: "not_json", field: "", mentions: "not valid JSON"),
        RejectCase("trailing text", json: "{\"v\":1} {\"v\":1}", code: "not_json", field: "", mentions: "trailing"),
        RejectCase(
            "bytes that are not UTF-8", bytes: [0x7B, 0x22, 0x76, 0x22, 0x3A, 0x31, 0x2C, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D],
            code: "not_json", field: "", mentions: "UTF-8"),
        RejectCase("raw NUL byte in a string", bytes: Array("{\"v\":1,\"id\":\"a".utf8) + [0] + Array("b\"}".utf8),
                   code: "not_json", field: "", mentions: "raw control character 0x00 at byte 14"),
        RejectCase("lone NUL byte", bytes: [0], code: "not_json", field: "", mentions: "raw control character 0x00 at byte 0"),
        RejectCase("UTF-16 with a byte order mark", bytes: [0xFF, 0xFE] + Array("{\"v\":1}".utf8).flatMap { [$0, 0] },
                   code: "not_json", field: "", mentions: "not valid UTF-8"),
        RejectCase("raw newline inside a string", json: minimalCampaign.jsonText.replacingOccurrences(of: "\"c1\"", with: "\"c\n1\""),
                   code: "not_json", field: "id", mentions: "raw control character"),
        RejectCase("bad escape inside a string", json: minimalCampaign.jsonText.replacingOccurrences(of: "\"Hi\"", with: "\"H\\xi\""),
                   code: "not_json", field: "notification.content.default.title", mentions: "invalid escape"),
        RejectCase("lone surrogate inside custom data", json: minimalCampaign.setting("notification.data", ["x": "X"]).jsonText
                       .replacingOccurrences(of: "\"X\"", with: "\"\\ud800\""),
                   code: "not_json", field: "notification.data.x", mentions: "invalid \\u escape"),
        RejectCase("nesting beyond the parser's limit", json: String(repeating: "[", count: 100_000),
                   code: "wrong_schema", field: String(repeating: "[0]", count: JSONValue.maxDecodingDepth), mentions: "nested more than 64 levels"),
        RejectCase("a key given twice", json: "{\"v\":1,\"id\":\"c1\",\"id\":\"c2\"}", code: "wrong_schema", field: "id", mentions: "duplicate key"),
        RejectCase("a key given twice, once escaped", json: "{\"v\":1,\"id\":\"c1\",\"i\\u0064\":\"c2\"}", code: "wrong_schema", field: "id", mentions: "duplicate key"),
        RejectCase("a nested key given twice", json: minimalCampaign.jsonText.replacingOccurrences(of: "\"title\":\"Hi\"", with: "\"title\":\"Hi\",\"title\":\"Ho\""),
                   code: "wrong_schema", field: "notification.content.default.title", mentions: "duplicate key"),
        RejectCase("top level is an array", json: "[{\"v\":1}]", code: "wrong_schema", field: "", mentions: "must be a JSON object, found an array"),
        RejectCase("top level is a string", json: "\"campaign\"", code: "wrong_schema", field: "", mentions: "must be a JSON object, found a string"),
        RejectCase("top level is a number", json: "42", code: "wrong_schema", field: "", mentions: "must be a JSON object, found a number"),
        RejectCase("top level is null", json: "null", code: "wrong_schema", field: "", mentions: "must be a JSON object"),
        RejectCase("missing v", value: minimalCampaign.setting("v", nil), code: "wrong_schema", field: "v", mentions: "missing"),
        RejectCase("v is a string", value: minimalCampaign.setting("v", "1"), code: "wrong_schema", field: "v", mentions: "integer"),
        RejectCase("v is null", value: minimalCampaign.setting("v", .null), code: "wrong_schema", field: "v", mentions: "integer"),
        RejectCase("v is a fraction", value: minimalCampaign.setting("v", 1.5), code: "wrong_schema", field: "v", mentions: "integer"),
        RejectCase("v is enormous", json: "{\"v\":1e400}", code: "wrong_schema", field: "v", mentions: "integer"),
        RejectCase("v = 2", value: minimalCampaign.setting("v", 2), code: "unsupported_version", field: "v", mentions: "version 2 is not supported"),
        RejectCase("v = 0", value: minimalCampaign.setting("v", 0), code: "unsupported_version", field: "v", mentions: "understands version 1"),
    ]

    @Test("refuses bad envelopes with the right code and field", arguments: envelopeRejects)
    func envelopeRejected(_ reject: RejectCase) {
        reject.check(as: Campaign.self)
    }

    @Test("every record type checks the envelope the same way", arguments: envelopeRejects.prefix(3) + envelopeRejects.suffix(3))
    func envelopeRejectedForEveryType(_ reject: RejectCase) {
        reject.check(as: TaskRecord.self)
        reject.check(as: ResultRecord.self)
        reject.check(as: ControlRecord.self)
        reject.check(as: DeadLetterRecord.self)
    }

    @Test func minimalCampaignDecodes() throws {
        let campaign = try #require(decodeOrRecord(Campaign.self, Array(Self.minimalCampaign.jsonText.utf8)))
        #expect(campaign.id == "c1")
        #expect(campaign.notification.pushType == .alert)
        #expect(campaign.options == Campaign.Options())
    }

    @Test func acceptsAnyByteCollection() throws {
        let text = Self.minimalCampaign.jsonText
        let fromArray = try MessageCodec.decode(Campaign.self, from: Array(text.utf8))
        let fromSlice = try MessageCodec.decode(Campaign.self, from: Array(("  " + text).utf8).dropFirst(2))
        let fromBuffer = try Array(text.utf8).withUnsafeBytes { buffer throws(MessageDecodingError) in
            try MessageCodec.decode(Campaign.self, from: buffer)
        }
        #expect(fromArray == fromSlice)
        #expect(fromArray == fromBuffer)
    }

    @Test func unknownFieldsAreIgnored() throws {
        let text = Self.minimalCampaign.setting("future_field", ["x": 1]).setting("notification.later", true).jsonText
        let campaign = try #require(decodeOrRecord(Campaign.self, Array(text.utf8)))
        #expect(campaign.id == "c1")
    }

    @Test func numberTooLargeInAFieldNamesTheField() throws {
        let text = Self.minimalCampaign.jsonText.replacingOccurrences(of: "\"v\":1", with: "\"v\":1,\"submitted_at\":1e400")
        RejectCase("submitted_at 1e400", json: text, code: "wrong_schema", field: "submitted_at", mentions: "integer")
            .check(as: Campaign.self)
    }

    // MARK: Encoding

    @Test func encodingIsCompactAndDoesNotEscapeSlashes() throws {
        let campaign = try Self.exampleCampaign()
        let text = String(decoding: MessageCodec.encode(campaign), as: UTF8.self)
        #expect(!text.contains("\n"))
        #expect(!text.contains("\": "))
        #expect(!text.contains("\\/"))
        #expect(text.contains("\"deeplink\":\"shop://sale/spring-2026\""))
        #expect(text.contains("\"v\":1"))
    }

    @Test func encodingIsDeterministic() throws {
        let campaign = try Self.exampleCampaign()
        let first = MessageCodec.encode(campaign)
        let again = try MessageCodec.encode(MessageCodec.decode(Campaign.self, from: first))
        #expect(first == again)
    }

    @Test func integersStayIntegers() throws {
        let campaign = try Self.exampleCampaign()
        let text = String(decoding: MessageCodec.encode(campaign), as: UTF8.self)
        #expect(text.contains("\"badge\":1,") || text.contains("\"badge\":1}"))
        #expect(text.contains("\"mutable-content\":1"))
        #expect(text.contains("\"relevance-score\":0.8"))
        #expect(text.contains("\"sale_id\":2026031"))
        #expect(text.contains("\"submitted_at\":1773993600000"))
        #expect(!text.contains("1.0"))
    }

    // MARK: Round trips of every record type

    @Test func campaignRoundTrip() throws {
        let campaign = try Self.exampleCampaign()
        let decoded = try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign))
        #expect(decoded == campaign)
    }

    @Test(arguments: [
        Campaign.Audience.segment("tag:sports and locale in (de_DE, de_AT)"),
        .named("sports-fans-de"),
        .devices(["d1", "d2", "d3"]),
    ])
    func campaignAudienceRoundTrip(_ audience: Campaign.Audience) throws {
        var campaign = try Self.exampleCampaign()
        campaign.audience = audience
        let decoded = try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign))
        #expect(decoded.audience == audience)
    }

    @Test func backgroundCampaignRoundTrip() throws {
        let campaign = Campaign(
            id: "refresh-catalog", app: "shop-ios", audience: .named("active-7d"),
            notification: .init(pushType: .background, aps: ["content-available": 1], data: ["refresh": "catalog"]),
            options: .init(priority: 5, dryRun: true))
        let decoded = try MessageCodec.decode(Campaign.self, from: MessageCodec.encode(campaign))
        #expect(decoded == campaign)
    }

    @Test(arguments: [
        TaskRecord(campaign: "c1", app: "shop-ios", shard: 0, shards: 12, after: nil, through: 1000, estimate: 1000, lane: 0, lanes: 4),
        TaskRecord(campaign: "c1", app: "shop-ios", shard: 3, shards: 12, after: 1000, through: 2000, estimate: 1000, lane: 2, lanes: 4),
        TaskRecord(campaign: "c1", app: "shop-ios", shard: 11, shards: 12, after: 11000, through: nil, estimate: 0, lane: 3, lanes: 4),
    ])
    func taskRoundTrip(_ task: TaskRecord) throws {
        let decoded = try MessageCodec.decode(TaskRecord.self, from: MessageCodec.encode(task))
        #expect(decoded == task)
    }

    @Test(arguments: [
        ResultRecord.device(.init(campaign: CampaignKey(app: "shop", id: "c1"), device: "d1", outcome: .delivered, status: 200,
                                  apnsID: "6a1e5c2e-8a61-4b1c-9a8e-2f4c3f1f7d10", attempts: 1, at: 1_764_489_600_123)),
        .device(.init(campaign: CampaignKey(app: "shop", id: "c1"), device: "d2", outcome: .invalidToken, status: 410, reason: "Unregistered", attempts: 1, at: 1_764_489_600_124)),
        .device(.init(campaign: CampaignKey(app: "shop", id: "c1"), device: "d3", outcome: .skipped, reason: "dry_run", attempts: 0, at: 1_764_489_600_125)),
        .campaign(.init(campaign: "c1", app: "shop-ios", event: .accepted, audience: 100_000, at: 1_764_489_600_000)),
        .campaign(.init(campaign: "c1", app: "shop-ios", event: .progress, audience: 100_000,
                        outcomeCounts: [.delivered: 10, .invalidToken: 2], at: 1_764_489_601_000)),
        .campaign(.init(campaign: "c1", app: "shop-ios", event: .failed, error: "unknown app", at: 1_764_489_602_000)),
    ])
    func resultRoundTrip(_ result: ResultRecord) throws {
        let decoded = try MessageCodec.decode(ResultRecord.self, from: MessageCodec.encode(result))
        #expect(decoded == result)
    }

    @Test(arguments: ControlRecord.Action.allCases)
    func controlRoundTrip(_ action: ControlRecord.Action) throws {
        let control = ControlRecord(campaign: CampaignKey(app: "shop", id: "spring-sale-2026"), action: action, at: 1_764_489_600_000)
        let decoded = try MessageCodec.decode(ControlRecord.self, from: MessageCodec.encode(control))
        #expect(decoded == control)
        #expect(decoded.kafkaKey == "shop/spring-sale-2026")
    }

    @Test func deadLetterRoundTrip() throws {
        let original: [UInt8] = [0x00, 0xFF, 0x7B, 0x22, 0x0A]
        let record = DeadLetterRecord(
            topic: "pushfan.campaigns", partition: 0, offset: 42, key: nil, error: "not_json",
            reason: "the payload is not valid UTF-8 text, so it cannot be JSON", originalBytes: original, at: 1_764_489_600_000)
        let decoded = try MessageCodec.decode(DeadLetterRecord.self, from: MessageCodec.encode(record))
        #expect(decoded == record)
        #expect(decoded.originalBytes() == Data(original))
        #expect(String(decoding: MessageCodec.encode(record), as: UTF8.self).contains("\"key\":null"))
    }

    @Test func topicNamesRoundTripThroughJSON() throws {
        let names = TopicNames(prefix: "staging")
        let decoded = try JSONDecoder().decode(TopicNames.self, from: JSONEncoder().encode(names))
        #expect(decoded == names)
    }

    // MARK: Never crash

    /// Random bytes and damaged copies of the example: every outcome is a
    /// message or a MessageDecodingError, never a trap.
    @Test func damagedInputNeverCrashes() throws {
        let example = try Array(Data(contentsOf: Self.exampleURL))
        var generator = SeededGenerator(seed: 0x5EED)
        var refused: [String: Int] = [:]
        for round in 0..<3_000 {
            var bytes = example
            switch round % 4 {
            case 0:
                bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            case 1:
                for _ in 0..<Int.random(in: 1...4, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
            case 2:
                bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator)))
            default:
                let position = Int.random(in: 0..<bytes.count, using: &generator)
                let insert = ["null", "[]", "{}", "1e400", "-1", "\"\\u0000\"", "9223372036854775808", "true"]
                bytes.insert(contentsOf: Array(insert[Int.random(in: 0..<insert.count, using: &generator)].utf8), at: position)
            }
            for decode in Self.allDecoders {
                if let code = decode(bytes) { refused[code, default: 0] += 1 }
            }
        }
        #expect(Set(refused.keys).isSubset(of: Set(MessageDecodingError.allCodes)))
        #expect(refused["not_json", default: 0] > 0)
    }

    @Test func deeplyNestedCustomDataIsRefusedNotCrashed() {
        let base = Self.minimalCampaign.setting("notification", nil).jsonText
        for depth in [70, 500, 600, 5_000] {
            let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let text = base.replacingOccurrences(
                of: "\"v\":1", with: "\"v\":1,\"notification\":{\"content\":{\"default\":{\"title\":\"Hi\"}},\"data\":{\"x\":\(nested)}}")
            let result = Result { () throws(MessageDecodingError) in try MessageCodec.decode(Campaign.self, from: Array(text.utf8)) }
            guard case .failure(let error) = result else {
                Issue.record("depth \(depth) was accepted")
                continue
            }
            // The same answer whatever the depth: the shape check names the field before the
            // parser's own 512-level limit can give a syntax error instead.
            #expect(error.code == "wrong_schema", "\(error)")
            #expect(error.field.hasPrefix("notification.data.x[0][0]"), "\(error)")
            #expect(error.reason.contains("nested more than"), "\(error)")
        }
    }

    @Test func moderatelyNestedDataDecodesOnACooperativeThread() async throws {
        let nested = (0..<55).reduce(JSONValue.int(1)) { inner, _ in ["a": inner] }
        let text = Self.minimalCampaign.setting("notification.data", ["deep": nested]).jsonText
        let decoded = await Task.detached { try? MessageCodec.decode(Campaign.self, from: Array(text.utf8)) }.value
        let campaign = try #require(decoded)
        #expect(campaign.notification.data?["deep"] == nested)
    }

    // MARK: Helpers

    static let exampleURL = repositoryRoot.appendingPathComponent("examples/campaign.json")

    static func exampleCampaign() throws -> Campaign {
        try MessageCodec.decode(Campaign.self, from: Data(contentsOf: exampleURL))
    }

    /// One decode per record type, each giving the refusal code or nil.
    static let allDecoders: [@Sendable ([UInt8]) -> String?] = [
        { bytes in refusal { () throws(MessageDecodingError) in _ = try MessageCodec.decode(Campaign.self, from: bytes) } },
        { bytes in refusal { () throws(MessageDecodingError) in _ = try MessageCodec.decode(TaskRecord.self, from: bytes) } },
        { bytes in refusal { () throws(MessageDecodingError) in _ = try MessageCodec.decode(ResultRecord.self, from: bytes) } },
        { bytes in refusal { () throws(MessageDecodingError) in _ = try MessageCodec.decode(ControlRecord.self, from: bytes) } },
        { bytes in refusal { () throws(MessageDecodingError) in _ = try MessageCodec.decode(DeadLetterRecord.self, from: bytes) } },
    ]

    static func refusal(_ body: () throws(MessageDecodingError) -> Void) -> String? {
        do {
            try body()
            return nil
        } catch {
            return error.code
        }
    }
}
