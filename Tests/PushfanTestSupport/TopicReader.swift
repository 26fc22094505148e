import Foundation
import PushfanKafka
import PushfanSupport

/// Reads a topic from its start as a member of a group of its own, as a dashboard or an
/// auditor would, until `done` says so or `timeout` passed.
package enum TopicReader {
    package static func read<State: Sendable>(
        _ topic: String, bootstrapServers: String, timeout: Duration, into initial: State, _ done: @escaping (inout State, KafkaRecord) -> Bool
    ) async throws -> State {
        var configuration = KafkaConsumerConfiguration(
            client: KafkaClientConfiguration(bootstrapServers: bootstrapServers, properties: DevClusterProcess.fastGroupProperties),
            groupID: "test-reader-\(UUID().uuidString.prefix(8))")
        configuration.offsetReset = .earliest
        let consumer = try KafkaConsumer(configuration: configuration, logger: Logger(label: "reader", threshold: .warning))
        try consumer.subscribe(topics: [topic])
        let watchdog = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { await consumer.close() }
        }
        var state = initial
        loop: for await event in consumer.events {
            guard case .records(let records) = event else { continue }
            for record in records where done(&state, record) { break loop }
        }
        watchdog.cancel()
        await consumer.close()
        return state
    }
}
