import Foundation
import PushfanAPI
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics
import PushfanWorker

/// `pushfan api`: the HTTP API for apps and marketing tools, until SIGTERM.
struct APICommand: Command {
    static let spec = CommandSpec(
        name: "api",
        summary: "Serve the HTTP API: device registration, campaigns, status and control (docs/api.md)",
        discussion: """
            Listens on --port (0: a free one) of 127.0.0.1, or of every interface with
            --listen-all, and prints "api listening on http://HOST:PORT" once it does. Plain
            HTTP/1.1: terminate TLS in a reverse proxy in front of it. Campaigns go to the
            campaigns topic; devices and campaign rows are read from and written to the store.
            SIGTERM or SIGINT stops accepting, lets running requests finish and exits.
            """,
        options: [
            .option("port", "N", "TCP port (default 8080; 0 picks a free one)"),
            .flag("listen-all", "listen on every interface, not only 127.0.0.1"),
            .option("max-body", "BYTES", "largest request body (default 1048576); larger ones get 413"),
            .option("idle-timeout", "SECONDS", "close a kept-alive connection idle this long, or one not reading its answer (default 30)"),
            .option("head-timeout", "SECONDS", "answer 408 and close when a request's headers take longer than this from its first byte (default 10)"),
            .option("body-timeout", "SECONDS", "answer 408 and close when a request's body takes longer than this (default 30)"),
            .option("max-connections", "N", "connections open at once; past it new ones get 503 with Retry-After (default 4096; the descriptor limit is raised to fit)"),
            .option("max-connections-per-address", "N", "connections open at once from one client address, a trusted proxy excepted (default 64)"),
            .option("trusted-proxy", "ADDRESSES", "comma-separated addresses of reverse proxies whose forwarding header names the client (default: none, the headers are ignored)"),
            .option("forwarded-header", "NAME", "the header those proxies name the client in: x-forwarded-for (default) or forwarded; only that one is read"),
            .option("kafka-timeout", "SECONDS", "how long a campaign submission waits for Kafka before answering 503 (default 10)"),
            .option("auth-window", "SECONDS", "--auth-failures failed authentications with one credential from one client within this long block that pair for the rest of it (default 60)"),
            .option("auth-failures", "N", "failed authentications with one credential (app key, admin token) from one client that block the pair (default 10)"),
            .option("admin-token-file", "FILE", "a file holding the admin token for /v1/admin and /dashboard (default: $PUSHFAN_ADMIN_TOKEN; none: app management over HTTP is off)"),
            .option("credentials-dir", "DIR", "the admin API may name APNs keys and certificates only inside DIR, symlinks resolved (default: any path the process can read)"),
            .option("dashboard-group", "NAME", "consumer group in which the dashboard reads the results topic (default pushfan-dashboard)"),
            .flag("dashboard-rebuild", "forget the dashboard's saved tallies and count the results topic again from its start"),
            .flag("no-dashboard", "do not read the results topic: /dashboard answers 503"),
            .option("chartjs", "FILE", "Chart.js to serve to the dashboard (default \(APICommand.debianChartJS), from libjs-chart.js)"),
            .option("url", "URL", "APNs endpoint override for broadcast channel management, e.g. a simulator (default: $PUSHFAN_APNS_URL, else Apple's hosts)"),
            .option("ca-file", "FILE", "PEM CA certificates to trust for --url (default: $PUSHFAN_APNS_CA_FILE)"),
        ] + StoreOptions.specs + KafkaOptions.specs)

    static let debianChartJS = "/usr/share/javascript/chart.js/chart.min.js"

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let policy = try connectionPolicy(arguments)
        let descriptors = DescriptorLimit.raise(to: policy.descriptorsNeeded)
        if descriptors < policy.descriptorsNeeded {
            context.logger.warning("api.descriptor_limit", [
                "limit": String(descriptors), "needed": String(policy.descriptorsNeeded),
                "reason": "--max-connections \(policy.maxConnections) needs more open files than the hard limit allows (LimitNOFILE / ulimit -Hn): past the limit new connections wait in the kernel's queue",
            ])
        }
        var adminToken = ProcessInfo.processInfo.environment["PUSHFAN_ADMIN_TOKEN"]
        if let file = arguments.value("admin-token-file") {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw UsageError("--admin-token-file: cannot read \(file)") }
            // stat, not lstat: Kubernetes mounts a Secret's file as a link (mode 777) to it.
            var info = stat()
            if stat(file, &info) == 0, info.st_mode & 0o007 != 0 {
                throw UsageError("--admin-token-file: \(file) may be read by every user (mode \(String(info.st_mode & 0o777, radix: 8))); chmod o-rwx it (600 or 640)")
            }
            adminToken = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let token = adminToken, token.utf8.count < 16 { throw UsageError("the admin token must be at least 16 characters") }
        var credentialFiles = CredentialFiles.anywhere
        if let directory = arguments.value("credentials-dir") {
            guard let bounded = CredentialFiles(directory: directory) else { throw UsageError("--credentials-dir: \(directory) is not a directory") }
            credentialFiles = bounded
        }
        let store = try await StoreOptions.open(arguments, context)
        var producerConfiguration = KafkaProducerConfiguration(client: try KafkaOptions.client(arguments, context))
        producerConfiguration.linger = .milliseconds(1)
        // A client waits on the answer: Kafka's own five minutes would hold it far too long.
        let kafkaTimeout = try arguments.int("kafka-timeout", default: 10, range: 1...300)
        producerConfiguration.messageTimeout = .seconds(kafkaTimeout)
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: context.logger.child("producer"))
        let metrics = RequestMetrics()
        store.exportMetrics(to: metrics.registry)
        let dashboard: DashboardFeed?
        if arguments.flag("no-dashboard") {
            dashboard = nil
        } else {
            if arguments.flag("dashboard-rebuild") {
                try await store.dashboard.clear()
                context.logger.notice("dashboard.rebuilding", [:])
            }
            dashboard = try DashboardFeed(
                kafka: try KafkaOptions.client(arguments, context), groupID: arguments.value("dashboard-group") ?? "pushfan-dashboard", store: store,
                topics: context.configuration.kafka.topics, metrics: metrics.registry, logger: context.logger.child("dashboard"))
        }
        let chartPath = arguments.value("chartjs") ?? debianChartJS
        let chartJS = FileManager.default.contents(atPath: chartPath).map { Array($0) }
        if chartJS == nil {
            if arguments.value("chartjs") != nil { throw UsageError("--chartjs: cannot read \(chartPath)") }
            context.logger.warning("dashboard.no_charts", ["reason": "\(chartPath) is missing (apt-get install libjs-chart.js): the dashboard shows its numbers without charts"])
        }
        var apns = context.configuration.apns
        if let url = arguments.value("url") { apns.url = url }
        if let caFile = arguments.value("ca-file") { apns.caFile = caFile }
        let service = APIService(
            store: store, writer: ResultsWriter(producer: producer, topics: context.configuration.kafka.topics),
            throttle: AuthThrottle(
                limit: try arguments.int("auth-failures", default: 10, range: 1...1_000_000),
                window: .seconds(try arguments.int("auth-window", default: 60, range: 1...86_400))),
            adminToken: adminToken, credentialFiles: credentialFiles, dashboard: dashboard, chartJS: chartJS, metrics: metrics,
            apns: apns, lanes: context.configuration.worker.lanes, logger: context.logger.child("api"))
        let feeding = Task { await dashboard?.run() }
        let loopbackOnly = !arguments.flag("listen-all")
        let server = try HTTPServer(
            port: try arguments.int("port", default: 8080, range: 0...65_535), loopbackOnly: loopbackOnly, policy: policy, refused: { service.refusedBeforeRouting($0, $1) },
            admit: { await service.admit($0) })
        print("api listening on http://\(loopbackOnly ? "127.0.0.1" : "0.0.0.0"):\(server.port)")
        fflush(nil)
        context.logger.notice("api.started", ["port": String(server.port), "store": store.location])
        let stopped = AsyncStream<Void>.makeStream()
        ShutdownSignal.install { _ in stopped.continuation.yield() }
        for await _ in stopped.stream { break }
        context.logger.notice("api.stopping", [:])
        // The dashboard's streams end and what it counted is saved before the server stops.
        await dashboard?.stop()
        await feeding.value
        // A submission waiting on Kafka finishes first.
        await server.stop(timeout: .seconds(kafkaTimeout + 2))
        await producer.close()
        return 0
    }

    static func connectionPolicy(_ arguments: ParsedArguments) throws -> ConnectionPolicy {
        var policy = ConnectionPolicy()
        policy.maxBodyBytes = try arguments.int("max-body", default: policy.maxBodyBytes, range: 1024...(64 << 20))
        policy.idleTimeout = .seconds(try arguments.int("idle-timeout", default: 30, range: 1...3_600))
        policy.headTimeout = .seconds(try arguments.int("head-timeout", default: 10, range: 1...600))
        policy.bodyTimeout = .seconds(try arguments.int("body-timeout", default: 30, range: 1...3_600))
        policy.maxConnections = try arguments.int("max-connections", default: policy.maxConnections, range: 1...1_000_000)
        policy.maxConnectionsPerAddress = try arguments.int("max-connections-per-address", default: policy.maxConnectionsPerAddress, range: 1...1_000_000)
        if let proxies = arguments.value("trusted-proxy") {
            let addresses = proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            for address in addresses where !ConnectionPolicy.isIPAddress(address) {
                throw UsageError("--trusted-proxy: \(address) is not an IPv4 or IPv6 address")
            }
            policy.trustedProxies = Set(addresses)
        }
        if let header = arguments.value("forwarded-header") {
            guard let parsed = ConnectionPolicy.ForwardedHeader(rawValue: header.lowercased()) else {
                throw UsageError("--forwarded-header must be x-forwarded-for or forwarded, got \(header)")
            }
            policy.forwardedHeader = parsed
        }
        return policy
    }
}

/// The process's open-file limit.
enum DescriptorLimit {
    /// Raises the soft limit towards `wanted` (never past the hard limit, never down); the
    /// limit in force after.
    static func raise(to wanted: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < rlim_t(wanted) {
            limit.rlim_cur = min(limit.rlim_max, rlim_t(wanted))
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(limit.rlim_cur)
    }
}
