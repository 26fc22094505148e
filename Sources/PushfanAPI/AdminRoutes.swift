import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport

/// `/v1/admin/apps`: app management for whoever holds the admin token (`Authorization:
/// Bearer TOKEN`, from `pushfan api --admin-token-file`): create (credentials loaded and
/// checked first, as `pushfan apps add` does), list, read, change the rate or the credentials,
/// rotate either secret. Secrets are shown once, in the answer that made them.
enum AdminRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore, credentialFiles: CredentialFiles) {
        router.add("GET", "/v1/admin/operator-log", Route(roles: [], admin: true) { call in
            let query = call.request.query
            func bounded(_ name: String, _ range: ClosedRange<Int64>, default value: Int64) throws -> Int64 {
                guard let text = query[name] else { return value }
                guard let number = Int64(text), range.contains(number) else {
                    throw APIError(400, "invalid_input", "\(name): a whole number from \(range.lowerBound) to \(range.upperBound)", field: name)
                }
                return number
            }
            let after = try bounded("after", 0...Int64.max, default: 0)
            let limit = Int(try bounded("limit", 1...1000, default: 100))
            let entries = try await store.operatorLog.list(after: after, limit: limit, app: query["app"])
            var answer: [String: JSONValue] = ["entries": .array(entries.map(\.json))]
            if entries.count == limit, let last = entries.last { answer["next"] = .int(last.sequence) }
            return .json(200, .object(answer))
        })
        router.add("POST", "/v1/admin/keys", Route(roles: [], admin: true) { call in
            let body = try APIService.jsonObject(call.request)
            let role = try KeyRole(name: try BodyFields.text(body, "role"), app: try BodyFields.optionalText(body, "app"))
            let (key, token) = try await store.adminKeys.add(name: try BodyFields.text(body, "name"), role: role)
            guard case .object(var answer) = key.json else { return .json(500, [:]) }
            answer["key"] = .string(token)
            return .json(201, .object(answer), headers: ["Location": "/v1/admin/keys/\(key.id)"])
        })
        router.add("GET", "/v1/admin/keys", Route(roles: [], admin: true) { _ in
            .json(200, ["keys": .array(try await store.adminKeys.list().map(\.json))])
        })
        router.add("DELETE", "/v1/admin/keys/{id}", Route(roles: [], admin: true) { call in
            guard try await store.adminKeys.revoke(id: call.parameter("id")) else { throw APIError.notFound("no key \(call.parameter("id")) that is not revoked already") }
            return .json(200, ["id": .string(call.parameter("id")), "revoked": true])
        })
        router.add("GET", "/v1/admin/apps", Route(roles: [], admin: true) { _ in
            .json(200, ["apps": .array(try await store.apps.list().map(json))])
        })
        router.add("POST", "/v1/admin/apps", Route(roles: [], admin: true) { call in
            let body = try APIService.jsonObject(call.request)
            let app = try BodyFields.text(body, "app")
            let rate = try BodyFields.number(body, "rate") ?? 1000
            var registration = AppRegistration(
                app: app, topic: try BodyFields.text(body, "topic"), credentials: try credentials(credentialFiles, body),
                environment: try APNsEnvironment(parsing: try BodyFields.optionalText(body, "environment") ?? "production"), ratePerSecond: rate,
                timeZone: try BodyFields.optionalText(body, "time_zone"))
            registration.timeZone = registration.timeZone.flatMap { $0.isEmpty ? nil : $0 }
            registration.defaultCategory = try BodyFields.optionalText(body, "default_category")
            registration.frequencyCaps = try frequencyCaps(body, key: "frequency_caps", per: "frequency_caps_per", required: false)
            let secrets = try await store.apps.add(registration)
            return .json(201, ["app": .string(app), "master_secret": .string(secrets.master), "application_secret": .string(secrets.application)],
                         headers: ["Location": "/v1/admin/apps/\(app)"])
        })
        router.add("GET", "/v1/admin/apps/{app}", Route(roles: [], admin: true) { call in
            guard let app = try await store.apps.get(call.parameter("app")) else { throw APIError.notFound("no app \(call.parameter("app"))") }
            return .json(200, json(app))
        })
        router.add("PUT", "/v1/admin/apps/{app}/rate", Route(roles: [], admin: true) { call in
            guard let rate = try BodyFields.number(try APIService.jsonObject(call.request), "rate") else {
                throw APIError(400, "invalid_input", "rate: required, sends per second", field: "rate")
            }
            try await store.apps.setRate(app: call.parameter("app"), ratePerSecond: rate)
            return .json(200, ["app": .string(call.parameter("app")), "rate": .int(Int64(rate))])
        })
        router.add("PUT", "/v1/admin/apps/{app}/default_category", Route(roles: [], admin: true) { call in
            let body = try APIService.jsonObject(call.request)
            guard body.keys.contains("category") else {
                throw APIError(400, "invalid_input", "category: required, the category name or null to remove it", field: "category")
            }
            let category = try BodyFields.optionalText(body, "category")
            try await store.apps.setDefaultCategory(app: call.parameter("app"), category: category)
            return .json(200, ["app": .string(call.parameter("app")), "default_category": category.map { .string($0) } ?? .null])
        })
        router.add("PUT", "/v1/admin/apps/{app}/frequency_caps", Route(roles: [], admin: true) { call in
            let caps = try frequencyCaps(try APIService.jsonObject(call.request), key: "caps", per: "per", required: true)
            try await store.apps.setFrequencyCaps(app: call.parameter("app"), caps)
            return .json(200, ["app": .string(call.parameter("app")), "frequency_caps": capsJSON(caps), "frequency_caps_per": perJSON(caps)])
        })
        router.add("PUT", "/v1/admin/apps/{app}/credentials", Route(roles: [], admin: true) { call in
            let reference = try credentials(credentialFiles, try APIService.jsonObject(call.request))
            try await store.apps.setCredentials(app: call.parameter("app"), reference)
            return .json(200, ["app": .string(call.parameter("app")), "credentials": credentialsJSON(reference)])
        })
        router.add("POST", "/v1/admin/apps/{app}/secrets/{which}/rotate", Route(roles: [], admin: true) { call in
            guard let role = AppRole(rawValue: call.parameter("which")) else {
                throw APIError.notFound("no route \(call.request.method) \(call.request.path): the secrets are master and application")
            }
            let body = call.request.body.isEmpty ? [:] : try APIService.jsonObject(call.request)
            let grace = try BodyFields.number(body, "grace_s") ?? 86_400
            guard (0...(30 * 86_400)).contains(grace) else { throw APIError(400, "invalid_input", "grace_s: 0 to 2592000 seconds", field: "grace_s") }
            let secret = try await store.apps.rotate(app: call.parameter("app"), role, grace: .seconds(grace), now: store.clock.wallMillis)
            return .json(200, ["app": .string(call.parameter("app")), "which": .string(role.rawValue), "secret": .string(secret), "old_valid_s": .int(Int64(grace))])
        })
    }

    /// Token auth (`team_id`, `key_id`, `key_file`) or certificate auth (`cert`, `cert_key`),
    /// loaded now so a wrong file fails here and not at a campaign's first send.
    private static func credentials(_ files: CredentialFiles, _ body: [String: JSONValue]) throws -> APNsCredentialsReference {
        let reference: APNsCredentialsReference
        if let team = try BodyFields.optionalText(body, "team_id") {
            for (field, value) in [("team_id", team), ("key_id", try BodyFields.text(body, "key_id"))] where !ProviderSigningKey.hasAppleIDShape(value) {
                throw APIError(400, "invalid_input", "\(field): Apple's 10-character id of A-Z and 0-9, got \(value.debugDescription)", field: field)
            }
            reference = .token(teamID: team, keyID: try BodyFields.text(body, "key_id"), keyFile: try files.path(try BodyFields.text(body, "key_file"), field: "key_file"))
        } else if let certificate = try BodyFields.optionalText(body, "cert") {
            reference = .certificate(
                certificateFile: try files.path(certificate, field: "cert"),
                keyFile: try BodyFields.optionalText(body, "cert_key").map { given throws(APIError) in try files.path(given, field: "cert_key") })
        } else {
            throw APIError(400, "invalid_input", "give team_id, key_id and key_file (token auth) or cert and cert_key (certificate auth)", field: "team_id")
        }
        do { _ = try APNsCredentials.load(reference) } catch {
            throw APIError(422, "invalid_credentials", "the credentials cannot be used: \(error)")
        }
        return reference
    }

    /// Member `key`: rules as `pushes/window` texts (`["3/1d", "1/1h"]`); empty (or, when not
    /// required, absent) is none. Member `per`: `"device"` (the default) or `"user"`.
    private static func frequencyCaps(_ body: [String: JSONValue], key: String, per: String, required: Bool) throws -> FrequencyCaps {
        let perUser: Bool
        switch body[per] {
        case nil, .null?, .string("device")?: perUser = false
        case .string("user")?: perUser = true
        default: throw APIError(400, "invalid_input", "\(per): \"device\" or \"user\" (whose pushes the caps count)", field: per)
        }
        let caps = try rules(body, key: key, required: required)
        return FrequencyCaps(caps.rules, perUser: perUser)
    }

    private static func rules(_ body: [String: JSONValue], key: String, required: Bool) throws -> FrequencyCaps {
        switch body[key] {
        case nil where !required, .null? where !required: return FrequencyCaps([])
        case .array(let items)?:
            let texts = try items.map { item -> String in
                guard case .string(let text) = item else { throw APIError(400, "invalid_input", "\(key): expected texts like \"3/1d\"", field: key) }
                return text
            }
            do { return try FrequencyCaps(parsing: texts.joined(separator: ",")) } catch {
                throw APIError(400, "invalid_input", "\(key): \(error)", field: key)
            }
        default:
            throw APIError(400, "invalid_input", "\(key): required, a list of rules like [\"3/1d\", \"1/1h\"] (empty: none)", field: key)
        }
    }

    private static func capsJSON(_ caps: FrequencyCaps) -> JSONValue { .array(caps.rules.map { .string($0.description) }) }
    private static func perJSON(_ caps: FrequencyCaps) -> JSONValue { caps.perUser ? "user" : "device" }

    private static func credentialsJSON(_ reference: APNsCredentialsReference) -> JSONValue {
        switch reference {
        case .token(let team, let key, let file): ["kind": "token", "team_id": .string(team), "key_id": .string(key), "key_file": .string(file)]
        case .certificate(let certificate, let key): ["kind": "certificate", "cert": .string(certificate), "cert_key": key.map { .string($0) } ?? .null]
        }
    }

    private static func json(_ app: AppRecord) -> JSONValue {
        [
            "app": .string(app.app), "topic": .string(app.topic), "environment": .string(app.environment.rawValue),
            "rate": .int(Int64(app.ratePerSecond)), "time_zone": app.timeZone.map { .string($0) } ?? .null,
            "default_category": app.defaultCategory.map { .string($0) } ?? .null,
            "frequency_caps": capsJSON(app.frequencyCaps), "frequency_caps_per": perJSON(app.frequencyCaps),
            "credentials": credentialsJSON(app.credentials), "created": .int(app.createdAt),
        ]
    }
}
