import Foundation
import PushfanAPI
import PushfanAPNs
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanWorker

/// `pushfan worker`: the planner and sender roles, until SIGTERM.
struct WorkerCommand: Command {
    static let spec = CommandSpec(
        name: "worker",
        summary: "Run a fan-out worker: plan campaigns into tasks and send tasks to APNs",
        discussion: """
            Joins the consumer groups of the configuration's kafka.group_id: "<group>-planner"
            reads the campaigns topic and writes tasks, "<group>" reads the tasks topic and
            sends, "<group>-events" counts the events topic. Run as many workers as you like, on one machine or many; partitions of the
            tasks topic are the unit of parallelism and of rate sharing (docs/ARCHITECTURE.md).
            Results go to the results topic, bad records to the deadletter topic.
            SIGTERM or SIGINT stops taking work, hands back or finishes what is in flight,
            commits and exits within --shutdown-timeout seconds.
            """,
        options: [
            .flag("no-planner", "do not plan campaigns (sender only)"),
            .flag("no-sender", "do not send tasks (planner only)"),
            .flag("no-events", "do not count engagement events"),
            .option("id", "NAME", "worker id in the ledger and logs (default: host-pid)"),
            .option("group", "GROUP", "consumer group (default: kafka.group_id of the configuration)"),
            .option("database", "URL", "device store: sqlite:PATH or postgres://... (default: $PUSHFAN_DATABASE)"),
            .option("lanes", "N", "rate lanes per app for campaigns this worker plans (default: worker.lanes, 4)"),
            .option("shard-size", "N", "devices per task at most (default: worker.shard_size, 5000)"),
            .option("pages-in-flight", "N", "most pages of one task out at once (default: worker.pages_in_flight, 32)"),
            .option("lease", "SECONDS", "claim lease; a crashed worker's devices move after it (default: worker.lease_s, 30)"),
            .option("shutdown-timeout", "SECONDS", "exit this long after SIGTERM at most (default: worker.shutdown_timeout_s, 10)"),
            .option("credentials-pause", "SECONDS", "pause an app's sends this long after a credentials failure (default: worker.credentials_pause_s, 30)"),
            .option("credentials-give-up", "SECONDS", "after credentials failed this long, unsent devices end failed (default: worker.credentials_give_up_s, 900)"),
            .option("url", "URL", "APNs endpoint override, e.g. a simulator (default: $PUSHFAN_APNS_URL, else Apple's hosts)"),
            .option("ca-file", "FILE", "PEM CA certificates to trust for --url (default: $PUSHFAN_APNS_CA_FILE)"),
            .option("metrics-port", "PORT", "serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0: a free port; printed)"),
            .flag("metrics-listen-all", "serve the metrics on every interface, not only loopback"),
        ] + APNsOptions.poolSpecs + KafkaOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let configuration = context.configuration
        var settings = configuration.worker
        settings.lanes = try arguments.int("lanes", default: settings.lanes, range: 1...256)
        settings.shardSize = try arguments.int("shard-size", default: settings.shardSize, range: 1...1_000_000)
        settings.pagesInFlight = try arguments.int("pages-in-flight", default: settings.pagesInFlight, range: 1...256)
        settings.leaseSeconds = try arguments.int("lease", default: settings.leaseSeconds, range: 1...3_600)
        settings.shutdownTimeoutSeconds = try arguments.int("shutdown-timeout", default: settings.shutdownTimeoutSeconds, range: 1...600)
        settings.credentialsPauseSeconds = try arguments.int("credentials-pause", default: settings.credentialsPauseSeconds, range: 1...3_600)
        settings.credentialsGiveUpSeconds = try arguments.int("credentials-give-up", default: settings.credentialsGiveUpSeconds, range: 1...604_800)
        let planner = !arguments.flag("no-planner")
        let sender = !arguments.flag("no-sender")
        let events = !arguments.flag("no-events")
        guard planner || sender || events else { throw UsageError("--no-planner, --no-sender and --no-events together leave nothing to do") }

        var endpoint: APNsEndpoint?
        if let url = arguments.value("url") ?? configuration.apns.url {
            endpoint = try APNsEndpoint(url: url, caFile: arguments.value("ca-file") ?? configuration.apns.caFile)
        }
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "worker"
        let workerID = arguments.value("id") ?? "\(host)-\(getpid())"
        guard Rules.isIdentifier(workerID) else { throw UsageError("--id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -") }
        var options = Worker.Options(
            workerID: workerID, kafka: try KafkaOptions.client(arguments, context), groupID: arguments.value("group") ?? configuration.kafka.groupID,
            topics: configuration.kafka.topics, settings: settings, apns: try APNsOptions.pool(arguments, context), endpointOverride: endpoint)
        options.planner = planner
        options.sender = sender
        options.events = events

        // The worker's one clock: the process's (rows, records and waits agree on the time).
        let store = try await DeviceStore.open(arguments.value("database") ?? configuration.database, logger: context.logger, clock: context.clock)
        store.exportMetrics(to: options.metrics.registry)
        let worker = try Worker(options: options, store: store, logger: context.logger.child("worker"))
        var metricsServer: HTTPServer?
        if arguments.value("metrics-port") != nil {
            let registry = options.metrics.registry
            let loopbackOnly = !arguments.flag("metrics-listen-all")
            // Answered on the server's own thread: a busy worker's task threads do not delay a scrape.
            let server = try HTTPServer(
                port: try arguments.int("metrics-port", default: 0, range: 0...65_535), loopbackOnly: loopbackOnly,
                immediate: { request in
                    guard request.method == "GET", request.path == "/metrics" else { return APIError.notFound("only GET /metrics is served here").response }
                    return HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4"], body: Array(registry.render().utf8))
                }, handler: { _ in APIError.notFound("only GET /metrics is served here").response })
            print("worker metrics on http://\(loopbackOnly ? "127.0.0.1" : "0.0.0.0"):\(server.port)/metrics")
            fflush(nil)
            metricsServer = server
        }
        let bound = Duration.seconds(settings.shutdownTimeoutSeconds)
        ShutdownSignal.install { _ in
            Task { await worker.stop() }
            // The bound holds even if something hangs: exit when it is over.
            DispatchQueue.global().asyncAfter(deadline: .now() + bound.seconds + 0.5) {
                context.logger.error("worker.shutdown_overran", ["bound_ms": String(bound.milliseconds)])
                exit(3)
            }
        }
        await worker.run()
        await worker.stop()
        await metricsServer?.stop(timeout: .seconds(1))
        return 0
    }
}
