import Foundation
import PushfanAPI
import PushfanCore
import PushfanKafka
import PushfanStore
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
            .option("idle-timeout", "SECONDS", "close a connection idle (or a client silent) this long (default 30)"),
            .option("kafka-timeout", "SECONDS", "how long a campaign submission waits for Kafka before answering 503 (default 10)"),
            .option("auth-window", "SECONDS", "--auth-failures failed authentications from one address within this long block it for the rest of it (default 60)"),
            .option("auth-failures", "N", "failed authentications from one address that block it (default 10)"),
            .option("admin-token-file", "FILE", "a file holding the admin token for /v1/admin and /dashboard (default: $PUSHFAN_ADMIN_TOKEN; none: app management over HTTP is off)"),
            .option("dashboard-group", "NAME", "consumer group in which the dashboard reads the results topic (default pushfan-dashboard)"),
            .flag("dashboard-rebuild", "forget the dashboard's saved tallies and count the results topic again from its start"),
            .flag("no-dashboard", "do not read the results topic: /dashboard answers 503"),
            .option("chartjs", "FILE", "Chart.js to serve to the dashboard (default \(APICommand.debianChartJS), from libjs-chart.js)"),
        ] + StoreOptions.specs + KafkaOptions.specs)

    static let debianChartJS = "/usr/share/javascript/chart.js/chart.min.js"

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        var limits = HTTPServer.Limits()
        limits.maxBodyBytes = try arguments.int("max-body", default: limits.maxBodyBytes, range: 1024...(64 << 20))
        limits.idleTimeoutSeconds = try arguments.int("idle-timeout", default: limits.idleTimeoutSeconds, range: 1...3_600)
        var adminToken = ProcessInfo.processInfo.environment["PUSHFAN_ADMIN_TOKEN"]
        if let file = arguments.value("admin-token-file") {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw UsageError("--admin-token-file: cannot read \(file)") }
            adminToken = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let token = adminToken, token.utf8.count < 16 { throw UsageError("the admin token must be at least 16 characters") }
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
        let service = APIService(
            store: store, writer: ResultsWriter(producer: producer, topics: context.configuration.kafka.topics),
            throttle: AuthThrottle(
                limit: try arguments.int("auth-failures", default: 10, range: 1...1_000_000),
                window: .seconds(try arguments.int("auth-window", default: 60, range: 1...86_400))),
            adminToken: adminToken, dashboard: dashboard, chartJS: chartJS, metrics: metrics, logger: context.logger.child("api"))
        let feeding = Task { await dashboard?.run() }
        let loopbackOnly = !arguments.flag("listen-all")
        let server = try HTTPServer(
            port: try arguments.int("port", default: 8080, range: 0...65_535), loopbackOnly: loopbackOnly, limits: limits, refused: { service.refusedBeforeRouting($0, $1) }) { await service.handle($0) }
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
        // A submission waiting on Kafka finishes first: libmicrohttpd must not stop while a
        // connection is suspended.
        await server.stop(timeout: .seconds(kafkaTimeout + 2))
        await producer.close()
        return 0
    }
}
