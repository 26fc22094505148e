import Foundation
import PushfanAPNs
import PushfanAPNsSim
import PushfanCore
import PushfanCrypto
import PushfanKafka
import PushfanStore

/// `pushfan demo`: the embedded defaults in one process, showing what works end to end:
/// a dev cluster, a campaign produced to the campaigns topic and consumed back by a
/// consumer-group member, then a SQLite device store whose matching devices are expanded
/// and sent, each in its locale, to an APNs simulator over HTTP/2. (The workers that will
/// join these steps through Kafka are the next piece.)
struct DemoCommand: Command {
    static let spec = CommandSpec(
        name: "demo",
        summary: "Run the embedded defaults: a campaign round trip through Kafka, then its audience expanded and sent to an APNs simulator",
        discussion: """
            Starts a 3-broker development cluster inside the process, submits a campaign
            (--campaign FILE, or a built-in example), consumes it back through a consumer group,
            decodes and validates it, and prints what arrived. Then fills a SQLite device store
            with synthetic devices, expands the campaign's segment shard by shard and sends each
            matching device its notification (in its locale) to an APNs simulator started in the
            process, over HTTP/2 with a verified provider token. Exits 0 when all of it worked.
            """,
        options: [
            .option("campaign", "FILE", "campaign JSON to submit (default: a built-in example)"),
            .option("partitions", "P", "partitions per topic (default 6)"),
            .option("devices", "N", "synthetic devices for the store part (default 20000)"),
        ])

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        // The demo's own output tells the story; logs stay quiet unless asked for.
        var context = context
        if arguments.value("log-level") == nil && context.configuration.logLevel == "info" {
            context.logger = Logger(label: "pushfan", threshold: .warning)
        }
        let partitions = try arguments.int("partitions", default: 6, range: 1...1000)
        let topics = context.configuration.kafka.topics
        let campaign: Campaign
        if let path = arguments.value("campaign") {
            guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("cannot read \(path)") }
            campaign = try MessageCodec.decode(Campaign.self, from: data)
        } else {
            campaign = exampleCampaign
        }

        let started = ContinuousClock.now
        step("starting a 3-broker development Kafka cluster")
        let cluster = try KafkaDevCluster(brokers: 3, logger: context.logger.child("kafka-dev"))
        defer { cluster.close() }
        for topic in topics.all { try cluster.createTopic(topic, partitions: partitions, replicationFactor: 3) }
        detail("bootstrap servers \(cluster.bootstrapServers); topics \(topics.all.joined(separator: ", "))")

        let client = KafkaClientConfiguration(bootstrapServers: cluster.bootstrapServers)
        step("submitting campaign \(campaign.id) for app \(campaign.app)")
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: context.logger)
        let sent = ContinuousClock.now
        let report = try await producer.send(ProducerRecord(topic: topics.campaigns, key: campaign.kafkaKey, value: MessageCodec.encode(campaign)))
        await producer.close()
        detail("written to \(topics.campaigns)[\(report.partition)] at offset \(report.offset), idempotent producer")

        step("consuming it back as a member of consumer group pushfan-demo")
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupID: "pushfan-demo")
        consumerConfiguration.sessionTimeout = .seconds(6)
        let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: context.logger.child("consumer"))
        try consumer.subscribe(topics: [topics.campaigns])
        var received: Campaign?
        for await event in consumer.events {
            switch event {
            case .assigned(let partitions):
                detail("assigned \(partitions.count) partitions")
            case .records(let records):
                for record in records where record.keyString == campaign.id {
                    received = try MessageCodec.decode(Campaign.self, from: Data(record.value))
                    try consumer.storeOffset(record)
                }
            case .revoked, .error:
                break
            }
            if received != nil { break }
        }
        try await consumer.commit()
        await consumer.close()
        let elapsed = ContinuousClock.now - sent

        guard let received, received == campaign else {
            printError("the campaign that came back differs from the one sent")
            return 1
        }
        step("round trip complete in \(formatted(elapsed)) (total \(formatted(ContinuousClock.now - started)))")
        detail("campaign \(received.id): app \(received.app), audience \(describe(received.audience)), push type \(received.notification.pushType.rawValue)")
        if let content = received.notification.content {
            let locales = content.locales.keys.sorted()
            detail("texts: default + \(locales.isEmpty ? "no locales" : locales.joined(separator: ", "))")
            for locale in ["de_AT", "fr_CA", "ja_JP"] {
                if let text = content.text(forLocale: locale) { detail("  \(locale) sees: \(text.title ?? "") / \(text.body ?? "")") }
            }
        }
        try await storeDemo(audience: received, devices: try arguments.int("devices", default: 20_000, range: 1...10_000_000), logger: context.logger)
        print("""

            Next: run a cluster of your own with `pushfan kafka-dev`, send the example campaign with
            kcat (docs/messages.md) and watch it with `pushfan consume --topic \(topics.campaigns)`;
            fill a device store with `pushfan apps add` and `pushfan devices import`, then try
            `pushfan segments count` (docs/store.md, docs/segments.md); start `pushfan apns-sim`
            and send to it with `pushfan send` or `pushfan bench apns` (docs/apns-sim.md, docs/apns.md).
            """)
        return 0
    }

    /// The device store part: a SQLite file with synthetic devices, the campaign's segment
    /// counted and expanded the way the pipeline will.
    private static func storeDemo(audience campaign: Campaign, devices count: Int, logger: Logger) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-demo-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        step("filling a SQLite device store with \(count) synthetic devices of app \(campaign.app)")
        let store = try await DeviceStore.open("sqlite:" + directory.appendingPathComponent("devices.db").path, logger: logger)
        _ = try await store.addApp(AppRegistration(app: campaign.app, topic: "com.example.shop", credentials: .token(teamID: "DEMOTEAM01", keyID: "DEMOKEY001", keyFile: "demo.p8"), ratePerSecond: 2000))
        let locales = ["en_US", "en_GB", "de_DE", "de_AT", "fr_FR", "fr_CA", "ja_JP"]
        let tags = ["sale-alerts", "news", "sports", "vip"]
        var batch: [ValidatedDevice] = []
        let started = ContinuousClock.now
        for index in 0..<count {
            var registration = DeviceRegistration(deviceID: "demo-\(index)", token: String(format: "%064x", index + 1))
            registration.locale = locales[index % locales.count]
            registration.tags = tags.enumerated().filter { (index >> $0.offset) % 3 == 0 }.map(\.element)
            registration.appVersion = "2.\(index % 12)"
            batch.append(try Validation.device(registration))
            if batch.count == 5000 || index == count - 1 {
                _ = try await store.importDevices(app: campaign.app, batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        detail("imported in \(formatted(ContinuousClock.now - started))")
        guard case .segment(let text) = campaign.audience else { return }
        let segment = try SegmentParser.parse(text)
        let matching = try await store.count(app: campaign.app, segment: segment)
        detail("segment '\(text)' matches \(matching) of \(count) devices")
        // An APNs simulator in this process stands in for Apple; the demo's signing key is
        // registered with it, so every provider token is really verified.
        let key = ES256PrivateKey.generate()
        var simConfiguration = SimConfiguration()
        simConfiguration.threads = 1
        simConfiguration.auth = .token(ProviderAuthority(keys: [RegisteredKey(teamID: "DEMOTEAM01", keyID: "DEMOKEY001", publicKey: key.publicKey)]))
        let simulator = try APNsSimulator(configuration: simConfiguration)
        defer { simulator.stop() }
        let caFile = directory.appendingPathComponent("simulator-ca.pem").path
        try writeAtomically(simulator.certificateAuthorityPEM ?? "", to: caFile)
        let client = try APNsClient(
            endpoint: APNsEndpoint(url: "https://127.0.0.1:\(simulator.port)", caFile: caFile),
            credentials: APNsCredentials.token(teamID: "DEMOTEAM01", keyID: "DEMOKEY001", key: key), logger: logger)

        let expandStarted = ContinuousClock.now
        var expanded = 0
        var accepted = 0
        var byLocale: [String: Int] = [:]
        let shards = try await store.shards(app: campaign.app, size: 5000)
        for shard in shards {
            var cursor: Int64?
            while true {
                let page = try await store.page(app: campaign.app, segment: segment, shard: shard, cursor: cursor, limit: 1000)
                expanded += page.count
                // Each device gets its locale's texts; the collapse id is the campaign's.
                let notifications = try page.map { target in
                    try APNsNotification(campaign: campaign, token: DeviceToken(target.token), topic: "com.example.shop", locale: target.locale)
                }
                let results = await client.send(batch: notifications)
                for (target, result) in zip(page, results) {
                    guard case .response(.accepted) = result else { continue }
                    accepted += 1
                    byLocale[target.locale ?? "none", default: 0] += 1
                }
                guard page.count == 1000, let last = page.last else { break }
                cursor = last.rowKey
            }
        }
        await client.shutdown()
        let elapsed = ContinuousClock.now - expandStarted
        detail("expanded through \(shards.count) shards in keyset pages and sent to an APNs simulator over HTTP/2: \(expanded) devices, \(accepted) accepted, in \(formatted(elapsed)) (\(Int(Double(accepted) / max(elapsed.seconds, 0.001)))/s)")
        detail("accepted by locale: " + byLocale.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        let stats = simulator.stats()
        detail("the simulator saw \(stats.requests) requests, \(stats.distinctTokensAccepted) distinct tokens, \(stats.duplicateAcceptances) duplicates")
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
