import Foundation
import PushfanMessages
import PushfanSupport
import Testing

/// The hand-written record forms (`VersionedMessage.canonicalJSON`) against the generic
/// encoder they stand in for: the same bytes, read back to the same record, and whatever
/// they do not read left to the generic decoder, which explains it.
@Suite struct CanonicalFormTests {
    static let tasks: [TaskRecord] = {
        var transactional = TaskRecord(campaign: "msg-00ff", app: "shop", shard: 0, shards: 1, after: nil, through: nil, estimate: 3, lane: 2, lanes: 4, rows: [7, 9, 1_773_993_177_399_612_345])
        transactional.transactional = true
        return [
            TaskRecord(campaign: "c", app: "a", shard: 0, shards: 1, after: nil, through: nil, estimate: 0, lane: 0, lanes: 1),
            TaskRecord(campaign: "spring-sale", app: "shop", shard: 3, shards: 9, after: 1_000, through: 2_000, estimate: 1_000, lane: 1, lanes: 2),
            TaskRecord(
                campaign: "waves", app: "shop", shard: 1, shards: 2, after: -5, through: 40, estimate: 12, lane: 0, lanes: 1, notBefore: 1_765_000_000_000,
                zones: ["Asia/Tokyo", "", "America/Argentina/Buenos_Aires"], rows: [], skip: "local_time_passed", phase: .rest),
            transactional,
        ]
    }()

    static let events: [CampaignEvent] = {
        var split = CampaignEvent(campaign: "ab", app: "shop", event: .completed, audience: 10, counts: ["delivered": 7, "failed": 3], at: 12)
        split.variants = ["b": ["delivered": 3], "a": ["failed": 3, "delivered": 4]]
        // Keys whose UTF-8 order differs from String's (a key not in NFC): JSONEncoder's order.
        var unnormalised = CampaignEvent(campaign: "c", app: "a", event: .progress, at: 3)
        unnormalised.variants = ["e\u{301}b": ["delivered": 1], "\u{E9}a": ["delivered": 2], "Z": [:]]
        return [
            CampaignEvent(campaign: "c", app: "a", event: .accepted, at: 0),
            CampaignEvent(campaign: "c", app: "a", event: .accepted, audience: 1, at: 1_765_000_000_000),
            CampaignEvent(
                campaign: "c", app: "a", event: .failed, error: "segment \"x\" ends\n\tearly \u{8}\u{c}\u{1} / ü ✓ \\", submission: .init(partition: 4, offset: 900),
                at: 5),
            split,
            unnormalised,
        ]
    }()

    @Test("a task by hand: the generic encoder's bytes, read back by the fast reader and the codec", arguments: tasks)
    func taskForm(task: TaskRecord) throws {
        let bytes = try #require(task.canonicalJSON)
        #expect(bytes == Array(MessageCodec.encodeGenerically(task)), "\(String(decoding: bytes, as: UTF8.self))")
        #expect(bytes.withUnsafeBytes { TaskRecord.canonical($0) } == task)
        #expect(try MessageCodec.decodeGenerically(TaskRecord.self, from: Data(bytes)) == task)
        #expect(try MessageCodec.decode(TaskRecord.self, from: Data(bytes)) == task)
    }

    @Test("a campaign event by hand: the generic encoder's bytes, escapes included", arguments: events)
    func eventForm(event: CampaignEvent) throws {
        let record = ResultRecord.campaign(event)
        let bytes = try #require(record.canonicalJSON)
        #expect(bytes == Array(MessageCodec.encodeGenerically(record)), "\(String(decoding: bytes, as: UTF8.self))")
        #expect(try MessageCodec.decode(ResultRecord.self, from: Data(bytes)) == record)
    }

    @Test("what the fast task reader does not read, the codec still reads or refuses as before")
    func otherSpellings() throws {
        let task = Self.tasks[1]
        let text = String(decoding: try #require(task.canonicalJSON), as: UTF8.self)
        let spaced = text.replacingOccurrences(of: ",", with: ", ")
        let reordered = #"{"v":1,"campaign":"spring-sale","app":"shop","shard":3,"shards":9,"after":1000,"through":2000,"estimate":1000,"lane":1,"lanes":2}"#
        let escaped = text.replacingOccurrences(of: #""shop""#, with: #""sh\u006fp""#)
        for other in [spaced, reordered, escaped] {
            #expect(Array(other.utf8).withUnsafeBytes { TaskRecord.canonical($0) } == nil, "\(other)")
            #expect(try MessageCodec.decode(TaskRecord.self, from: Data(other.utf8)) == task, "\(other)")
        }
        // The canonical spelling of a task that breaks the rules: the codec's own refusal.
        let broken = text.replacingOccurrences(of: #""shard":3"#, with: #""shard":9"#)
        #expect(Array(broken.utf8).withUnsafeBytes { TaskRecord.canonical($0) } != nil, "the spelling is the fast reader's")
        #expect(throws: MessageDecodingError.invalidField("shard", "must be from 0 to shards - 1 (8), got 9")) {
            try MessageCodec.decode(TaskRecord.self, from: Data(broken.utf8))
        }
        // A duplicate key or trailing bytes are not the fast reader's; the shape check refuses them.
        let twice = text.replacingOccurrences(of: #""v":1"#, with: #""v":1,"v":1"#)
        #expect(Array(twice.utf8).withUnsafeBytes { TaskRecord.canonical($0) } == nil)
        #expect(throws: MessageDecodingError.self) { try MessageCodec.decode(TaskRecord.self, from: Data(twice.utf8)) }
        #expect(Array((text + " ").utf8).withUnsafeBytes { TaskRecord.canonical($0) } == nil)
    }
}

/// The engagement event the API writes for every event it takes, by hand.
@Suite struct EngagementEventFormTests {
    static let events: [EngagementEvent] = [
        EngagementEvent(
            id: "e-00ff", app: "shop", kind: .opened, device: "d-1", campaign: "spring", variant: "a", sendID: "00ff00ff00ff00ff", at: 1_765_000_000_000,
            action: nil, name: nil, value: nil, currency: nil, receivedAt: 1_765_000_000_100),
        EngagementEvent(
            id: "k-1", app: "shop", kind: .action, device: "d:1.x_y", campaign: "c", variant: nil, sendID: "0123456789abcdef", at: 1_765_000_000_000,
            action: "buy", name: nil, value: nil, currency: nil, receivedAt: nil),
        EngagementEvent(
            id: "e-0123456789abcdef", app: "a", kind: .custom, device: "d", campaign: nil, variant: nil, sendID: nil, at: 1_765_000_000_001, action: nil, name: "level_up",
            value: nil, currency: nil, receivedAt: nil),
    ] + [5, 4.99, 0.1, 1e-5, 2e-7, 1e12, 0, 123_456_789.125, 1.0 / 3].map { value in
        EngagementEvent(
            id: "v", app: "a", kind: .converted, device: "d", campaign: "c", variant: "holdout", sendID: nil, at: 1_765_000_000_002, action: nil, name: nil,
            value: value, currency: "EUR", receivedAt: 1_765_000_000_003)
    }

    @Test("an event by hand: the generic encoder's bytes, values written as it writes a Double", arguments: events)
    func eventForm(event: EngagementEvent) throws {
        let bytes = try #require(event.canonicalJSON)
        #expect(bytes == Array(MessageCodec.encodeGenerically(event)), "\(String(decoding: bytes, as: UTF8.self))")
        #expect(try MessageCodec.decodeGenerically(EngagementEvent.self, from: Data(bytes)) == event)
    }

    @Test("the events role reads what the API writes directly")
    func readBack() throws {
        for event in Self.events {
            let bytes = try #require(event.canonicalJSON)
            #expect(bytes.withUnsafeBytes { EngagementEvent(canonicalJSON: $0) } == event, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }
}
