import Foundation
import PushfanKafka
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics

@testable import PushfanAPI

/// The API's service in the test's own process, over a SQLite store in a scratch directory
/// with one app `shop`, on a clock the test moves; requests go straight to its router (no
/// socket). Kafka is an address nothing answers at: routes that produce fail as with Kafka
/// down.
struct InProcessService {
    let directory: ScratchDirectory
    let clock = ManualClock()
    let store: DeviceStore
    let service: APIService
    let secrets: AppSecrets
    private let producer: KafkaProducer

    init(throttle: AuthThrottle = AuthThrottle()) async throws {
        directory = try ScratchDirectory("pushfan-api")
        let logger = Logger(label: "test", threshold: .error)
        store = try await DeviceStore.open("sqlite:\(directory.path)/store.db", logger: logger, clock: clock)
        secrets = try await store.apps.add(AppRegistration(app: "shop", topic: "com.example.shop", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil)))
        producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: "127.0.0.1:9")), logger: logger)
        service = APIService(store: store, writer: ResultsWriter(producer: producer, topics: TopicNames()), throttle: throttle, logger: logger)
    }

    /// A request as app `shop` with `secret`, from `client`.
    func call(_ method: String, _ path: String, secret: String, body: String? = nil, client: String = "10.0.0.1") async -> HTTPResponse {
        var headers = ["authorization": "Basic " + Data("shop:\(secret)".utf8).base64EncodedString()]
        if body != nil { headers["content-type"] = "application/json" }
        return await service.handle(HTTPRequest(method: method, path: path, headers: headers, body: Array((body ?? "").utf8), clientAddress: client))
    }

    func stop() async { await producer.close() }
}
