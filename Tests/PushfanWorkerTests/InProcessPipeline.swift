import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTestSupport

/// What the in-process harnesses stand on: a SQLite store in a temporary directory with one
/// app and its devices `d-0`… (tokens 1…), and an in-process Kafka mock cluster with the
/// given topics and a producer to it. No process is started.
struct InProcessPipeline: Sendable {
    static let app = "shop"
    let directory: URL
    let store: DeviceStore
    let cluster: KafkaDevCluster
    let producer: KafkaProducer

    /// `locale(index)` is each device's locale; `topics` are (name, partitions).
    static func start(
        devices: Int, locale: (Int) -> String = { _ in "en_US" }, rate: Int = 1_000, topics: [(String, Int)], clock: ManualClock, logger: Logger
    ) async throws -> InProcessPipeline {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-inprocess-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        do {
            return try await start(in: directory, devices: devices, locale: locale, rate: rate, topics: topics, clock: clock, logger: logger)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    private static func start(
        in directory: URL, devices: Int, locale: (Int) -> String, rate: Int, topics: [(String, Int)], clock: ManualClock, logger: Logger
    ) async throws -> InProcessPipeline {
        let store = try await DeviceStore.open("sqlite:" + directory.appendingPathComponent("store.db").path, logger: logger, clock: clock)
        _ = try await store.apps.add(AppRegistration(
            app: app, topic: "com.example.shop", credentials: .token(teamID: "TEAM000001", keyID: "KEY0000001", keyFile: "/k.p8"), ratePerSecond: rate))
        let now = clock.wallMillis
        let registrations = try (0..<devices).map { index in
            var registration = DeviceRegistration(deviceID: "d-\(index)", token: token(index))
            registration.locale = locale(index)
            return try Validation.device(registration, now: now)
        }
        if !registrations.isEmpty { _ = try await store.devices.importDevices(app: app, registrations) }
        let cluster = try KafkaDevCluster(brokers: 1, logger: logger)
        for (topic, partitions) in topics { try cluster.createTopic(topic, partitions: partitions) }
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: cluster.bootstrapServers)), logger: logger)
        return InProcessPipeline(directory: directory, store: store, cluster: cluster, producer: producer)
    }

    static func token(_ index: Int) -> String { String(format: "%064x", index + 1) }

    /// The device results on `topic`, read from its start until `count` have come (or 20 s
    /// passed), in their order.
    func deviceResults(topic: String, count: Int) async throws -> [DeviceResult] {
        try await TopicReader.read(topic, bootstrapServers: cluster.bootstrapServers, timeout: .seconds(20), into: [DeviceResult]()) { results, record in
            if case .device(let result)? = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)) { results.append(result) }
            return results.count >= count
        }
    }

    func stop() async {
        await producer.close()
        cluster.close()
        try? FileManager.default.removeItem(at: directory)
    }
}
