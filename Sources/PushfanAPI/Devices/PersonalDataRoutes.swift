import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// Data-protection requests about a person, with the master secret, each in the operator
/// log: `GET /v1/apps/{app}/users/{user}/export` (everything kept about the user, as JSON),
/// `DELETE /v1/apps/{app}/users/{user}` and `POST /v1/apps/{app}/devices/{device}/erase`
/// (erased from the store, `PersonalData`, with a tombstone on the results and events
/// topics). The SDK's own `DELETE …/devices/{device}` stays a soft unregister.
enum PersonalDataRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore, writer: ResultsWriter) {
        var export = Route(roles: [.master]) { call in
            let (app, id) = (call.parameter("app"), call.parameter("user"))
            guard let kept = try await store.personalData.export(app: app, user: id) else { throw APIError.notFound("app \(app) has no user \(id)") }
            return .json(200, [
                "app": .string(app), "user_id": .string(id), "aliases": .object(kept.aliases.mapValues { .string($0) }),
                "devices": .array(kept.devices.map(json)),
                "temporary_devices": .array(kept.temporaryDevices.map { ["device_id": .string($0.deviceID), "sdk_document": document($0.document)] }),
            ])
        }
        export.audited = true
        router.add("GET", "/v1/apps/{app}/users/{user}/export", export)
        router.add("DELETE", "/v1/apps/{app}/users/{user}", Route(roles: [.master]) { call in
            let (app, id) = (call.parameter("app"), call.parameter("user"))
            let user = try await store.users.whole(app: app, id: id)
            // A user known only by a temporary SDK device's document is a user too.
            if user == nil, try await !store.sdkDevices.names(app: app, user: id) { throw APIError.notFound("app \(app) has no user \(id)") }
            let told = user?.devices.map(\.deviceID) ?? []
            // The tombstone first: a failure leaves everything in place for the retry.
            try await tombstone(ErasureRecord(app: app, user: id, devices: told, at: store.clock.wallMillis), writer)
            guard let erased = try await store.personalData.eraseUser(app: app, id: id) else { throw APIError.notFound("app \(app) has no user \(id)") }
            try await tombstoneLate(erased, app: app, told: told, at: store.clock.wallMillis, writer: writer)
            return .json(200, ["user_id": .string(id), "erased": true, "devices": .array(erased.devices.map { .string($0) })])
        })
        router.add("POST", "/v1/apps/{app}/devices/{device}/erase", Route(roles: [.master]) { call in
            let (app, id) = (call.parameter("app"), call.parameter("device"))
            guard try await store.devices.get(app: app, deviceID: id) != nil else { throw APIError.notFound("app \(app) has no device \(id)") }
            try await tombstone(ErasureRecord(app: app, user: nil, devices: [id], at: store.clock.wallMillis), writer)
            guard try await store.personalData.eraseDevice(app: app, id: id) != nil else { throw APIError.notFound("app \(app) has no device \(id)") }
            return .json(200, ["device": .string(id), "erased": true])
        })
    }

    /// The erasure on both topics (as several tombstones for a user of many devices), waited
    /// for: the call answers only once Kafka has it.
    private static func tombstone(_ record: ErasureRecord, _ writer: ResultsWriter) async throws {
        let records = record.parts.flatMap { part in
            let value = MessageCodec.encode(part)
            return [
                ProducerRecord(topic: writer.topics.results, key: part.kafkaKey, value: value),
                ProducerRecord(topic: writer.topics.events, key: part.kafkaKey, value: value),
            ]
        }
        let ticket = try await writer.producer.enqueue(records)
        if let failure = await ResultsWriter.firstFailure([ticket]) { throw failure }
    }

    /// Devices that joined the user between the read and the erasure get a tombstone too.
    private static func tombstoneLate(_ erased: PersonalData.Erased, app: String, told: [String], at: Int64, writer: ResultsWriter) async throws {
        let told = Set(told)
        let late = erased.devices.filter { !told.contains($0) }
        if !late.isEmpty { try await tombstone(ErasureRecord(app: app, user: erased.user, devices: late, at: at), writer) }
    }

    private static func json(_ data: PersonalData.DeviceData) -> JSONValue {
        guard case .object(var device) = DeviceRoutes.json(data.device) else { return .null }
        device["tokens"] = .array(data.tokens.map(TokenRoutes.json))
        device["deliveries"] = .array(data.deliveries.map { row in
            ["campaign": .string(row.campaign), "state": .string(row.state), "attempts": .int(row.attempts),
             "reason": row.reason.map { .string($0) } ?? .null, "finished_at": row.finishedAt.map { .int($0) } ?? .null]
        })
        device["frequency_pushes"] = .array(data.pushes.map { ["campaign": .string($0.campaign), "at": .int($0.at)] })
        device["engagement"] = .array(data.engagement.map {
            ["campaign": .string($0.campaign), "variant": .string($0.variant), "kind": .string($0.kind), "detail": .string($0.detail)]
        })
        if let text = data.sdkDocument { device["sdk_document"] = document(text) }
        return .object(device)
    }

    /// An SDK's document as the JSON it is (as the text it is, should it not parse).
    private static func document(_ text: String) -> JSONValue {
        (try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))) ?? .string(text)
    }
}
