import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics
import Testing

@testable import PushfanAPI

/// The served OpenAPI document and the router agree: every operation the server has is
/// documented, and the document names none it does not have.
@Suite struct OpenAPIDocumentTests {
    @Test func documentsExactlyTheRoutersOperations() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-openapi-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let logger = Logger(label: "test", threshold: .error)
        let store = try await DeviceStore.open("sqlite:\(directory)/store.db", logger: logger, clock: SystemClock())
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: KafkaClientConfiguration(bootstrapServers: "127.0.0.1:9")), logger: logger)
        let service = APIService(store: store, writer: ResultsWriter(producer: producer, topics: TopicNames()), logger: logger)
        let served = Set(service.router.operations.map { "\($0.method.lowercased()) \($0.pattern)" })

        let document = try #require(try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let methods: Set<String> = ["get", "put", "post", "delete", "patch"]
        let documented = Set(paths.flatMap { path, item in item.keys.filter(methods.contains).map { "\($0) \(path)" } })
        #expect(served.subtracting(documented).isEmpty, "served but not documented: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "documented but not served: \(documented.subtracting(served).sorted())")
        await producer.close()
    }
}
