import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// `/v1/apps/{app}/campaigns`: submit (produced to the campaigns topic once Kafka has it),
/// list, read one with its counts, and cancel, pause or resume (`OperatorCommand`, as
/// `pushfan campaigns` does). All need the master secret.
enum CampaignRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore, writer: ResultsWriter) {
        router.add("POST", "/v1/apps/{app}/campaigns", Route(roles: [.master], campaigns: true) { call in
            let body = try APIService.requireJSON(call.request)
            let campaign: Campaign
            do throws(MessageDecodingError) {
                campaign = try Campaign.decodeRecord(body)
                try campaign.checkSubmittable(now: store.clock.wall)
            } catch {
                throw APIError(error.code == "record_too_large" ? 413 : 400, error.code, error.description, field: error.field)
            }
            guard campaign.app == call.parameter("app") else {
                throw APIError(422, "app_mismatch", "the campaign is for app \(campaign.app), not \(call.parameter("app")) of the path", field: "app")
            }
            // An app on Notificare's SDK: its pushes carry that SDK's keys too (NotificareMarker).
            if try await store.sdkDevices.any(app: campaign.app) {
                do throws(MessageDecodingError) { try campaign.validatePayloads(notificareApplication: campaign.app) } catch {
                    throw APIError(400, error.code, "\(error.description) (with the keys Notificare's SDK needs, which this app's pushes carry)", field: error.field)
                }
            }
            _ = try await checkReferences(campaign, store: store)
            return try await IdempotentCalls.run(call.request, store: store, app: campaign.app, body: body) { try await submit(campaign, writer) }
        })
        router.add("GET", "/v1/apps/{app}/campaigns", Route(roles: [.master], campaigns: true) { call in
            let query = call.request.query
            let limit = Int(query["limit"] ?? "20") ?? -1
            guard (1...1000).contains(limit) else { throw APIError(400, "invalid_input", "limit must be 1 to 1000", field: "limit") }
            var status: CampaignStatus?
            if let text = query["status"] {
                guard let known = CampaignStatus(rawValue: text) else {
                    throw APIError(400, "invalid_input", "status must be one of \(CampaignStatus.allCases.map(\.rawValue).joined(separator: ", "))", field: "status")
                }
                status = known
            }
            // The newest first, of this app only (and of one status, if asked); `after` pages on
            // from the last id of the page before (one that is gone pages past the end).
            let rows = try await store.campaigns.page(app: call.parameter("app"), status: status, after: query["after"], limit: limit + 1)
            let page = rows.prefix(limit)
            var answer: [String: JSONValue] = ["campaigns": .array(page.map { row in
                ["id": .string(row.id), "status": .string(row.status.rawValue), "audience": .int(Int64(row.audience))]
            })]
            if rows.count > limit, let last = page.last {
                let filter = status.map { "&status=\($0.rawValue)" } ?? ""
                answer["next"] = .string("/v1/apps/\(call.parameter("app"))/campaigns?limit=\(limit)\(filter)&after=\(last.id)")
            }
            return .json(200, .object(answer))
        })
        router.add("GET", "/v1/apps/{app}/campaigns/{campaign}", Route(roles: [.master], campaigns: true) { call in
            try await view(try await campaign(store, call), store: store)
        })
        router.add("GET", "/v1/apps/{app}/campaigns/{campaign}/stats", Route(roles: [.master], campaigns: true) { call in
            let row = try await campaign(store, call)
            guard case .object(var answer) = try await store.campaignStats(row.key).jsonValue else { return .json(500, [:]) }
            answer["id"] = .string(row.id)
            answer["app"] = .string(row.app)
            answer["status"] = .string(row.status.rawValue)
            return .json(200, .object(answer))
        })
        router.add("POST", "/v1/apps/{app}/campaigns/{campaign}/{action}", Route(roles: [.master], campaigns: true) { call in
            guard let action = ControlRecord.Action(rawValue: call.parameter("action")) else {
                throw APIError.notFound("no route \(call.request.method) \(call.request.path): the actions are cancel, pause and resume")
            }
            let row = try await campaign(store, call)
            switch try await OperatorCommand(store: store, writer: writer).run(action, campaign: row.key) {
            case .unknownCampaign:
                throw APIError.notFound("app \(row.app) has no campaign \(row.id)")
            case .decided(.move(let from, let to)):
                return .json(200, ["campaign": .string(row.id), "from": .string(from.rawValue), "status": .string(to.rawValue)])
            case .decided(.already(let status)):
                return .json(200, ["campaign": .string(row.id), "status": .string(status.rawValue), "changed": false])
            case .decided(.refused(let reason)):
                throw APIError(409, "not_applicable", reason)
            }
        })
    }

    /// What the campaign names in the store, checked before it is taken: its template (and
    /// the campaign under it), saved segment, broadcast channel and Live Activity attributes
    /// types. A name the app does not have: 422 (`unknown_…`); a template or saved segment
    /// that cannot serve the campaign: 400 with its code.
    static func checkReferences(_ campaign: Campaign, store: DeviceStore) async throws -> CampaignDefinition {
        do {
            if let missing = try await store.missingReference(in: campaign) { throw missing }
            return try await store.definition(of: campaign)
        } catch let missing as MissingReference {
            throw APIError(missing.code.hasPrefix("unknown_") ? 422 : 400, missing.code, missing.description, field: missing.field)
        }
    }

    private static func submit(_ campaign: Campaign, _ writer: ResultsWriter) async throws -> HTTPResponse {
        let report = try await writer.producer.send(ProducerRecord(topic: writer.topics.campaigns, key: campaign.kafkaKey, value: MessageCodec.encode(campaign)))
        return .json(202, [
            "campaign": .string(campaign.id), "status": "submitted",
            "submission": ["partition": .int(Int64(report.partition)), "offset": .int(report.offset)],
        ], headers: ["Location": "/v1/apps/\(campaign.app)/campaigns/\(campaign.id)"])
    }

    /// A campaign's (or message's) row with its outcomes so far.
    static func view(_ row: CampaignRegistry.Row, store: DeviceStore) async throws -> HTTPResponse {
        let counts = try await store.ledger.progressCounts(campaign: row.key)
        var outcomes: [String: JSONValue] = [:]
        var finished = 0
        for (state, count) in counts where state.isFinal && count > 0 {
            outcomes[state.rawValue] = .int(Int64(count))
            finished += count
        }
        var answer: [String: JSONValue] = [
            "id": .string(row.id), "app": .string(row.app), "status": .string(row.status.rawValue), "audience": .int(Int64(row.audience)),
            "finished": .int(Int64(finished)), "outcomes": .object(outcomes),
        ]
        if let sendAt = row.sendAt { answer["send_at"] = .int(sendAt) }
        return .json(200, .object(answer))
    }

    /// The path's campaign, named within the path's app: another app's campaign of the same
    /// id is another campaign, never this one.
    private static func campaign(_ store: DeviceStore, _ call: RouteCall) async throws -> CampaignRegistry.Row {
        guard let row = try await store.campaigns.get(CampaignKey(app: call.parameter("app"), id: call.parameter("campaign"))) else {
            throw APIError.notFound("app \(call.parameter("app")) has no campaign \(call.parameter("campaign"))")
        }
        return row
    }
}
