import Foundation
import PushfanAPNsSim
import PushfanMessages

/// `pushfan apns-sim`: an HTTP/2 server that behaves like APNs, for tests, demos, staging
/// and load tests.
struct APNsSimCommand: Command {
    static let spec = CommandSpec(
        name: "apns-sim",
        summary: "Run an APNs simulator: HTTP/2 (TLS or h2c) with APNs' rules, JWT checks and fault injection",
        discussion: """
            Prints "apns-sim listening on https://HOST:PORT" (http:// with --h2c) as the first line
            of standard output once it accepts connections (after writing --ca-out), and runs
            until SIGINT or SIGTERM. Send notifications to POST /3/device/<token> as to APNs.

            Credentials: --keys FILE registers token-auth keys (JSON: {"keys":[{"team_id",
            "key_id", "public_key" PEM | "public_key_file" | "private_key_file" (.p8),
            "topics": [bundle ids]}]}); JWTs are verified with ES256 once and then cached.
            iat older than 60 minutes: 403 ExpiredProviderToken; a JWT with a newer iat within 20
            minutes of the current one: 429 TooManyProviderTokenUpdates (on the same connection;
            --token-updates key: for the key, across connections and processes); another key
            than the connection's first: 403 UnrelatedKeyIdInToken; topic outside the key's
            "topics": 400 TopicDisallowed. --accept-any-key checks JWT structure and claims but not
            signatures. --client-ca FILE adds certificate auth (mutual TLS): a connection with a
            client certificate signed by those CAs pushes to the certificate's topic (subject UID,
            else CN) without a JWT; other topics get 400 TopicDisallowed; apns-topic defaults to
            it. --no-auth accepts every request without credentials.

            Device outcomes: --rules FILE (JSON): {"tokens": {TOKEN: REASON | {"reason",
            "status", "timestamp", "topic"}}, "unregistered": {TOKEN: MS}, "prefixes": {HEX:
            REASON | {...}}}. Tokens without a rule are accepted.

            Runtime control (no credentials needed, on any connection):
              GET  /_sim/stats     counts per status, reason, topic, push type; distinct tokens,
                                   duplicate acceptances, JWT changes per key, connections
              POST /_sim/reset     clears the counts
              GET  /_sim/control   current fault settings
              POST /_sim/control   JSON with any of: p500, p503, p429, throttle_tokens, latency,
                                   goaway_after, refuse_fraction, drop_after,
                                   max_concurrent_streams, start_at_one,
                                   drop_to_one_after_rejection, clock_offset_s
            --log FILE appends one JSON line per accepted notification (time_ms, connection,
            token, apns_id, collapse_id, topic, push_type, priority, payload_bytes).

            Latency SPEC: 5 (fixed ms), 5-20 (uniform), exp:10 (exponential, mean ms), 0 (none), or
            apns: Apple's servers as a data centre sees them (lognormal, median 80 ms, p99 300 ms,
            0.2% stalls of 1-3 s, each connection ~10% apart; docs/apns-sim.md).
            See docs/apns-sim.md for staging and load-test recipes.
            """,
        options: [
            .option("port", "P", "port to listen on; 0 picks a free one (default 2197)"),
            .option("host", "ADDR", "IPv4 or IPv6 address to listen on (default 127.0.0.1; ::1 for IPv6 loopback)"),
            .option("tls-cert", "FILE", "PEM certificate chain to serve (with --tls-key); default: a generated one"),
            .option("tls-key", "FILE", "PEM private key of --tls-cert"),
            .flag("h2c", "cleartext HTTP/2 with prior knowledge instead of TLS"),
            .option("ca-out", "FILE", "write the generated CA certificate (PEM) here, for clients to trust"),
            .option("keys", "FILE", "token-auth keys to accept (JSON, see below)"),
            .flag("accept-any-key", "accept any team/key id; check JWT structure and claims, not signatures"),
            .flag("no-auth", "do not authenticate providers at all"),
            .option("token-updates", "SCOPE", "where the 20-minute token rule applies: connection (default) or key"),
            .option("client-ca", "FILE", "certificate auth (mutual TLS) with client certificates from these CAs (PEM; see below)"),
            .option("rules", "FILE", "device outcome rules (JSON, see below)"),
            .option("log", "FILE", "append one NDJSON line per accepted notification"),
            .flag("log-payloads", "with --log, each line also carries the request body as a JSON string (payload)"),
            .option("threads", "N", "event-loop threads (default: one per core)"),
            .flag("production", "answer like the production host (no apns-unique-id); default is the sandbox"),
            .option("p500", "X", "probability of 500 InternalServerError per request (default 0)"),
            .option("p503", "X", "probability of 503 ServiceUnavailable per request (default 0)"),
            .option("p429", "X", "probability of 429 TooManyRequests per request (default 0)"),
            .option("throttle-token", "HEX", "always answer 429 TooManyRequests for this token", repeatable: true),
            .option("latency", "SPEC", "delay before each response: 5, 5-20, exp:10 (ms), apns (default 0)"),
            .option("goaway-after", "N", "GOAWAY after N requests on a connection (default 0: never)"),
            .option("refuse-fraction", "X", "fraction of requests answered RST_STREAM REFUSED_STREAM (default 0)"),
            .option("drop-after", "N", "close a connection on its Nth request, leaving it in flight (default 0: never)"),
            .option("max-concurrent-streams", "N", "SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)"),
            .flag("no-start-at-one", "token-auth connections advertise the full stream limit at once (APNs starts at 1)"),
            .flag("drop-to-one-after-rejection", "advertise 1 stream after a rejection, until the next acceptance"),
            .option("clock-offset", "SECONDS", "shift the simulator's clock (JWT age and refresh rules, timestamps)"),
        ])

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let configuration = try makeConfiguration(arguments)
        let logger = context.logger.child("apns-sim")
        let simulator: APNsSimulator
        do {
            simulator = try APNsSimulator(configuration: configuration)
        } catch {
            throw UsageError(error.description)
        }
        if let caFile = arguments.value("ca-out") {
            guard let pem = simulator.certificateAuthorityPEM else {
                simulator.stop()
                throw UsageError("--ca-out needs the generated certificate; with --tls-cert or --h2c there is no CA to write")
            }
            try writeAtomically(pem, to: caFile)
        }
        let scheme = arguments.flag("h2c") ? "http" : "https"
        let host = switch configuration.host {
        case "0.0.0.0": "127.0.0.1"
        case "::": "[::1]"
        case let address where address.contains(":"): "[\(address)]"
        default: configuration.host
        }
        let shutdown = ShutdownSignal.prepare()
        print("apns-sim listening on \(scheme)://\(host):\(simulator.port)")
        fflush(nil)
        logger.notice("apns_sim.ready", ["apns_sim.port": String(simulator.port), "apns_sim.threads": String(configuration.threads)])
        let signal = await shutdown()
        logger.notice("apns_sim.stopping", ["signal": String(signal)])
        simulator.stop()
        return 0
    }

    static func makeConfiguration(_ arguments: ParsedArguments) throws -> SimConfiguration {
        var configuration = SimConfiguration()
        configuration.port = try arguments.int("port", default: 2197, range: 0...65535)
        if let host = arguments.value("host") { configuration.host = host }
        configuration.threads = try arguments.int("threads", default: ProcessInfo.processInfo.activeProcessorCount, range: 1...256)
        let certificate = arguments.value("tls-cert"), key = arguments.value("tls-key")
        switch (certificate, key, arguments.flag("h2c")) {
        case (nil, nil, false): configuration.transport = .generatedTLS
        case (nil, nil, true): configuration.transport = .h2c
        case (let certificate?, let key?, false): configuration.transport = .tlsFiles(certificate: certificate, key: key)
        case (_, _, true): throw UsageError("--h2c is cleartext; leave out --tls-cert and --tls-key")
        default: throw UsageError("--tls-cert and --tls-key go together")
        }
        let authChoices = [arguments.value("keys") != nil, arguments.flag("accept-any-key"), arguments.flag("no-auth")].filter { $0 }.count
        let clientCA = arguments.value("client-ca")
        guard authChoices == 1 || (authChoices == 0 && clientCA != nil) else {
            throw UsageError("choose how providers authenticate: --keys FILE, --accept-any-key or --no-auth (exactly one), or --client-ca FILE alone")
        }
        if clientCA != nil && arguments.flag("no-auth") { throw UsageError("--client-ca and --no-auth contradict each other") }
        configuration.clientCAFile = clientCA
        let scopeText = arguments.value("token-updates") ?? "connection"
        guard let scope = ProviderAuthority.UpdateScope(rawValue: scopeText) else {
            throw UsageError("--token-updates must be connection or key, got '\(scopeText)'")
        }
        do {
            if let keysFile = arguments.value("keys") {
                configuration.auth = .token(ProviderAuthority(keys: try RegisteredKey.load(file: keysFile), updateScope: scope))
            } else if arguments.flag("accept-any-key") {
                configuration.auth = .token(ProviderAuthority(keys: [], acceptAnyKey: true, updateScope: scope))
            } else if clientCA != nil {
                // Certificate auth only: connections without a certificate have no credentials.
                configuration.auth = .token(ProviderAuthority(keys: []))
            } else {
                configuration.auth = .none
            }
            if let rulesFile = arguments.value("rules") { configuration.rules = try DeviceRules.load(file: rulesFile) }
        } catch {
            throw UsageError(error.description)
        }
        configuration.logFile = arguments.value("log")
        configuration.logPayloads = arguments.flag("log-payloads")
        configuration.sandbox = !arguments.flag("production")

        // Fault flags go through the same checks as control JSON.
        var control: [String: Any] = [:]
        for (flag, member) in [("p500", "p500"), ("p503", "p503"), ("p429", "p429"), ("refuse-fraction", "refuse_fraction"), ("clock-offset", "clock_offset_s")] {
            if let text = arguments.value(flag) {
                guard let number = Double(text) else { throw UsageError("--\(flag) must be a number, got '\(text)'") }
                control[member] = number
            }
        }
        for (flag, member) in [("goaway-after", "goaway_after"), ("drop-after", "drop_after"), ("max-concurrent-streams", "max_concurrent_streams")] {
            if let text = arguments.value(flag) {
                guard let number = Int(text) else { throw UsageError("--\(flag) must be a whole number, got '\(text)'") }
                control[member] = number
            }
        }
        if let latency = arguments.value("latency") { control["latency"] = latency }
        let throttled = arguments.values("throttle-token")
        if !throttled.isEmpty { control["throttle_tokens"] = throttled }
        if arguments.flag("no-start-at-one") { control["start_at_one"] = false }
        if arguments.flag("drop-to-one-after-rejection") { control["drop_to_one_after_rejection"] = true }
        do {
            try configuration.faults.apply(json: control)
        } catch {
            throw UsageError(error.description)
        }
        return configuration
    }
}
