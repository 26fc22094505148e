import Foundation
import PushfanAPNsModel
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// What a route handler gets: the request, the path's parameters, and who is calling.
package struct RouteCall: Sendable {
    package var request: HTTPRequest
    package var parameters: [String: String]
    /// The secret the caller presented, for routes under an app.
    package var role: AppRole?
    /// Who is looking, for the dashboard's routes.
    package var viewer: DashboardViewer?
    /// The scoped key the caller presented, if that is how it authenticated.
    package var key: AdminKey?

    package func parameter(_ name: String) -> String { parameters[name] ?? "" }

    /// Who made the call, as the operator log names them (never a secret).
    var actor: String {
        if let key { return "key \(key.id) (\(key.name), \(key.role.name))" }
        if let role { return "app \(parameter("app")) (\(role == .master ? "master" : "application") secret)" }
        return "admin token"
    }
}

/// A route: who may call it and what it does.
package struct Route: Sendable {
    /// The secrets that may call it; empty: anyone (health checks), or the admin.
    package let roles: Set<AppRole>
    /// Only with the admin token.
    package var admin = false
    /// The dashboard's: the admin token or an app's master secret.
    package var viewer = false
    /// One app's campaigns: a `campaigns:write` key of that app may call it too.
    package var campaigns = false
    package let handle: @Sendable (RouteCall) async throws -> HTTPResponse

    /// An operator call, written to the operator log: anything but a read on the admin
    /// routes and on the routes only an app's master secret may call, and reads marked
    /// `audited`. Device registration (the apps' own traffic) is not.
    func isOperatorCall(_ method: String) -> Bool {
        audited || (!readsOnly && method != "GET" && method != "HEAD" && (admin || (!roles.isEmpty && !roles.contains(.application))))
    }

    /// A read the operator log records all the same (an export of a person's data).
    package var audited = false

    /// A call that changes nothing though its method is not GET (a count with a body).
    package var readsOnly = false

    package init(
        roles: Set<AppRole>, admin: Bool = false, viewer: Bool = false, campaigns: Bool = false, handle: @escaping @Sendable (RouteCall) async throws -> HTTPResponse
    ) {
        self.roles = roles
        self.admin = admin
        self.viewer = viewer
        self.campaigns = campaigns
        self.handle = handle
    }
}

/// The API behind `pushfan api`: the router, HTTP Basic authentication with an app's key
/// and one of its secrets (`/v1/apps/{app}/…`; the key must be the path's app), throttling
/// of failed authentication per credential and client, admission before a body is read,
/// and the one error shape for everything that goes wrong. Store and Kafka outages answer 503: the client may retry.
package final class APIService: Sendable {
    let store: DeviceStore
    let writer: ResultsWriter
    let logger: Logger
    let router: Router<Route>
    private let throttle: Locked<AuthThrottle>
    package let metrics: RequestMetrics

    /// The admin token, as given (nil: the admin routes answer 401 to everyone).
    private let adminToken: String?

    package init(
        store: DeviceStore, writer: ResultsWriter, throttle: AuthThrottle = AuthThrottle(), adminToken: String? = nil,
        credentialFiles: CredentialFiles = .anywhere, dashboard: DashboardFeed? = nil, chartJS: [UInt8]? = nil,
        metrics: RequestMetrics = RequestMetrics(), apns: PushfanConfiguration.APNs = PushfanConfiguration.APNs(),
        lanes: Int = PushfanConfiguration.Worker().lanes, logger: Logger
    ) {
        self.metrics = metrics
        self.throttle = Locked(throttle)
        self.adminToken = adminToken
        self.store = store
        self.writer = writer
        self.logger = logger
        var router = Router<Route>()
        HealthRoutes.add(to: &router, store: store, writer: writer, logger: logger)
        DeviceRoutes.add(to: &router, store: store, logger: logger)
        UserRoutes.add(to: &router, store: store)
        PersonalDataRoutes.add(to: &router, store: store, writer: writer)
        CampaignRoutes.add(to: &router, store: store, writer: writer)
        MessageRoutes.add(to: &router, store: store, writer: writer, lanes: lanes)
        NotificareRoutes.add(to: &router, store: store)
        NotificareEngagementRoutes.add(to: &router, store: store, writer: writer)
        TokenRoutes.add(to: &router, store: store)
        EventRoutes.add(to: &router, store: store, writer: writer)
        SegmentRoutes.add(to: &router, store: store)
        TemplateRoutes.add(to: &router, store: store)
        let tokens = ProviderTokenCache.shared(through: store.providerTokens, clock: store.clock) { error in
            logger.warning("api.token_not_shared", ["error": "\(error)"])
        }
        ChannelRoutes.add(to: &router, store: store, access: ChannelRoutes.Access(apns: apns, tokens: tokens))
        AdminRoutes.add(to: &router, store: store, credentialFiles: credentialFiles)
        DashboardRoutes.add(to: &router, feed: dashboard, chartJS: chartJS, store: store)
        router.add("GET", "/openapi.json", Route(roles: []) { _ in
            HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Array(OpenAPIDocument.json.utf8))
        })
        let metrics = self.metrics
        router.add("GET", "/metrics", Route(roles: []) { _ in
            HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4"], body: Array(metrics.render().utf8))
        })
        self.router = router
    }

    /// An answer the HTTP server gave before routing (malformed framing, a deadline, a body
    /// over the limit, too many connections): counted under the route `unrouted`.
    package func refusedBeforeRouting(_ request: HTTPRequest, _ response: HTTPResponse) {
        metrics.record(method: request.method, route: "unrouted", status: response.status, seconds: 0)
        logger.info("api.request", ["http.method": request.method, "http.route": "unrouted", "http.status": String(response.status), "client": request.clientAddress])
    }

    /// Routes and authenticates a request from its head, before its body is read: a refusal
    /// (no route, bad or missing credentials, a throttled client) is answered without
    /// reading an upload; an accepted request is answered by the returned closure once its
    /// body is in.
    package func admit(_ request: HTTPRequest) async -> Admission {
        let started = store.clock.now
        var pattern = "unmatched"
        do {
            let (route, call) = try await authorize(request, route: &pattern)
            return .accept { [self, pattern] whole in
                var call = call
                call.request = whole
                let response: HTTPResponse
                do {
                    response = try await route.handle(call)
                } catch {
                    response = answer(for: error)
                }
                if route.isOperatorCall(request.method) { await logOperatorCall(call, action: "\(request.method) \(pattern)", response) }
                return finish(request, route: pattern, started: started, response)
            }
        } catch {
            return .refuse(finish(request, route: pattern, started: started, answer(for: error)))
        }
    }

    /// Admits and answers a request given whole.
    package func handle(_ request: HTTPRequest) async -> HTTPResponse {
        switch await admit(request) {
        case .refuse(let response): response
        case .accept(let run): await run(request)
        }
    }

    /// Writes an authenticated operator call and its outcome to the operator log. The ids
    /// it named are the path's, plus what it created (its `Location`).
    private func logOperatorCall(_ call: RouteCall, action: String, _ response: HTTPResponse) async {
        let location = response.headers["Location"]
        var target = call.parameters.filter { $0.key != "app" }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        if let location { target.append("created=\(location)") }
        let app = call.parameters["app"] ?? location.flatMap(Self.appOfLocation)
        let entry = OperatorLogEntry(
            actor: call.actor, client: call.request.clientAddress, action: action, app: app, target: target.joined(separator: " "),
            status: response.status)
        do {
            try await store.operatorLog.append(entry)
        } catch {
            logger.error("api.operator_log_failed", ["action": action, "status": String(response.status), "error": "\(error)"])
        }
    }

    /// `/v1/apps/X/…` or `/v1/admin/apps/X` → X.
    static func appOfLocation(_ location: String) -> String? {
        let parts = location.split(separator: "/")
        if parts.count >= 3, parts[0] == "v1", parts[1] == "apps" { return String(parts[2]) }
        if parts.count >= 4, parts[0] == "v1", parts[1] == "admin", parts[2] == "apps" { return String(parts[3]) }
        return nil
    }

    private func answer(for error: any Error) -> HTTPResponse {
        switch error {
        case let error as APIError: return error.response
        case let error as StoreError: return Self.storeError(error).response
        case let error as KafkaError:
            logger.warning("api.kafka_unavailable", ["error": error.description])
            return APIError(503, "kafka_unavailable", "Kafka did not take the record; nothing was submitted, retry later", headers: ["Retry-After": "1"]).response
        default:
            logger.error("api.internal_error", ["error": "\(error)"])
            return APIError(500, "internal_error", "the server failed; nothing was changed").response
        }
    }

    /// Counts and logs an answer. The log names the route pattern, not the path: paths carry
    /// device ids and tokens.
    private func finish(_ request: HTTPRequest, route: String, started: ContinuousClock.Instant, _ response: HTTPResponse) -> HTTPResponse {
        let elapsed = store.clock.now - started
        metrics.record(method: request.method, route: route, status: response.status, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        logger.info("api.request", [
            "http.method": request.method, "http.route": route, "http.status": String(response.status), "elapsed_ms": String(elapsed.milliseconds),
        ])
        return response
    }

    private func authorize(_ request: HTTPRequest, route pattern: inout String) async throws -> (Route, RouteCall) {
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            throw APIError.notFound("no route \(request.method) \(request.path)")
        case .controlCharacter(let parameter):
            throw APIError(404, "not_found", "\(parameter): an id holding a control character names nothing", field: parameter)
        case .methodNotAllowed(let allowed):
            throw APIError(405, "method_not_allowed", "\(request.path) takes \(allowed.joined(separator: ", "))", headers: ["Allow": allowed.joined(separator: ", ")])
        case .found(let route, let parameters, let matched):
            pattern = matched
            var call = RouteCall(request: request, parameters: parameters)
            if route.admin { call.key = try await authenticateAdmin(request) }
            if route.viewer { (call.viewer, call.key) = try await authenticateViewer(request) }
            if route.campaigns, let token = Self.bearerToken(request.header("authorization")), token.hasPrefix(AdminKeys.prefix) {
                let key = try await authenticateKey(request, token)
                guard case .campaignsWrite(let app) = key.role, app == parameters["app"] else {
                    throw APIError(403, "forbidden", "key \(key.id) (\(key.role.name)\(key.role.app.map { " for \($0)" } ?? "")) may not call \(request.method) \(matched) for app \(parameters["app"] ?? "")")
                }
                (call.key, call.role) = (key, .master)
            } else if !route.roles.isEmpty {
                // Routes without an app in the path (the SDK-compatible ones) take the key's.
                let (app, role) = try await authenticate(request, app: parameters["app"])
                call.parameters["app"] = app
                guard route.roles.contains(role) else {
                    throw APIError(403, "forbidden", "the application secret may only register and update devices; this call needs the master secret")
                }
                call.role = role
            }
            return (route, call)
        }
    }

    /// Refuses a credential that failed too often from this client (429).
    private func checkThrottle(_ credential: String, _ request: HTTPRequest) throws {
        if let wait = throttle.withLock({ $0.retryAfter(credential: credential, client: request.clientAddress, now: store.clock.now) }) {
            throw APIError(
                429, "too_many_failures", "too many failed authentications with these credentials from this address; retry in \(wait) s",
                headers: ["Retry-After": String(wait)])
        }
    }

    private func failed(_ credential: String, _ request: HTTPRequest) {
        throttle.withLock { $0.failed(credential: credential, client: request.clientAddress, now: store.clock.now) }
    }

    private func succeeded(_ credential: String, _ request: HTTPRequest) {
        throttle.withLock { $0.succeeded(credential: credential, client: request.clientAddress) }
    }

    /// HTTP Basic `appKey:secret`, for `app` (nil: the key's own). An unknown app and a
    /// wrong secret get the same 401. A request without credentials is refused but is not a
    /// failed try; failures count per app key and client together, so one app's bad tries
    /// never lock out another app.
    private func authenticate(_ request: HTTPRequest, app: String?) async throws -> (app: String, role: AppRole) {
        let unauthorized = APIError(
            401, "unauthorized", "give the app key and one of its secrets as HTTP Basic credentials", headers: ["WWW-Authenticate": #"Basic realm="pushfan""#])
        guard let header = request.header("authorization") else { throw unauthorized }
        guard let (key, secret) = Self.basicCredentials(header) else {
            try checkThrottle("malformed", request)
            failed("malformed", request)
            throw unauthorized
        }
        let credential = "app:" + key
        try checkThrottle(credential, request)
        guard key == app ?? key, let role = try await store.apps.authenticate(app: key, secret: secret, now: store.clock.wallMillis) else {
            failed(credential, request)
            logger.notice("api.unauthorized", ["app": String(key.prefix(64)), "client": request.clientAddress])
            throw unauthorized
        }
        succeeded(credential, request)
        return (key, role)
    }

    /// `Authorization: Bearer TOKEN` with the admin token (compared in constant time and
    /// throttled like the apps' secrets, as its own credential) or a scoped key: an `admin`
    /// key for anything, a `read-only` one for reads. Nil: the admin token.
    private func authenticateAdmin(_ request: HTTPRequest) async throws -> AdminKey? {
        let unauthorized = APIError(
            401, "unauthorized", "app management needs the admin token or a scoped key as Authorization: Bearer TOKEN", headers: ["WWW-Authenticate": #"Bearer realm="pushfan-admin""#])
        guard let header = request.header("authorization") else { throw unauthorized }
        if let token = Self.bearerToken(header), token.hasPrefix(AdminKeys.prefix) {
            let key = try await authenticateKey(request, token)
            switch key.role {
            case .admin: return key
            case .readOnly where request.method == "GET": return key
            default: throw APIError(403, "forbidden", "key \(key.id) (\(key.role.name)) may not call \(request.method) on the admin routes")
            }
        }
        try checkThrottle("admin", request)
        guard let adminToken, let given = Self.bearerToken(header), Self.constantTimeEqual(given, adminToken) else {
            failed("admin", request)
            throw unauthorized
        }
        succeeded("admin", request)
        return nil
    }

    /// A scoped key (`pfk_<id>_<secret>`), throttled per key id and client; 401 for a wrong,
    /// unknown or revoked one.
    private func authenticateKey(_ request: HTTPRequest, _ token: String) async throws -> AdminKey {
        let credential = "key:" + String(token.dropFirst(AdminKeys.prefix.count).prefix(12))
        try checkThrottle(credential, request)
        guard let key = try await store.adminKeys.verify(token) else {
            failed(credential, request)
            logger.notice("api.unauthorized", ["key": String(credential.dropFirst(4)), "client": request.clientAddress])
            throw APIError(401, "unauthorized", "the key is unknown, wrong or revoked", headers: ["WWW-Authenticate": #"Bearer realm="pushfan-admin""#])
        }
        succeeded(credential, request)
        return key
    }

    /// The dashboard's viewer: the admin token (as `Bearer TOKEN`, or as the password of
    /// HTTP Basic user `admin`, which a browser can prompt for), or an app's key and master
    /// secret, which show only that app.
    private func authenticateViewer(_ request: HTTPRequest) async throws -> (DashboardViewer, AdminKey?) {
        let unauthorized = APIError(
            401, "unauthorized", "the dashboard needs the admin token (user admin) or an app key and its master secret as HTTP Basic credentials",
            headers: ["WWW-Authenticate": #"Basic realm="pushfan dashboard""#])
        guard let header = request.header("authorization") else { throw unauthorized }
        if let token = Self.bearerToken(header), token.hasPrefix(AdminKeys.prefix) {
            let key = try await authenticateKey(request, token)
            if case .campaignsWrite(let app) = key.role { return (.app(app), key) }
            return (.admin, key)
        }
        let basic = Self.basicCredentials(header)
        let credential = basic.map { $0.0 == "admin" ? "admin" : "app:" + $0.0 } ?? "admin"
        try checkThrottle(credential, request)
        var viewer: DashboardViewer?
        if let adminToken, let bearer = Self.bearerToken(header), Self.constantTimeEqual(bearer, adminToken) {
            viewer = .admin
        } else if let (user, secret) = basic {
            if user == "admin", let adminToken, Self.constantTimeEqual(secret, adminToken) {
                viewer = .admin
            } else if try await store.apps.authenticate(app: user, secret: secret, now: store.clock.wallMillis) == .master {
                viewer = .app(user)
            }
        }
        guard let viewer else {
            failed(credential, request)
            throw unauthorized
        }
        succeeded(credential, request)
        return (viewer, nil)
    }

    /// Equal strings, in time that depends on their lengths only.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<max(x.count, y.count) { difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0) }
        return difference == 0
    }

    /// The credentials after an authentication scheme's name (matched in any case, as
    /// RFC 9110 says), or nil for another scheme.
    static func credentials(_ header: String?, scheme: String) -> Substring? {
        guard let header, header.utf8.count > scheme.utf8.count + 1 else { return nil }
        let name = header.prefix(scheme.count)
        guard name.lowercased() == scheme, header.dropFirst(scheme.count).first == " " else { return nil }
        let value = HTTPRequest.trimmingSpaces(header.dropFirst(scheme.count + 1))
        return value.isEmpty ? nil : value
    }

    /// `Bearer TOKEN` → TOKEN.
    static func bearerToken(_ header: String?) -> String? { credentials(header, scheme: "bearer").map(String.init) }

    /// `Basic base64(key:secret)` → (key, secret); nil for a key holding a control character.
    static func basicCredentials(_ header: String?) -> (String, String)? {
        guard let encoded = credentials(header, scheme: "basic") else { return nil }
        guard let data = Data(base64Encoded: String(encoded)),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":"),
              !Router<Never>.hasControlCharacter(String(text[..<colon]))
        else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    static func storeError(_ error: StoreError) -> APIError {
        switch error.code {
        case .invalidInput:
            // The store's messages start with the field at fault, when there is one.
            let field = error.message.split(separator: ":", maxSplits: 1).first.map(String.init).flatMap { name in
                name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." }) ? name : nil
            }
            return APIError(400, "invalid_input", error.message, field: field)
        case .notFound: return APIError.notFound(error.message)
        case .conflict: return APIError(409, "conflict", error.message)
        case .unavailable: return APIError(503, "store_unavailable", "the device store is not answering; retry later", headers: ["Retry-After": "1"])
        case .database: return APIError(500, "store_error", "the device store failed; nothing was changed")
        }
    }

    /// A JSON object body: 415 for another content type, 400 for anything but an object, and
    /// 400 naming the field for a key given twice or nesting past the limit (`JSONShapeCheck`).
    static func jsonObject(_ request: HTTPRequest) throws -> [String: JSONValue] {
        let body = try requireJSON(request)
        let notAnObject = APIError(400, "not_json", "the body must be a JSON object")
        // What the fast reader reads has no key twice and is shallow: the shape check and the
        // decoder are for the rest.
        if let fast = body.withUnsafeBytes({ JSONValue.parsedFast($0) }) {
            guard case .object(let members) = fast else { throw notAnObject }
            return members
        }
        if let problem = JSONShapeCheck.problem(in: body) {
            throw APIError(400, "invalid_input", "\(problem.field.isEmpty ? "body" : problem.field): \(problem.reason)", field: problem.field.isEmpty ? nil : problem.field)
        }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(body)), case .object(let members) = value else { throw notAnObject }
        return members
    }

    /// A JSON body, or the reason there is none: 415 for another content type.
    static func requireJSON(_ request: HTTPRequest) throws -> [UInt8] {
        let type = request.header("content-type")?.split(separator: ";").first.map { HTTPRequest.trimmingSpaces($0).lowercased() }
        guard type == "application/json" else {
            throw APIError(415, "unsupported_media_type", "send the body as application/json (got \(request.header("content-type") ?? "no content type"))")
        }
        return request.body
    }
}
