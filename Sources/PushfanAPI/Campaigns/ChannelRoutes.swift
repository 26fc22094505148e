import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `/v1/apps/{app}/channels`: an app's iOS 18 broadcast channels (master secret or a
/// campaigns key). Creating and deleting one is a channel management request to APNs with
/// the app's own credentials, in the app's environment; the store keeps what APNs made, so
/// the list is the store's and a campaign can name a channel (`audience.channel`).
///
/// Channel ids are base64 and may hold `/`, `+` and `=`: in a path they are percent-encoded
/// (`%2F`, `%2B`, `%3D`). An id the app does not have is 404 whatever it is, another app's
/// included.
enum ChannelRoutes {
    /// Makes the APNs side of the calls: the configuration's endpoint override (a simulator,
    /// a staging host) or Apple's management host, and provider tokens shared with the
    /// workers through the store.
    struct Access: Sendable {
        let apns: PushfanConfiguration.APNs
        let tokens: ProviderTokenCache

        func manager(for app: AppRecord) throws -> APNsChannelManager {
            let credentials: APNsCredentials
            do { credentials = try APNsCredentials.load(app.credentials) } catch {
                throw APIError(422, "credentials_unavailable", "app \(app.app)'s APNs credentials cannot be loaded: \(error.description)")
            }
            let override: APNsEndpoint?
            do { override = try apns.url.map { url throws(APNsSenderError) in try APNsEndpoint(url: url, caFile: apns.caFile) } } catch {
                throw APIError(503, "apns_unavailable", "the APNs endpoint is misconfigured: \(error.description)")
            }
            return APNsChannelManager(environment: app.environment, override: override, credentials: credentials, tokens: tokens)
        }
    }

    static func add(to router: inout Router<Route>, store: DeviceStore, access: Access) {
        router.add("POST", "/v1/apps/{app}/channels", Route(roles: [.master], campaigns: true) { call in
            let app = try await requireApp(call.parameter("app"), store)
            let policy = try storagePolicy(call.request)
            let manager = try access.manager(for: app)
            let id: String
            do throws(APNsChannelManager.Failure) { id = try await manager.create(bundleID: app.topic, policy: policy) } catch {
                throw refused(error, doing: "create a channel")
            }
            let row = BroadcastChannels.Row(app: app.app, id: id, environment: app.environment, policy: policy, createdAt: store.clock.wallMillis)
            try await store.channels.add(row)
            return .json(201, json(row), headers: ["Location": "/v1/apps/\(app.app)/channels/\(pathSegment(id))"])
        })
        router.add("GET", "/v1/apps/{app}/channels", Route(roles: [.master], campaigns: true) { call in
            let rows = try await store.channels.list(app: call.parameter("app"))
            return .json(200, ["channels": .array(rows.map(json))])
        })
        router.add("GET", "/v1/apps/{app}/channels/{channel}", Route(roles: [.master], campaigns: true) { call in
            .json(200, json(try await existing(call, store)))
        })
        router.add("DELETE", "/v1/apps/{app}/channels/{channel}", Route(roles: [.master], campaigns: true) { call in
            let row = try await existing(call, store)
            let app = try await requireApp(row.app, store)
            do { try await access.manager(for: app).delete(bundleID: app.topic, channel: row.id) } catch let failure as APNsChannelManager.Failure {
                // Already gone at APNs (deleted elsewhere, or the capability turned off): ours to forget too.
                guard failure.reason == APNsReason.channelNotRegistered.rawValue else { throw refused(failure, doing: "delete the channel") }
            }
            _ = try await store.channels.remove(app: row.app, id: row.id)
            return HTTPResponse(status: 204)
        })
    }

    /// `{"message_storage_policy": "none" | "most_recent"}`; an empty body means "none"
    /// (no stored message, and APNs' higher publishing budget).
    private static func storagePolicy(_ request: HTTPRequest) throws -> BroadcastChannel.StoragePolicy {
        guard !request.body.isEmpty else { return .noMessageStored }
        let body = try APIService.jsonObject(request)
        if let unknown = body.keys.sorted().first(where: { $0 != "message_storage_policy" }) {
            throw APIError(400, "unknown_field", "\(unknown) is not a channel setting; the one setting is message_storage_policy", field: unknown)
        }
        guard let name = try BodyFields.optionalText(body, "message_storage_policy") else { return .noMessageStored }
        guard let policy = BroadcastChannel.StoragePolicy(name: name) else {
            throw APIError(400, "invalid_field", "message_storage_policy must be \"none\" or \"most_recent\", got \(name.debugDescription)", field: "message_storage_policy")
        }
        return policy
    }

    private static func requireApp(_ key: String, _ store: DeviceStore) async throws -> AppRecord {
        guard let app = try await store.apps.get(key) else { throw APIError.notFound("app \(key) is not registered") }
        return app
    }

    private static func existing(_ call: RouteCall, _ store: DeviceStore) async throws -> BroadcastChannels.Row {
        let (app, id) = (call.parameter("app"), call.parameter("channel"))
        guard let row = try await store.channels.get(app: app, id: id) else {
            throw APIError.notFound("app \(app) has no broadcast channel \(id.debugDescription)")
        }
        return row
    }

    /// APNs refused (502, with its status and reason) or could not be reached (503).
    private static func refused(_ error: APNsChannelManager.Failure, doing what: String) -> APIError {
        error.status == 0
            ? APIError(503, "apns_unavailable", "could not \(what): \(error.description)", headers: ["Retry-After": "5"])
            : APIError(502, "apns_refused", "APNs did not \(what): \(error.status) \(error.reason)")
    }

    static func json(_ row: BroadcastChannels.Row) -> JSONValue {
        [
            "channel_id": .string(row.id), "message_storage_policy": .string(row.policy.name), "environment": .string(row.environment.rawValue),
            "created_at": .int(row.createdAt),
        ]
    }

    /// The id percent-encoded for a path.
    static func pathSegment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
    }
}
