import Foundation
import PushfanAPI
import PushfanAPNs
import PushfanAPNsSim
import PushfanCrypto
import PushfanKafka
import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport
import PushfanTopics
import PushfanWorker

/// `pushfan demo`: the embedded defaults in one process, a campaign delivered end to end:
/// a development Kafka cluster, a SQLite device store with synthetic devices, an APNs
/// simulator with a realistic mix of failures, and two workers (each its own consumer-group
/// member, exactly as `pushfan worker` processes are). It submits a campaign, follows it on
/// the results topic with a progress bar, and prints the summary.
struct DemoCommand: Command {
    static let spec = CommandSpec(
        name: "demo",
        summary: "Deliver a campaign on the embedded defaults: dev Kafka cluster, SQLite devices, APNs simulator, two workers",
        discussion: """
            Starts a 3-broker development Kafka cluster inside the process, fills a SQLite
            device store with synthetic devices across locales and tags (--devices, default
            100000), starts an APNs simulator that verifies every provider token and answers
            like APNs, faults included (about 1% of tokens unregistered, 0.3% bad, 0.5% of
            requests 503 ServiceUnavailable, 0-5 ms latency), and two workers. Then submits a
            campaign (--campaign FILE, or a built-in example), shows its progress from the
            results topic and prints the outcome summary. Exits 0 when the campaign completed
            with one outcome per targeted device. The live dashboard of `pushfan api` runs beside
            it on 127.0.0.1 (its address, with a one-time admin token, is printed); --stay keeps
            everything running after the campaign, for the dashboard, until Ctrl-C.
            """,
        options: [
            .option("campaign", "FILE", "campaign JSON to submit (default: a built-in example for app shop-ios)"),
            .option("partitions", "P", "partitions per topic (default 6)"),
            .option("devices", "N", "synthetic devices (default 100000)"),
            .option("workers", "N", "workers (default 2)"),
            .option("rate", "N", "the app's send-rate limit per second (default 50000)"),
            .option("dashboard-port", "N", "port of the live dashboard on 127.0.0.1 (default 0: a free one)"),
            .flag("stay", "after the campaign, keep the dashboard (and everything behind it) running until Ctrl-C"),
        ])

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        // The demo's own output tells the story; logs stay quiet unless asked for (a
        // rebalance's routine commit warnings included).
        var context = context
        if arguments.value("log-level") == nil && context.configuration.logLevel == "info" {
            context.logger = Logger(label: "pushfan", threshold: .error)
        }
        let partitions = try arguments.int("partitions", default: 6, range: 1...1000)
        let deviceCount = try arguments.int("devices", default: 100_000, range: 1...10_000_000)
        let workerCount = try arguments.int("workers", default: 2, range: 1...16)
        let rate = try arguments.int("rate", default: 50_000, range: 1...10_000_000)
        let dashboardPort = try arguments.int("dashboard-port", default: 0, range: 0...65_535)
        let topics = context.configuration.kafka.topics
        var campaign = exampleCampaign
        if let path = arguments.value("campaign") {
            guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("cannot read \(path)") }
            campaign = try MessageCodec.decode(Campaign.self, from: data)
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-demo-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        step("starting a 3-broker development Kafka cluster")
        let cluster = try KafkaDevCluster(brokers: 3, logger: context.logger.child("kafka-dev"))
        defer { cluster.close() }
        for topic in topics.all { try cluster.createTopic(topic, partitions: partitions, replicationFactor: 3) }
        detail("bootstrap servers \(cluster.bootstrapServers); topics \(topics.all.joined(separator: ", ")), \(partitions) partitions each")

        // The app's signing key: the store names its file, the simulator knows its public half.
        let key = ES256PrivateKey.generate()
        let keyFile = directory.appendingPathComponent("AuthKey_DEMOKEY001.p8").path
        try writeAtomically(key.pkcs8PEM, to: keyFile)
        let database = "sqlite:" + directory.appendingPathComponent("devices.db").path
        step("filling a SQLite device store with \(deviceCount) synthetic devices of app \(campaign.app)")
        let store = try await DeviceStore.open(database, logger: context.logger, clock: context.clock)
        _ = try await store.apps.add(AppRegistration(
            app: campaign.app, topic: "com.example.shop", credentials: .token(teamID: "DEMOTEAM01", keyID: "DEMOKEY001", keyFile: keyFile),
            ratePerSecond: rate))
        let imported = ContinuousClock.now
        try await fill(store, app: campaign.app, count: deviceCount)
        detail("imported in \(formatted(ContinuousClock.now - imported)); locales \(locales.joined(separator: ", ")); tags \(tags.joined(separator: ", "))")

        step("starting an APNs simulator (HTTP/2, TLS, ES256 provider tokens verified) with a realistic mix of failures")
        var simConfiguration = SimConfiguration()
        simConfiguration.threads = 1
        // The 20-minute token rule for the key across connections, the strict reading of
        // APNs' rule: the workers share one provider token through the store.
        simConfiguration.auth = .token(ProviderAuthority(
            keys: [RegisteredKey(teamID: "DEMOTEAM01", keyID: "DEMOKEY001", publicKey: key.publicKey)], updateScope: .key))
        simConfiguration.rules = DeviceRules(prefixes: [
            unregisteredPrefix: DeviceRules.Rule(reason: .unregistered), badPrefix: DeviceRules.Rule(reason: .badDeviceToken),
        ])
        simConfiguration.faults.p503 = 0.005
        simConfiguration.faults.latency = .uniform(low: 0, high: 5)
        let simulator = try APNsSimulator(configuration: simConfiguration)
        defer { simulator.stop() }
        let caFile = directory.appendingPathComponent("simulator-ca.pem").path
        try writeAtomically(simulator.certificateAuthorityPEM ?? "", to: caFile)
        detail("listening on https://127.0.0.1:\(simulator.port); ~1% of tokens unregistered (410), 0.3% bad (400), 0.5% of requests 503")

        step("starting \(workerCount) workers (planner and sender roles, consumer groups pushfan-demo-planner and pushfan-demo)")
        let client = KafkaClientConfiguration(bootstrapServers: cluster.bootstrapServers, properties: ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500"])
        var workers: [Worker] = []
        for index in 1...workerCount {
            var options = Worker.Options(
                workerID: "demo-worker-\(index)", kafka: client, groupID: "pushfan-demo", topics: topics, settings: context.configuration.worker,
                apns: APNsClientConfiguration(), endpointOverride: try APNsEndpoint(url: "https://127.0.0.1:\(simulator.port)", caFile: caFile))
            options.settings.shutdownTimeoutSeconds = 5
            // A lively progress bar: a campaign of the demo's size takes seconds.
            options.settings.progressIntervalMs = 300
            let workerStore = try await DeviceStore.open(database, logger: context.logger, clock: context.clock)
            workers.append(try Worker(options: options, store: workerStore, logger: context.logger.child("worker-\(index)")))
        }
        let running = workers.map { worker in Task { await worker.run() } }
        // Joining takes a few seconds (each new member is a rebalance); the campaign's clock
        // starts once every worker has its partitions.
        let joining = ContinuousClock.now
        while !workers.allSatisfy(\.hasJoined), ContinuousClock.now - joining < .seconds(60) {
            try await Task.sleep(for: .milliseconds(100))
        }
        detail("all workers joined in \(formatted(ContinuousClock.now - joining))")

        let dashboard = try await DemoDashboard.start(
            store: store, client: KafkaClientConfiguration(bootstrapServers: cluster.bootstrapServers), topics: topics, port: dashboardPort,
            logger: context.logger)
        detail("live dashboard: \(dashboard.url) (user admin, a one-time token; Chart.js from libjs-chart.js)")

        let matching = try await expectedAudience(campaign, store: store)
        step("submitting campaign \(campaign.id): \(describe(campaign.audience)), \(matching) matching devices")
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: context.logger)
        var submitted = campaign
        submitted.submittedAt = Int64(Date().timeIntervalSince1970 * 1000)
        let report = try await producer.send(ProducerRecord(topic: topics.campaigns, key: campaign.kafkaKey, value: MessageCodec.encode(submitted)))
        await producer.close()
        let sent = ContinuousClock.now
        let watch = CampaignWatch(
            campaign: campaign.key, submission: CampaignEvent.Submission(partition: Int(report.partition), offset: report.offset),
            client: client, topics: topics, logger: context.logger)
        let last = try await watch.wait(timeout: .seconds(600)) { detail($0) }
        let elapsed = ContinuousClock.now - sent

        if arguments.flag("stay") {
            // Installed before the announcement: a signal right after it is not lost.
            let stopped = ShutdownSignal.prepare()
            detail("everything keeps running for the dashboard: \(dashboard.url); Ctrl-C to stop")
            fflush(nil)
            _ = await stopped()
        }
        await dashboard.stop()
        for worker in workers { await worker.stop() }
        for task in running { await task.value }
        guard let last, last.event == .completed else {
            printError("the campaign did not complete: \(last.map { CampaignWatch.summary($0) } ?? "no word from the workers")")
            return 1
        }
        step("campaign completed in \(formatted(elapsed)) (\(Int(Double(last.finished) / max(elapsed.seconds, 0.001)))/s at an app limit of \(rate)/s)")
        print(CampaignWatch.summary(last))
        let reasons = try await store.ledger.outcomeReasons(campaign: campaign.key).filter { $0.state != .delivered }
        if !reasons.isEmpty {
            detail("why not delivered (from the ledger): " + reasons.map { "\($0.state.rawValue) \($0.reason ?? "-") \($0.count)" }.joined(separator: ", "))
        }
        let stats = simulator.stats()
        detail("the simulator accepted \(stats.distinctTokensAccepted) distinct tokens with \(stats.duplicateAcceptances) duplicates out of \(stats.requests) requests")
        let invalidated = try await store.audience.count(app: campaign.app, segment: nil, now: store.clock.wallMillis)
        detail("token hygiene: \(deviceCount - invalidated) devices invalidated (410 and BadDeviceToken), \(invalidated) still active")
        print("""

            Next: run the same on your own: `pushfan kafka-dev`, `pushfan apns-sim`, `pushfan apps add`,
            `pushfan devices import`, one or more `pushfan worker`, then `pushfan submit FILE --wait`
            and `pushfan results tail --campaign ID` (docs/operations.md walks through it;
            docs/messages.md has the campaign and result schemas, docs/ARCHITECTURE.md the design).
            """)
        return last.finished == matching ? 0 : 1
    }

    static let locales = ["en_US", "en_GB", "de_DE", "de_AT", "fr_FR", "fr_CA", "ja_JP"]
    static let tags = ["sale-alerts", "news", "sports", "vip"]
    /// Token prefixes the simulator answers with 410 Unregistered and 400 BadDeviceToken.
    static let unregisteredPrefix = "dead"
    static let badPrefix = "0bad"

    /// Synthetic devices: locales and tags spread evenly, about 1% of tokens unregistered
    /// and 0.3% bad at APNs.
    private static func fill(_ store: DeviceStore, app: String, count: Int) async throws {
        var batch: [ValidatedDevice] = []
        let progress = ProgressLine()
        for index in 0..<count {
            var token = String(format: "%064x", index + 1)
            if index % 100 == 37 { token = unregisteredPrefix + token.dropFirst(unregisteredPrefix.count) }
            if index % 1000 == 511 || index % 1000 == 823 || index % 1000 == 911 { token = badPrefix + token.dropFirst(badPrefix.count) }
            var registration = DeviceRegistration(deviceID: "demo-\(index)", token: token)
            registration.locale = locales[index % locales.count]
            registration.tags = tags.enumerated().filter { (index >> $0.offset) % 3 == 0 }.map(\.element)
            registration.appVersion = "2.\(index % 12)"
            batch.append(try Validation.device(registration, now: store.clock.wallMillis))
            if batch.count == 5000 || index == count - 1 {
                _ = try await store.devices.importDevices(app: app, batch)
                batch.removeAll(keepingCapacity: true)
                progress.show("  \(index + 1)/\(count) devices")
            }
        }
        progress.finish()
    }

    private static func expectedAudience(_ campaign: Campaign, store: DeviceStore) async throws -> Int {
        switch campaign.audience {
        case .segment, .named:
            let segment = try await store.segment(of: campaign, definition: nil)
            return try await store.audience.count(app: campaign.app, segment: segment, now: store.clock.wallMillis)
        case .devices(let ids): return try await store.audience.rowKeys(app: campaign.app, deviceIDs: ids, tokens: campaign.tokenSelection).count
        case .activity, .activities: return try await store.audience.count(app: campaign.app, segment: nil, tokens: campaign.tokenSelection, now: store.clock.wallMillis)
        case .channel: return 1  // one broadcast, one result
        }
    }

    private static func step(_ text: String) { print("==> \(text)") }
    private static func detail(_ text: String) { print("    \(text)") }

    private static func formatted(_ duration: Duration) -> String {
        String(format: "%.0f ms", Double(duration.milliseconds))
    }

    private static func describe(_ audience: Campaign.Audience) -> String {
        switch audience {
        case .segment(let expression): "segment '\(expression)'"
        case .named(let name): "saved segment '\(name)'"
        case .devices(let ids): "\(ids.count) listed devices"
        case .activity(let id): "the devices following activity '\(id)'"
        case .activities(let filter): "the devices following a \(filter.attributesType) activity with \(filter.attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "))"
        case .channel(let id): "broadcast channel '\(id)'"
        }
    }

    /// A campaign a shop app might send: localized texts, rich push, a category with actions.
    static let exampleCampaign = Campaign(
        id: "demo-spring-sale",
        app: "shop-ios",
        audience: .segment("tag:sale-alerts and locale in (en_US, de_DE, fr_FR)"),
        notification: .init(
            pushType: .alert,
            content: .init(
                defaultText: .init(title: "Spring sale", body: "20% off everything until midnight"),
                locales: [
                    "de": .init(title: "Frühlingsaktion", body: "20 % auf alles bis Mitternacht"),
                    "fr": .init(title: "Soldes de printemps", body: "20 % sur tout jusqu'à minuit"),
                ]),
            aps: ["sound": .string("default"), "category": .string("SALE_OFFER"), "mutable-content": .int(1)],
            data: ["deeplink": .string("shop://sale/spring")]),
        options: .init(priority: 10))
}

/// The live dashboard of `pushfan api` inside the demo: the same service, feed and server,
/// on a free loopback port, behind a fresh admin token.
private struct DemoDashboard {
    let url: String
    let server: HTTPServer
    let feed: DashboardFeed
    let feeding: Task<Void, Never>
    let producer: KafkaProducer

    static func start(store: DeviceStore, client: KafkaClientConfiguration, topics: TopicNames, port: Int, logger: Logger) async throws -> DemoDashboard {
        let token = SecretHash.generateSecret()
        let metrics = RequestMetrics()
        let feed = try DashboardFeed(
            kafka: client, groupID: "pushfan-demo-dashboard", store: store, topics: topics, metrics: metrics.registry, logger: logger.child("dashboard"))
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: logger.child("producer"))
        let service = APIService(
            store: store, writer: ResultsWriter(producer: producer, topics: topics), adminToken: token, dashboard: feed,
            chartJS: FileManager.default.contents(atPath: APICommand.debianChartJS).map { Array($0) }, metrics: metrics, logger: logger.child("api"))
        let server = try HTTPServer(port: port, loopbackOnly: true, admit: { await service.admit($0) })
        return DemoDashboard(
            url: "http://admin:\(token)@127.0.0.1:\(server.port)/dashboard", server: server, feed: feed, feeding: Task { await feed.run() },
            producer: producer)
    }

    func stop() async {
        await feed.stop()
        await feeding.value
        await server.stop(timeout: .seconds(2))
        await producer.close()
    }
}
