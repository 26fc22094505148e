internal import CRdkafka
import Foundation
import PushfanSupport
import Synchronization

/// A development Kafka cluster inside this process: librdkafka's mock cluster, which
/// speaks the real Kafka protocol on loopback, so any client (Pushfan, kcat, Python)
/// can use it. Nothing survives the process, and each partition keeps about 5 MB.
package final class KafkaDevCluster: Sendable {
    private let handle: RDKafkaHandle
    private let context: Unmanaged<ClientContext>
    private let cluster: MockClusterPointer
    private let closed = Atomic<Bool>(false)
    package let brokerCount: Int
    /// `host:port,...` for `bootstrap.servers`.
    package let bootstrapServers: String

    private struct MockClusterPointer: @unchecked Sendable { let raw: OpaquePointer }

    package init(brokers: Int, logger: Logger) throws(KafkaError) {
        guard (1...32).contains(brokers) else { throw KafkaError.configuration("--brokers must be between 1 and 32, got \(brokers)") }
        // The mock cluster hangs off a client handle; this producer only owns it.
        // It never connects anywhere, so its "no bootstrap.servers" notice is silenced (log_level 4).
        (handle, context) = try makeRDKafkaClient(type: RD_KAFKA_PRODUCER, properties: [("log_level", "4")], context: ClientContext(logger: logger))
        guard let cluster = rd_kafka_mock_cluster_new(handle.raw, Int32(brokers)) else {
            rd_kafka_destroy(handle.raw)
            context.release()
            throw KafkaError.configuration("could not start a mock cluster with \(brokers) brokers")
        }
        self.cluster = MockClusterPointer(raw: cluster)
        self.brokerCount = brokers
        self.bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    deinit { close() }

    package func close() {
        if closed.exchange(true, ordering: .relaxed) { return }
        rd_kafka_mock_cluster_destroy(cluster.raw)
        rd_kafka_destroy(handle.raw)
        context.release()
    }

    package func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        guard partitions > 0 else { throw KafkaError.configuration("a topic needs at least one partition") }
        let replicas = min(max(1, replicationFactor), brokerCount)
        try KafkaError.check(rd_kafka_mock_topic_create(cluster.raw, name, Int32(partitions), Int32(replicas)), "create topic \(name)")
    }

    /// Applies one fault-injection command (see `DevClusterCommand`).
    package func apply(_ command: DevClusterCommand) throws(KafkaError) {
        switch command {
        case .brokerDown(let broker):
            try KafkaError.check(rd_kafka_mock_broker_set_down(cluster.raw, broker), "broker down")
        case .brokerUp(let broker):
            try KafkaError.check(rd_kafka_mock_broker_set_up(cluster.raw, broker), "broker up")
        case .roundTripDelay(let broker, let milliseconds):
            try KafkaError.check(rd_kafka_mock_broker_set_rtt(cluster.raw, broker, Int32(clamping: milliseconds)), "rtt")
        case .requestErrors(let apiKey, let count, let errorName):
            guard let code = KafkaDevCluster.errorCode(named: errorName) else {
                throw KafkaError.configuration("unknown Kafka error name \(errorName)")
            }
            let errors = [rd_kafka_resp_err_t](repeating: code, count: count)
            errors.withUnsafeBufferPointer { buffer in
                rd_kafka_mock_push_request_errors_array(cluster.raw, apiKey.rawValue, buffer.count, buffer.baseAddress)
            }
        case .clearRequestErrors(let apiKey):
            rd_kafka_mock_clear_request_errors(cluster.raw, apiKey.rawValue)
        case .leader(let topic, let partition, let broker):
            try KafkaError.check(rd_kafka_mock_partition_set_leader(cluster.raw, topic, partition, broker), "leader")
        case .createTopic(let name, let partitions):
            try createTopic(name, partitions: partitions)
        }
    }

    /// librdkafka's error names (`NOT_LEADER_FOR_PARTITION`, `REQUEST_TIMED_OUT`, ...).
    static func errorCode(named name: String) -> rd_kafka_resp_err_t? {
        var descriptions: UnsafePointer<rd_kafka_err_desc>?
        var count = 0
        rd_kafka_get_err_descs(&descriptions, &count)
        guard let descriptions else { return nil }
        let wanted = name.uppercased()
        for index in 0..<count {
            guard let entryName = descriptions[index].name else { continue }
            if String(cString: entryName) == wanted { return descriptions[index].code }
        }
        return nil
    }
}
