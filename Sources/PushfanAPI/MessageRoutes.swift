import Foundation
import PushfanCore
import PushfanKafka
import PushfanStore
import PushfanWorker

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

    /// The members of a message's body.
    private static let members: Set<String> = ["recipients", "notification", "options"]
    /// The campaign options a message may set; the rest (`send_at`, `local_time`, `rate`…) are
    /// a campaign's. Quiet hours and frequency caps do not hold a message back unless its
    /// options say so.
    private static let options: Set<String> = [
        "priority", "expiration", "collapse_id", "ignore_quiet_hours", "ignore_frequency_caps", "attribution_window_s", "dry_run",
    ]

    static func add(to router: inout Router<Route>, store: DeviceStore, writer: ResultsWriter, lanes: Int) {
        let partitions = PartitionCount(producer: writer.producer, topic: writer.topics.tasks)
        router.add("POST", "/v1/apps/{app}/messages", Route(roles: [.master], campaigns: true) { call in
            let app = call.parameter("app")
            let body = try APIService.requireJSON(call.request)
            let members = try APIService.jsonObject(call.request)
            if let unknown = members.keys.sorted().first(where: { !Self.members.contains($0) }) {
                throw APIError(400, "invalid_input", "\(unknown): not a member of a message (recipients, notification, options)", field: unknown)
            }
            let recipients = try MessageRecipients.parse(members["recipients"])
            var campaign = try campaign(app: app, members)
            if try await store.sdkDevices.any(app: app) {
                do throws(MessageDecodingError) { try campaign.validatePayloads(notificareApplication: app) } catch {
                    throw APIError(400, error.code, "\(error.description) (with the keys Notificare's SDK needs, which this app's pushes carry)", field: error.field)
                }
            }
            return try await IdempotentCalls.run(call.request, store: store, app: app, body: body) {
                let resolution = try await store.users.resolve(app: app, users: recipients.users, aliases: recipients.aliasValues, devices: recipients.devices)
                let plan = recipients.plan(resolution)
                guard !plan.deviceIDs.isEmpty else {
                    var refusal = APIError(422, "no_reachable_devices", "no recipient has an active device of app \(app); see recipients")
                    refusal.details["recipients"] = .array(plan.report)
                    throw refusal
                }
                guard plan.deviceIDs.count <= Campaign.maxExplicitDevices else {
                    throw APIError(422, "too_many_devices", "the recipients have \(plan.deviceIDs.count) devices; a message reaches at most \(Campaign.maxExplicitDevices)", field: "recipients")
                }
                campaign.audience = .devices(plan.deviceIDs)
                let definition: CampaignDefinition
                do {
                    if let missing = try await store.missingReference(in: campaign) { throw missing }
                    definition = try await store.definition(of: campaign)
                } catch let missing as MissingReference {
                    throw APIError(missing.code.hasPrefix("unknown_") ? 422 : 400, missing.code, missing.description, field: missing.field)
                }
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

    /// The message as a campaign of the app (its audience filled in once resolved), checked
    /// by the campaign's own rules: the notification model, templates and personalisation
    /// are a campaign's.
    private static func campaign(app: String, _ members: [String: JSONValue]) throws -> Campaign {
        var options: [String: JSONValue] = ["ignore_quiet_hours": true, "ignore_frequency_caps": true]
        if let given = members["options"] {
            guard case .object(let set) = given else { throw APIError(400, "invalid_input", "options: an object is required", field: "options") }
            if let other = set.keys.sorted().first(where: { !Self.options.contains($0) }) {
                throw APIError(
                    400, "invalid_input", "options.\(other): not an option of a message (\(Self.options.sorted().joined(separator: ", ")))", field: "options.\(other)")
            }
            options.merge(set) { $1 }
        }
        let id = idPrefix + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let record: JSONValue = [
            "v": .int(Int64(Campaign.currentVersion)), "id": .string(id), "app": .string(app),
            // Resolved later; one id stands in so the rest is checked first.
            "audience": ["devices": ["pending"]],
            "notification": members["notification"] ?? .null, "options": .object(options),
            "submitted_at": .int(Int64(Date().timeIntervalSince1970 * 1000)),
        ]
        do throws(MessageDecodingError) {
            let campaign = try Campaign.decodeRecord(Array(record.compactJSON.utf8))
            try campaign.checkSubmittable(now: Date())
            return campaign
        } catch {
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
        guard try await store.campaigns.record(campaign.key, audience: rowKeys.count, shards: chunks.count, definition: definition, status: .running) else {
            throw APIError(500, "internal", "message id \(campaign.id) was taken; send the message again")
        }
        do {
            let accepted = try await writer.campaign(CampaignEvent(
                campaign: campaign.id, app: campaign.app, event: .accepted, audience: rowKeys.count, at: Int64(Date().timeIntervalSince1970 * 1000)))
            let tasks = try await writer.producer.enqueue(records)
            if let error = await ResultsWriter.firstFailure([tasks, accepted]) { throw error }
        } catch {
            _ = try? await store.campaigns.transition(campaign.key, from: .running, to: .cancelled)
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

    init(producer: KafkaProducer, topic: String) {
        (self.producer, self.topic) = (producer, topic)
    }

    func value() async throws -> Int {
        if let known = known.withLock({ $0 }), ContinuousClock.now - known.at < .seconds(60) { return known.count }
        let count = try await producer.partitionCount(topic: topic)
        known.withLock { $0 = (count, .now) }
        return count
    }
}
