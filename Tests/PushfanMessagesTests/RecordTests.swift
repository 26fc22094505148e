import Foundation
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

@Suite("TaskRecord")
struct TaskRecordTests {
    static let base: JSONValue = [
        "v": 1, "campaign": "c1", "app": "shop-ios", "shard": 3, "shards": 12,
        "after": 1000, "through": 2000, "estimate": 1000, "lane": 2, "lanes": 4,
    ]

    @Test func decodesTheDocumentedForm() throws {
        let task = try #require(decodeOrRecord(TaskRecord.self, Array(Self.base.jsonText.utf8)))
        #expect(task == TaskRecord(campaign: "c1", app: "shop-ios", shard: 3, shards: 12, after: 1000, through: 2000,
                                   estimate: 1000, lane: 2, lanes: 4))
        #expect(task.kafkaKey == "shop-ios#2")
    }

    @Test func openBoundsAreExplicitNulls() throws {
        let task = TaskRecord(campaign: "c1", app: "a", shard: 0, shards: 1, after: nil, through: nil, estimate: 5, lane: 0, lanes: 1)
        let text = String(decoding: MessageCodec.encode(task), as: UTF8.self)
        #expect(text.contains("\"after\":null"))
        #expect(text.contains("\"through\":null"))
        let absent = Self.base.setting("after", nil).setting("through", nil)
        let decoded = try #require(decodeOrRecord(TaskRecord.self, Array(absent.jsonText.utf8)))
        #expect(decoded.after == nil && decoded.through == nil)
    }

    @Test("a transactional task says so (and only then), and runs in its lane's priority queue on the lane's partition")
    func transactionalTasks() throws {
        var task = TaskRecord(campaign: "msg-1", app: "shop", shard: 0, shards: 1, after: nil, through: nil, estimate: 2, lane: 1, lanes: 4, rows: [5, 9])
        #expect(!String(decoding: MessageCodec.encode(task), as: UTF8.self).contains("transactional"))
        #expect(task.scheduleLane == "shop#1")
        task.transactional = true
        let text = String(decoding: MessageCodec.encode(task), as: UTF8.self)
        #expect(text.contains(#""transactional":true"#))
        let decoded = try #require(decodeOrRecord(TaskRecord.self, Array(text.utf8)))
        #expect(decoded == task && decoded.scheduleLane == "shop#1!" && decoded.kafkaKey == "shop#1")
        // Lanes of one app on consecutive partitions, wrapping; no more lanes than partitions.
        let first = TaskRecord.partition(app: "shop", lane: 0, partitions: 6)
        #expect((0..<4).map { TaskRecord.partition(app: "shop", lane: $0, partitions: 6) } == (0..<4).map { (first + $0) % 6 })
        #expect(TaskRecord.lanes(configured: 4, partitions: 2) == 2 && TaskRecord.lanes(configured: 4, partitions: 12) == 4)
    }

    @Test(arguments: [(Int64(1000), false), (1001, true), (2000, true), (2001, false)])
    func shardBoundsAreExclusiveThenInclusive(_ rowKey: Int64, _ inside: Bool) {
        let task = TaskRecord(campaign: "c1", app: "a", shard: 0, shards: 1, after: 1000, through: 2000, estimate: 0, lane: 0, lanes: 1)
        #expect(task.contains(rowKey: rowKey) == inside)
        let open = TaskRecord(campaign: "c1", app: "a", shard: 0, shards: 1, after: nil, through: nil, estimate: 0, lane: 0, lanes: 1)
        #expect(open.contains(rowKey: rowKey))
    }

    static let rejects: [RejectCase] = [
        RejectCase("shard equal to shards", value: base.setting("shard", 12), code: "invalid_field", field: "shard", mentions: "from 0 to shards - 1 (11), got 12"),
        RejectCase("negative shard", value: base.setting("shard", -1), code: "invalid_field", field: "shard", mentions: "got -1"),
        RejectCase("zero shards", value: base.setting("shards", 0).setting("shard", 0), code: "invalid_field", field: "shards", mentions: "at least 1"),
        RejectCase("lane equal to lanes", value: base.setting("lane", 4), code: "invalid_field", field: "lane", mentions: "from 0 to lanes - 1 (3), got 4"),
        RejectCase("zero lanes", value: base.setting("lanes", 0).setting("lane", 0), code: "invalid_field", field: "lanes", mentions: "at least 1"),
        RejectCase("negative estimate", value: base.setting("estimate", -1), code: "invalid_field", field: "estimate", mentions: "must not be negative"),
        RejectCase("empty range", value: base.setting("through", 1000), code: "invalid_field", field: "through", mentions: "greater than after"),
        RejectCase("missing shards", value: base.setting("shards", nil), code: "wrong_schema", field: "shards", mentions: "missing"),
        RejectCase("after as a string", value: base.setting("after", "1000"), code: "wrong_schema", field: "after", mentions: "expected an integer"),
        RejectCase("bad campaign id", value: base.setting("campaign", "a#b"), code: "invalid_field", field: "campaign", mentions: "characters of"),
        RejectCase("bad app", value: base.setting("app", "shop ios"), code: "invalid_field", field: "app", mentions: "characters of"),
        RejectCase("v = 2", value: base.setting("v", 2), code: "unsupported_version", field: "v", mentions: "version 2"),
    ]

    @Test(arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: TaskRecord.self)
    }
}

@Suite("ResultRecord")
struct ResultRecordTests {
    static let device: JSONValue = [
        "v": 1, "type": "device", "app": "shop", "campaign": "c", "device": "d", "outcome": "delivered", "status": 200,
        "reason": nil, "apns_id": "6a1e5c2e-8a61-4b1c-9a8e-2f4c3f1f7d10", "attempts": 1, "at": 1_764_489_600_123,
    ]
    static let campaign: JSONValue = [
        "v": 1, "type": "campaign", "campaign": "c", "app": "shop-ios", "event": "progress", "audience": 100_000,
        "counts": ["delivered": 10, "invalid_token": 1], "at": 1_764_489_600_123,
    ]

    @Test func decodesADeviceOutcome() throws {
        let record = try #require(decodeOrRecord(ResultRecord.self, Array(Self.device.jsonText.utf8)))
        guard case .device(let result) = record else {
            Issue.record("decoded \(record)")
            return
        }
        #expect(result.outcome == .delivered)
        #expect(result.status == 200)
        #expect(result.reason == nil)
        #expect(record.kafkaKey == "shop/c/d")
        #expect(record.campaignKey == CampaignKey(app: "shop", id: "c"))
    }

    @Test func decodesACampaignEvent() throws {
        let record = try #require(decodeOrRecord(ResultRecord.self, Array(Self.campaign.jsonText.utf8)))
        guard case .campaign(let event) = record else {
            Issue.record("decoded \(record)")
            return
        }
        #expect(event.event == .progress)
        #expect(event.count(of: .delivered) == 10)
        #expect(event.count(of: .invalidToken) == 1)
        #expect(event.count(of: .failed) == 0)
        #expect(event.finished == 11)
        #expect(record.kafkaKey == "shop-ios/c")
    }

    @Test func deviceOutcomeWritesTypeAndNulls() {
        let record = ResultRecord.device(.init(campaign: CampaignKey(app: "shop", id: "c"), device: "d", outcome: .failed, attempts: 5, at: 1))
        let text = String(decoding: MessageCodec.encode(record), as: UTF8.self)
        #expect(text.contains("\"type\":\"device\""))
        #expect(text.contains("\"outcome\":\"failed\""))
        #expect(text.contains("\"status\":null"))
        #expect(text.contains("\"apns_id\":null"))
        #expect(text.contains("\"v\":1"))
    }

    /// Device results as senders write them: every optional set and unset, a reason that
    /// needs escapes last.
    static let deviceResults = [
        DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: "d", outcome: .failed, attempts: 5, at: 1),
        DeviceResult(
            campaign: CampaignKey(app: "shop", id: "spring-sale:2026"), device: "device-00000042", outcome: .delivered, status: 200,
            apnsID: "6f0c5b0e-9a2b-4c1e-8d7f-0a1b2c3d4e5f", attempts: 1, at: 1_796_045_682_511),
        DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: "d", outcome: .invalidToken, status: 410, reason: "Unregistered", attempts: 2, at: 3),
        DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: "d", outcome: .rejected, reason: "quote \" backslash \\ tab \t é ✓", attempts: 0, at: 0),
    ]

    @Test("the sender's direct encoding of a device result is byte for byte MessageCodec's")
    func deviceResultDirectEncodingMatchesCodable() throws {
        for result in Self.deviceResults {
            #expect(result.encodedJSON() == Array(MessageCodec.encodeGenerically(ResultRecord.device(result))))
            #expect(try MessageCodec.decodeGenerically(ResultRecord.self, from: Data(result.encodedJSON())) == .device(result))
        }
    }

    @Test("the canonical reader reads back what the sender writes, and leaves every other spelling to the decoder")
    func deviceResultCanonicalReading() throws {
        func canonical(_ bytes: [UInt8]) -> DeviceResult? { bytes.withUnsafeBytes { DeviceResult(canonicalJSON: $0) } }
        let plain = Array(Self.deviceResults.dropLast()) + [DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: "d", outcome: .rejected, reason: "é ✓ accents", attempts: 0, at: 0)]
        for result in plain { #expect(canonical(result.encodedJSON()) == result) }

        // Escapes, other key orders, whitespace, other versions or types, invalid values: nil,
        // and the generic decoder still reads (or refuses) them.
        let escaped = Self.deviceResults.last!
        #expect(canonical(escaped.encodedJSON()) == nil)
        #expect(try MessageCodec.decode(ResultRecord.self, from: escaped.encodedJSON()) == .device(escaped))
        let text = String(decoding: plain[2].encodedJSON(), as: UTF8.self)
        let variants = [
            text.replacingOccurrences(of: ",", with: ", "),
            text.replacingOccurrences(of: #""v":1"#, with: #""v":2"#),
            text.replacingOccurrences(of: #""outcome":"invalid_token""#, with: #""outcome":"lost""#),
            text.replacingOccurrences(of: #""attempts":2"#, with: #""attempts":-2"#),
            text.replacingOccurrences(of: #""attempts":2"#, with: #""attempts":02"#),
            text.replacingOccurrences(of: #""at":3"#, with: #""at":3.5"#),
            text.replacingOccurrences(of: #""device":"d""#, with: #""device":"""#),
            text + " ",
            String(text.dropLast()),
            #"{"at":3,"apns_id":null}"#,
        ]
        for variant in variants { #expect(canonical(Array(variant.utf8)) == nil, "\(variant)") }
        #expect(try MessageCodec.decode(ResultRecord.self, from: Array(variants[0].utf8)) == .device(plain[2]))
    }

    @Test func invalidTokenUsesSnakeCase() {
        #expect(DeviceOutcome.invalidToken.rawValue == "invalid_token")
        #expect(DeviceOutcome.allCases.map(\.rawValue) == ["delivered", "rejected", "invalid_token", "expired", "cancelled", "skipped", "failed"])
    }

    static let rejects: [RejectCase] = [
        RejectCase("missing type", value: device.setting("type", nil), code: "wrong_schema", field: "type", mentions: "missing"),
        RejectCase("unknown type", value: device.setting("type", "token"), code: "invalid_field", field: "type",
                   mentions: "unknown result type \"token\"; expected one of: device, campaign"),
        RejectCase("unknown outcome", value: device.setting("outcome", "sent"), code: "invalid_field", field: "outcome",
                   mentions: "expected one of: delivered, rejected, invalid_token"),
        RejectCase("status out of range", value: device.setting("status", 700), code: "invalid_field", field: "status", mentions: "100 to 599"),
        RejectCase("negative attempts", value: device.setting("attempts", -1), code: "invalid_field", field: "attempts", mentions: "negative"),
        RejectCase("missing device", value: device.setting("device", nil), code: "wrong_schema", field: "device", mentions: "missing"),
        RejectCase("device with a slash", value: device.setting("device", "a/b"), code: "invalid_field", field: "device", mentions: "characters of"),
        // Campaign ids are named within their app: a result without its app names no campaign.
        RejectCase("missing app", value: device.setting("app", nil), code: "wrong_schema", field: "app", mentions: "missing"),
        RejectCase("unknown event", value: campaign.setting("event", "started"), code: "invalid_field", field: "event",
                   mentions: "expected one of: accepted, progress, completed, failed"),
        RejectCase("count for an unknown outcome", value: campaign.setting("counts.sent", 3), code: "invalid_field", field: "counts.sent",
                   mentions: "not an outcome"),
        RejectCase("negative count", value: campaign.setting("counts.delivered", -3), code: "invalid_field", field: "counts.delivered", mentions: "negative"),
        RejectCase("count as a string", value: campaign.setting("counts.delivered", "3"), code: "wrong_schema", field: "counts.delivered",
                   mentions: "expected an integer"),
        RejectCase("negative audience", value: campaign.setting("audience", -1), code: "invalid_field", field: "audience", mentions: "negative"),
        RejectCase("missing app in an event", value: campaign.setting("app", nil), code: "wrong_schema", field: "app", mentions: "missing"),
    ]

    @Test(arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: ResultRecord.self)
    }
}

@Suite("ControlRecord")
struct ControlRecordTests {
    static let base: JSONValue = ["v": 1, "app": "shop", "campaign": "spring-sale-2026", "action": "cancel", "at": 1_764_489_600_000]

    @Test func decodesTheDocumentedForm() throws {
        let control = try #require(decodeOrRecord(ControlRecord.self, Array(Self.base.jsonText.utf8)))
        #expect(control == ControlRecord(campaign: CampaignKey(app: "shop", id: "spring-sale-2026"), action: .cancel, at: 1_764_489_600_000))
        #expect(control.kafkaKey == "shop/spring-sale-2026")
    }

    static let rejects: [RejectCase] = [
        RejectCase("unknown action", value: base.setting("action", "stop"), code: "invalid_field", field: "action",
                   mentions: "unknown action \"stop\"; expected one of: cancel, pause, resume"),
        RejectCase("action as a number", value: base.setting("action", 1), code: "wrong_schema", field: "action", mentions: "expected a string"),
        RejectCase("at in seconds", value: base.setting("at", 1_764_489_600), code: "invalid_field", field: "at", mentions: "looks like seconds"),
        // Written before campaign ids were named within their app: which app's campaign it
        // stops cannot be told, so it is refused, never applied to a guess.
        RejectCase("no app", value: base.setting("app", nil), code: "wrong_schema", field: "app", mentions: "missing"),
        RejectCase("app with a slash", value: base.setting("app", "a/b"), code: "invalid_field", field: "app", mentions: "characters of"),
        RejectCase("missing campaign", value: base.setting("campaign", nil), code: "wrong_schema", field: "campaign", mentions: "missing"),
    ]

    @Test(arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: ControlRecord.self)
    }
}

@Suite("DeadLetterRecord")
struct DeadLetterRecordTests {
    @Test func keepsARefusedRecordWithItsReasonAndBytes() throws {
        let original = Array("{\"v\":1,\"id\":\"bad id\"}".utf8)
        let failure = Result { () throws(MessageDecodingError) in try MessageCodec.decode(Campaign.self, from: original) }
        guard case .failure(let error) = failure else {
            Issue.record("accepted")
            return
        }
        let letter = DeadLetterRecord(
            topic: "pushfan.campaigns", partition: 3, offset: 42, key: "bad id", failure: error,
            originalBytes: original, at: 1_764_489_600_000)
        #expect(letter.error == error.code)
        #expect(letter.reason == error.description)
        #expect(letter.kafkaKey == "bad id")

        let decoded = try MessageCodec.decode(DeadLetterRecord.self, from: MessageCodec.encode(letter))
        #expect(decoded == letter)
        #expect(decoded.originalBytes() == Data(original))
    }

    static let base: JSONValue = [
        "v": 1, "topic": "pushfan.campaigns", "partition": 0, "offset": 42, "key": "spring-sale-2026",
        "error": "not_json", "reason": "not valid JSON", "original": "aGVsbG8=", "at": 1_764_489_600_000,
    ]

    @Test func decodesTheDocumentedForm() throws {
        let letter = try #require(decodeOrRecord(DeadLetterRecord.self, Array(Self.base.jsonText.utf8)))
        #expect(letter.originalBytes() == Data("hello".utf8))
        #expect(letter.key == "spring-sale-2026")
    }

    static let rejects: [RejectCase] = [
        RejectCase("original not base64", value: base.setting("original", "hello!"), code: "invalid_field", field: "original", mentions: "base64"),
        RejectCase("error code with capitals", value: base.setting("error", "NotJSON"), code: "invalid_field", field: "error", mentions: "lowercase"),
        RejectCase("empty topic", value: base.setting("topic", ""), code: "invalid_field", field: "topic", mentions: "Kafka topic name"),
        RejectCase("negative offset", value: base.setting("offset", -1), code: "invalid_field", field: "offset", mentions: "negative"),
        RejectCase("missing reason", value: base.setting("reason", nil), code: "wrong_schema", field: "reason", mentions: "missing"),
    ]

    @Test(arguments: rejects)
    func rejected(_ reject: RejectCase) {
        reject.check(as: DeadLetterRecord.self)
    }
}

@Suite("TopicNames")
struct TopicNamesTests {
    @Test func defaults() {
        let names = TopicNames()
        #expect(names.all == ["pushfan.campaigns", "pushfan.tasks", "pushfan.results", "pushfan.control", "pushfan.deadletter", "pushfan.events"])
        #expect(TopicNames(prefix: "pushfan") == names)
    }

    @Test func prefix() {
        #expect(TopicNames(prefix: "test-42").tasks == "test-42.tasks")
    }

    @Test func missingKeysKeepTheirDefaults() throws {
        let names = try JSONDecoder().decode(TopicNames.self, from: Data("{\"results\":\"shop.results\"}".utf8))
        #expect(names.results == "shop.results")
        #expect(names.campaigns == "pushfan.campaigns")
        #expect(names.deadletter == "pushfan.deadletter")
        #expect(names.events == "pushfan.events")
    }
}

@Suite("ErasureRecord")
struct ErasureRecordTests {
    @Test("reads back what it writes; a result or an event is not an erasure, and an erasure is neither")
    func roundTripAndKinds() throws {
        let record = ErasureRecord(app: "shop", user: "42", devices: ["phone", "tablet"], at: 1_796_000_000_000)
        let text = String(decoding: MessageCodec.encode(record), as: UTF8.self)
        #expect(text.contains(#""type":"erasure""#) && text.contains(#""devices":["phone","tablet"]"#) && text.contains(#""user":"42""#), "\(text)")
        #expect(try MessageCodec.decode(ErasureRecord.self, from: Data(text.utf8)) == record)
        #expect(record.kafkaKey == "shop/erasure")
        #expect((try? MessageCodec.decode(ResultRecord.self, from: Data(text.utf8))) == nil)
        #expect((try? MessageCodec.decode(EngagementEvent.self, from: Data(text.utf8))) == nil)
        let result = #"{"v":1,"type":"campaign","campaign":"c","app":"shop","event":"accepted","at":1796000000000}"#
        #expect((try? MessageCodec.decode(ErasureRecord.self, from: Data(result.utf8))) == nil)
        let device = ErasureRecord(app: "shop", user: nil, devices: ["phone"], at: 1_796_000_000_000)
        #expect(!String(decoding: MessageCodec.encode(device), as: UTF8.self).contains("user"))
    }

    @Test("a user of many devices is erased by several tombstones of at most 1,000 devices each, in order; a user of none by one")
    func partsOfALargeErasure() {
        let devices = (0..<2_500).map { "device-\($0)" }
        let parts = ErasureRecord(app: "shop", user: "42", devices: devices, at: 1_796_000_000_000).parts
        #expect(parts.map(\.devices.count) == [1_000, 1_000, 500])
        #expect(parts.flatMap(\.devices) == devices && parts.allSatisfy { $0.user == "42" && $0.app == "shop" && $0.at == 1_796_000_000_000 })
        #expect(parts.allSatisfy { MessageCodec.encode($0).count < 64 * 1_024 })
        #expect(ErasureRecord(app: "shop", user: "42", devices: [], at: 1).parts == [ErasureRecord(app: "shop", user: "42", devices: [], at: 1)])
    }
}
