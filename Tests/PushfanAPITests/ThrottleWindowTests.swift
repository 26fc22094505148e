import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics
import Testing

@testable import PushfanAPI

/// The failed-authentication throttle in the whole service, on a clock the test moves: the
/// window it reports in Retry-After is the one it keeps, with no wait for real time.
@Suite struct ThrottleWindowTests {
    @Test("ten failures answer 429 with Retry-After; the right secret works again once that many seconds have passed, not before")
    func retryAfterIsTheWindowLeft() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-throttle-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let logger = Logger(label: "test", threshold: .error)
        let clock = ManualClock()
        let store = try await DeviceStore.open("sqlite:\(directory)/store.db", logger: logger, clock: clock)
        let secrets = try await store.apps.add(AppRegistration(app: "shop", topic: "com.example.shop", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil)))
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: "127.0.0.1:9")), logger: logger)
        defer { Task { await producer.close() } }
        let service = APIService(
            store: store, writer: ResultsWriter(producer: producer, topics: TopicNames()), throttle: AuthThrottle(limit: 10, window: .seconds(60)), logger: logger)
        func get(_ secret: String) async -> HTTPResponse {
            let credentials = Data("shop:\(secret)".utf8).base64EncodedString()
            return await service.handle(HTTPRequest(method: "GET", path: "/v1/apps/shop/devices/d", headers: ["authorization": "Basic \(credentials)"], clientAddress: "10.0.0.1"))
        }

        for attempt in 0..<10 {
            #expect(await get("guess-\(attempt)").status == 401)
            clock.advance(by: .seconds(1))
        }
        let blocked = await get(secrets.master)
        #expect(blocked.status == 429 && String(decoding: blocked.body, as: UTF8.self).contains(#""code":"too_many_failures""#))
        // The first failure was 10 s ago: 50 s of the window are left.
        #expect(blocked.headers["Retry-After"] == "50")
        clock.advance(by: .seconds(49))
        #expect(await get(secrets.master).status == 429, "a second before the window ends")
        clock.advance(by: .seconds(1))
        #expect(await get(secrets.master).status == 404, "the window has passed: the right secret reaches the route (no such device)")
    }
}
