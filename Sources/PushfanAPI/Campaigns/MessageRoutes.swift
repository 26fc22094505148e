import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// `/v1/apps/{app}/messages`: transactional messages, sent now to users, aliases and devices.
///
/// The API plans a message itself, since it resolves the recipients to answer for each: the
/// message is stored as a campaign of those devices (its row `running`, its record the
/// definition), announced `accepted` on the results topic, and its devices go onto the
/// tasks topic as transactional tasks (`TaskRecord.transactional`) of the app's rate lanes.
/// A worker runs those beside the lane's campaign tasks and its batches take the lane's
/// tokens first, so a message goes out while a large campaign of the app is sending, and
/// both stay within the app's rate. Master secret (or a `campaigns:write` key).
enum MessageRoutes {
    /// Row keys per task: a message of many devices is spread over the lanes.
    static let devicesPerTask = 500

    static func add(to router: inout Router<Route>, store: DeviceStore, writer: ResultsWriter, lanes: Int) {
        let partitions = PartitionCount(producer: writer.producer, topic: writer.topics.tasks, clock: store.clock)
        router.add("POST", "/v1/apps/{app}/messages", Route(roles: [.master], campaigns: true) { call in
            let app = call.parameter("app")
            let body = try APIService.requireJSON(call.request)
            let message = try read(body)
            let recipients = try MessageRecipients.parse(message.recipients)
            let id = newID()
            // Checked with one id standing in for the devices, so the rest is checked first.
            var campaign = try checked { () throws(MessageDecodingError) in try message.campaign(id: id, app: app, devices: ["pending"], now: store.clock.wall) }
            if try await store.sdkDevices.any(app: app) {
                do throws(MessageDecodingError) { try campaign.validatePayloads(notificareApplication: app) } catch {
                    throw APIError(400, error.code, "\(error.description) (with the keys Notificare's SDK needs, which this app's pushes carry)", field: error.field)
                }
            }
            return try await IdempotentCalls.run(call.request, store: store, app: app, body: body) {
                let resolution = try await store.users.resolve(
                    app: app, users: recipients.users, aliases: recipients.aliasValues, devices: recipients.devices,
                    tokens: campaign.tokenSelection, now: store.clock.wallMillis)
                let plan = recipients.plan(resolution, tokenKind: campaign.notification.tokenKind)
                guard !plan.deviceIDs.isEmpty else {
                    var refusal = APIError(422, "no_reachable_devices", "no recipient has a device of app \(app) this push can reach; see recipients")
                    refusal.details["recipients"] = .array(plan.report)
                    throw refusal
                }
                guard plan.deviceIDs.count <= Campaign.maxExplicitDevices else {
                    throw APIError(422, "too_many_devices", "the recipients have \(plan.deviceIDs.count) devices; a message reaches at most \(Campaign.maxExplicitDevices)", field: "recipients")
                }
                campaign.audience = .devices(plan.deviceIDs)
                let definition = try await CampaignRoutes.checkReferences(campaign, store: store)
                try await send(campaign, rowKeys: plan.rowKeys, definition: definition, store: store, writer: writer, lanes: lanes, partitions: partitions)
                return .json(202, [
                    "message": .string(campaign.id), "status": "accepted", "devices": .int(Int64(plan.deviceIDs.count)), "recipients": .array(plan.report),
                ], headers: ["Location": "/v1/apps/\(app)/messages/\(campaign.id)"])
            }
        })
        router.add("GET", "/v1/apps/{app}/messages/{message}", Route(roles: [.master], campaigns: true) { call in
            let key = CampaignKey(app: call.parameter("app"), id: call.parameter("message"))
            guard key.id.hasPrefix(idPrefix), let row = try await store.campaigns.get(key) else {
                throw APIError.notFound("app \(key.app) has no message \(key.id)")
            }
            return try await CampaignRoutes.view(row, store: store)
        })
    }

    /// Message ids: `msg-` and 32 hex digits, chosen by the API.
    static let idPrefix = "msg-"

    /// A new message id: 128 random bits.
    static func newID() -> String {
        var random = SystemRandomNumberGenerator()
        let hex = [random.next() as UInt64, random.next() as UInt64].map { half in
            let digits = String(half, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return idPrefix + hex.joined()
    }

    /// The body read once (`MessageBody`); what is not a message's is refused here.
    private static func read(_ body: [UInt8]) throws -> MessageBody {
        guard body.count <= Campaign.maxRecordBytes else {
            throw APIError(413, "record_too_large", "the message is \(body.count) bytes; at most \(Campaign.maxRecordBytes) are allowed (keep notification.data small)")
        }
        let message = try checked { () throws(MessageDecodingError) in try MessageCodec.decodeDocument(MessageBody.self, from: Data(body)) }
        switch message.refusal {
        case nil:
            return message
        case .unknownMember(let unknown):
            throw APIError(400, "invalid_input", "\(unknown): not a member of a message (\(MessageBody.members.joined(separator: ", ")))", field: unknown)
        case .optionsNotAnObject:
            throw APIError(400, "invalid_input", "options: an object is required", field: "options")
        case .unknownOption(let other):
            throw APIError(
                400, "invalid_input", "options.\(other): not an option of a message (\(MessageBody.optionNames.sorted().joined(separator: ", ")))",
                field: "options.\(other)")
        }
    }

    /// A campaign rule's refusal as the API answers it.
    private static func checked<T>(_ body: () throws(MessageDecodingError) -> T) throws(APIError) -> T {
        do throws(MessageDecodingError) { return try body() } catch {
            throw APIError(error.code == "record_too_large" ? 413 : 400, error.code, error.description, field: error.field)
        }
    }

    /// Stores the message as a running campaign, announces it and produces its tasks; a
    /// message whose tasks Kafka did not take is cancelled (nothing of it was sent) and the
    /// call fails with 503, so the client's retry (with the same `Idempotency-Key`) sends it.
    private static func send(
        _ campaign: Campaign, rowKeys: [Int64], definition: CampaignDefinition, store: DeviceStore, writer: ResultsWriter, lanes configured: Int,
        partitions: PartitionCount
    ) async throws {
        let partitionCount = try await partitions.value()
        let lanes = TaskRecord.lanes(configured: configured, partitions: partitionCount)
        let chunks = stride(from: 0, to: rowKeys.count, by: devicesPerTask).map { Array(rowKeys[$0..<min($0 + devicesPerTask, rowKeys.count)]) }
        let first = Int(FNV1a.hash(campaign.id) % UInt64(lanes))
        let records = chunks.enumerated().map { index, rows in
            var task = TaskRecord(
                campaign: campaign.id, app: campaign.app, shard: index, shards: chunks.count, after: nil, through: nil, estimate: rows.count,
                lane: (first + index) % lanes, lanes: lanes, rows: rows)
            task.transactional = true
            return ProducerRecord(
                topic: writer.topics.tasks, key: task.kafkaKey, value: MessageCodec.encode(task),
                partition: Int32(TaskRecord.partition(app: campaign.app, lane: task.lane, partitions: partitionCount)))
        }
        guard try await store.campaigns.record(campaign.key, audience: rowKeys.count, shards: chunks.count, definition: definition, status: .running, now: store.clock.wallMillis) else {
            throw APIError(500, "internal", "message id \(campaign.id) was taken; send the message again")
        }
        do {
            // `accepted` first, then the tasks, in one hand-over and one wait for delivery.
            let accepted = writer.campaignRecord(CampaignEvent(
                campaign: campaign.id, app: campaign.app, event: .accepted, audience: rowKeys.count, at: store.clock.wallMillis))
            let delivery = try await writer.producer.enqueue([accepted] + records)
            if let error = await ResultsWriter.firstFailure([delivery]) { throw error }
        } catch {
            _ = try? await store.campaigns.transition(campaign.key, from: .running, to: .cancelled, now: store.clock.wallMillis)
            throw error
        }
    }
}

/// The tasks topic's partition count, asked of the cluster at most once a minute (a
/// metadata request per message would cost more than the message).
final class PartitionCount: Sendable {
    private let producer: KafkaProducer
    private let topic: String
    private let known = Locked<(count: Int, at: ContinuousClock.Instant)?>(nil)
    private let clock: any ServiceClock

    init(producer: KafkaProducer, topic: String, clock: any ServiceClock) {
        (self.producer, self.topic, self.clock) = (producer, topic, clock)
    }

    func value() async throws -> Int {
        if let known = known.withLock({ $0 }), clock.now - known.at < .seconds(60) { return known.count }
        let count = try await producer.partitionCount(topic: topic)
        known.withLock { [now = clock.now] in $0 = (count, now) }
        return count
    }
}
