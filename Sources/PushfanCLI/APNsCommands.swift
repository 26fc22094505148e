import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanCrypto
import PushfanMessages
import PushfanSupport

/// Options shared by the commands that talk to APNs: where, and as whom.
enum APNsOptions {
    static let endpointSpecs: [OptionSpec] = [
        .option("environment", "ENV", "production or sandbox: Apple's host (default: production)"),
        .option("port", "PORT", "443 or 2197 on Apple's hosts (default: 443)"),
        .option("url", "URL", "endpoint override, e.g. a simulator: https://host:port (default: $PUSHFAN_APNS_URL)"),
        .option("ca-file", "FILE", "PEM CA certificates to trust for --url (default: $PUSHFAN_APNS_CA_FILE)"),
    ]

    /// Token or certificate auth, as an app stores them (`apps add`, `apps set-credentials`).
    static let storedCredentialSpecs: [OptionSpec] = [
        .option("team-id", "ID", "token auth: Apple team id (iss)"),
        .option("key-id", "ID", "token auth: signing key id (kid)"),
        .option("key-file", "FILE", "token auth: the .p8 signing key"),
        .option("cert", "FILE", "certificate auth: PEM certificate, or PKCS#12 file without --cert-key"),
        .option("cert-key", "FILE", "certificate auth: PEM private key of --cert"),
    ]

    /// The stored flags and a password, for the commands that load credentials for one run.
    static let credentialSpecs: [OptionSpec] = storedCredentialSpecs + [
        .option("cert-password", "TEXT", "certificate auth: password of the PKCS#12 file or key"),
    ]

    static let poolSpecs: [OptionSpec] = [
        .option("proxy", "URL", "HTTP proxy to tunnel through (default: apns.proxy, else https_proxy from the environment)"),
        .option("connections", "N", "most HTTP/2 connections, opened as the load needs them (default: 16)"),
        .option("streams", "N", "most concurrent streams per connection, lowered by the server's limit (default: 1000)"),
    ]

    static func endpoint(_ arguments: ParsedArguments, _ context: CommandContext, insecure: Bool = false) throws -> APNsEndpoint {
        let environment = try environment(arguments)
        let url = arguments.value("url") ?? context.configuration.apns.url
        let caFile = arguments.value("ca-file") ?? context.configuration.apns.caFile
        if let url {
            guard arguments.value("port") == nil else { throw UsageError("--port applies to Apple's hosts; put the port in --url") }
            return try APNsEndpoint(url: url, caFile: caFile, verifyPeer: !insecure)
        }
        guard caFile == nil || arguments.value("ca-file") == nil else {
            throw UsageError("--ca-file applies to --url; Apple's hosts are checked against the system's CAs")
        }
        return try APNsEndpoint.apple(environment, port: arguments.int("port", default: 443))
    }

    static func environment(_ arguments: ParsedArguments) throws(UsageError) -> APNsEnvironment {
        let text = arguments.value("environment") ?? "production"
        guard let environment = APNsEnvironment(rawValue: text.lowercased()) else {
            throw UsageError("--environment must be production or sandbox, got '\(text)'")
        }
        return environment
    }

    /// Token auth (`--team-id --key-id --key-file`) or certificate auth
    /// (`--cert [--cert-key]`), exactly one of them; nil when neither is given.
    static func credentialsReference(_ arguments: ParsedArguments) throws(UsageError) -> APNsCredentialsReference? {
        let token = ["team-id", "key-id", "key-file"].filter { arguments.value($0) != nil }
        let certificate = ["cert", "cert-key", "cert-password"].filter { arguments.value($0) != nil }
        if !token.isEmpty && !certificate.isEmpty {
            throw UsageError("choose token auth (--team-id --key-id --key-file) or certificate auth (--cert), not both")
        }
        if !token.isEmpty {
            guard token.count == 3 else {
                throw UsageError("token auth needs --team-id, --key-id and --key-file together")
            }
            let (team, key) = (try arguments.required("team-id"), try arguments.required("key-id"))
            for (flag, value) in [("--team-id", team), ("--key-id", key)] where !ProviderSigningKey.hasAppleIDShape(value) {
                throw UsageError("\(flag) must be Apple's 10-character id of A-Z and 0-9 (like ABC123DEFG), got '\(value)'")
            }
            return .token(teamID: team, keyID: key, keyFile: try arguments.required("key-file"))
        }
        if !certificate.isEmpty {
            return .certificate(certificateFile: try arguments.required("cert"), keyFile: arguments.value("cert-key"))
        }
        return nil
    }

    /// The credentials of `credentialsReference`, loaded (with `--cert-password` for a
    /// certificate); nil when none are given.
    static func credentials(_ arguments: ParsedArguments) throws -> APNsCredentials? {
        switch try credentialsReference(arguments) {
        case nil:
            return nil
        case .certificate(let certificateFile, let keyFile)?:
            return .certificate(try APNsClientCertificate(
                certificateFile: certificateFile, keyFile: keyFile, password: arguments.value("cert-password")))
        case let reference?:
            return try APNsCredentials.load(reference)
        }
    }

    /// The pool settings: flags over the configuration file's `apns` section over defaults.
    static func pool(_ arguments: ParsedArguments, _ context: CommandContext) throws(UsageError) -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration()
        let file = context.configuration.apns
        configuration.proxy = arguments.value("proxy") ?? file.proxy
        configuration.connections = try arguments.int("connections", default: file.connections ?? configuration.connections, range: 1...64)
        configuration.streamsPerConnection = try arguments.int(
            "streams", default: file.streamsPerConnection ?? configuration.streamsPerConnection, range: 1...10_000)
        return configuration
    }
}

/// `pushfan send`: one notification, its outcome printed as JSON.
struct SendCommand: Command {
    static let spec = CommandSpec(
        name: "send",
        summary: "Send one notification to APNs and print the outcome",
        discussion: """
            The payload is checked before anything is sent (aps keys, push-type rules, 4,096 bytes
            or 5,120 for voip); a bad one is reported and never reaches the wire. Retryable answers
            (5xx, 429, connection loss) are retried with backoff up to --attempts; a rejection
            that resending cannot fix is printed at once.

            Output: one JSON object, e.g.
              {"outcome":"accepted","status":200,"apns_id":"…","attempts":1}
              {"outcome":"rejected","status":410,"reason":"Unregistered","disposition":"invalidate_token",
               "timestamp_ms":1700000000000,"attempts":1}
              {"outcome":"failed","cause":"connect_failed","certainty":"not_processed","detail":"…","attempts":3}
            Exit codes: 0 accepted, 1 rejected or failed, 2 usage error.

            Token auth: the provider token is saved (mode 0600) and reused by later runs until it
            is 50 minutes old, because APNs refuses a new token for the same key more often than
            every 20 minutes (TooManyProviderTokenUpdates).
            """,
        options: [
            .option("token", "HEX", "device token (required)"),
            .option("topic", "BUNDLE", "app bundle id; the push type's suffix is added (required)"),
            .option("payload", "JSON|@FILE", "the payload, inline or from a file (required)"),
            .option("push-type", "TYPE", "alert, background, voip, complication, fileprovider, mdm, location, liveactivity, pushtotalk, widgets or controls (default: alert)"),
            .option("priority", "P", "10, 5 or 1 (default: 5 for background, else 10)"),
            .option("collapse-id", "ID", "apns-collapse-id, at most 64 bytes"),
            .option("expiration", "SECONDS", "apns-expiration: epoch seconds, 0 = try once"),
            .option("apns-id", "UUID", "apns-id (default: a new UUID)"),
            .option("attempts", "N", "most attempts for retryable outcomes (default: 3)"),
            .option("token-cache", "DIR", "where the provider token is kept between runs (default: $XDG_CACHE_HOME/pushfan or ~/.cache/pushfan; 'off' to sign anew each run)"),
            .option("proxy", "URL", "HTTP proxy to tunnel through (default: apns.proxy, else https_proxy from the environment)"),
        ] + APNsOptions.endpointSpecs + APNsOptions.credentialSpecs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let notification = try notification(arguments)
        let endpoint = try APNsOptions.endpoint(arguments, context)
        guard let credentials = try APNsOptions.credentials(arguments) else {
            throw UsageError("credentials are required: --team-id --key-id --key-file, or --cert [--cert-key]")
        }
        var configuration = try APNsOptions.pool(arguments, context)
        configuration.connections = 1
        let tokenCache = ProviderTokenCache(clock: context.clock)
        let savedToken = try ProviderTokenFile(arguments.value("token-cache"), credentials: credentials, keyFile: arguments.value("key-file"))
        savedToken?.load(into: tokenCache)
        let client = try APNsClient(
            endpoint: endpoint, credentials: credentials, configuration: configuration, tokenCache: tokenCache, logger: context.logger)
        defer { savedToken?.save(from: tokenCache, logger: context.logger) }
        var policy = RetryPolicy()
        policy.maxAttempts = try arguments.int("attempts", default: 3, range: 1...20)
        policy.maxDelay = .seconds(5)
        let (result, decision, attempts) = await client.send(notification, retrying: policy)
        await client.shutdown()
        print(Self.describe(result, decision: decision, attempts: attempts))
        if case .response(.accepted) = result { return 0 }
        return 1
    }

    static func notification(_ arguments: ParsedArguments) throws -> APNsNotification {
        let token = try DeviceToken(arguments.required("token"))
        let text = try arguments.required("payload")
        let bytes: Data
        if text.hasPrefix("@") {
            let path = String(text.dropFirst())
            guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("cannot read payload file \(path)") }
            bytes = data
        } else {
            bytes = Data(text.utf8)
        }
        let payload: APNsPayload
        do {
            payload = try APNsPayload(jsonBytes: bytes)
        } catch {
            throw UsageError("--payload is not a valid APNs payload: \(error)")
        }
        let pushTypeText = arguments.value("push-type") ?? "alert"
        guard let pushType = Campaign.PushType(rawValue: pushTypeText) else {
            throw UsageError("--push-type must be one of \(Campaign.PushType.allCases.map(\.rawValue).joined(separator: ", ")); got '\(pushTypeText)'")
        }
        var priority: APNsNotification.Priority?
        if let value = arguments.value("priority") {
            guard let number = Int(value), let parsed = APNsNotification.Priority(rawValue: number) else {
                throw UsageError("--priority must be 10, 5 or 1; got '\(value)'")
            }
            priority = parsed
        }
        var expiration = APNsNotification.Expiration.unspecified
        if let value = arguments.value("expiration") {
            guard let seconds = Int64(value), seconds >= 0 else {
                throw UsageError("--expiration must be epoch seconds (0 = try once); got '\(value)'")
            }
            expiration = .init(epochSeconds: seconds)
        }
        var apnsID = UUID()
        if let value = arguments.value("apns-id") {
            guard let parsed = UUID(uuidString: value) else { throw UsageError("--apns-id must be a UUID; got '\(value)'") }
            apnsID = parsed
        }
        return try APNsNotification(
            token: token, topic: arguments.required("topic"), pushType: pushType, payload: payload, priority: priority,
            expiration: expiration, collapseID: arguments.value("collapse-id"), apnsID: apnsID)
    }

    static func describe(_ result: APNsSendResult, decision: RetryPolicy.Decision, attempts: Int) -> String {
        var fields: [(String, JSONValue)] = []
        switch result {
        case .response(.accepted(let apnsID, let uniqueID)):
            fields = [("outcome", .string("accepted")), ("status", .int(200)), ("apns_id", .string(apnsID))]
            if let uniqueID { fields.append(("unique_id", .string(uniqueID))) }
        case .response(.rejected(let status, let reason, let timestamp)):
            fields = [
                ("outcome", .string("rejected")), ("status", .int(Int64(status))), ("reason", .string(reason.rawValue)),
                ("disposition", .string(reason.disposition(status: status).rawValue)),
            ]
            if let timestamp { fields.append(("timestamp_ms", .int(Int64((timestamp.timeIntervalSince1970 * 1000).rounded())))) }
        case .failed(let failure):
            fields = [
                ("outcome", .string("failed")), ("cause", .string(failure.cause.rawValue)),
                ("certainty", .string(failure.certainty.rawValue)), ("detail", .string(failure.detail)),
            ]
        }
        if case .expired = decision { fields.append(("expired", .bool(true))) }
        fields.append(("attempts", .int(Int64(attempts))))
        return JSONValue.orderedObjectJSON(fields)
    }
}

/// The provider token of one key, kept in a file between runs of a short-lived
/// command. Nil for certificate auth or `--token-cache off`.
struct ProviderTokenFile {
    let path: String
    let key: ProviderSigningKey

    /// The file name carries a fingerprint of the key's public half, so a token
    /// is never offered to a different key that has the same ids.
    init?(_ directory: String?, credentials: APNsCredentials, keyFile: String?) throws {
        guard case .token(let key) = credentials, directory != "off", let keyFile,
              let publicKey = try? ES256PrivateKey(contentsOfFile: keyFile).publicKey
        else { return nil }
        let fingerprint = Crypto.sha256(Data(publicKey.pem.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        let environment = ProcessInfo.processInfo.environment
        let base = directory
            ?? environment["XDG_CACHE_HOME"].map { $0 + "/pushfan" }
            ?? (environment["HOME"] ?? NSTemporaryDirectory()) + "/.cache/pushfan"
        do {
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw UsageError("--token-cache: cannot create \(base): \(error.localizedDescription)")
        }
        path = base + "/provider-token-\(key.teamID)-\(key.keyID)-\(fingerprint).jwt"
        self.key = key
    }

    /// Adopts the saved token if it belongs to this key and is still fresh.
    func load(into cache: ProviderTokenCache) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let token = ProviderToken(jwt: text.trimmingCharacters(in: .whitespacesAndNewlines), for: key)
        else { return }
        cache.adopt(token, for: key)
    }

    /// Saves the cache's current token (readable by the user only).
    func save(from cache: ProviderTokenCache, logger: Logger) {
        guard let token = try? cache.token(for: key) else { return }
        if (try? String(contentsOfFile: path, encoding: .utf8)) == token.jwt { return }
        let written = FileManager.default.createFile(atPath: path, contents: Data(token.jwt.utf8), attributes: [.posixPermissions: 0o600])
        if !written { logger.warning("apns.token.not_saved", ["path": path]) }
    }
}
