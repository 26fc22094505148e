internal import CRdkafka
import Foundation
import PushfanSupport

/// Settings common to producers and consumers. Typed fields cover what Pushfan relies on;
/// `properties` passes any librdkafka property through unchanged and wins over the typed
/// fields, so SASL, SSL and cloud Kafka need configuration only.
package struct KafkaClientConfiguration: Sendable {
    package var bootstrapServers: String
    package var clientID: String = "pushfan"
    /// `socket.timeout.ms`: how long a request may wait for a broker.
    package var socketTimeout: Duration = .seconds(10)
    package var properties: [String: String] = [:]

    package init(bootstrapServers: String, properties: [String: String] = [:]) {
        self.bootstrapServers = bootstrapServers
        self.properties = properties
    }

    var baseProperties: [(String, String)] {
        [
            ("bootstrap.servers", bootstrapServers),
            ("client.id", clientID),
            ("socket.timeout.ms", String(socketTimeout.milliseconds)),
        ]
    }
}

package struct KafkaProducerConfiguration: Sendable {
    package var client: KafkaClientConfiguration
    /// Idempotence keeps retries from reordering or (with a real broker) duplicating records.
    package var idempotent = true
    /// How long a record may wait for delivery, retries included, before its send fails.
    /// Large by default so that broker outages delay rather than fail sends.
    package var messageTimeout: Duration = .seconds(300)
    /// `linger.ms`: batching delay; small values favour latency, larger ones throughput.
    package var linger: Duration = .milliseconds(5)
    /// Local queue size in records; when it is full `send` waits (back-pressure).
    package var queueCapacity = 100_000

    package init(client: KafkaClientConfiguration) { self.client = client }

    var rdkafkaProperties: [(String, String)] {
        client.baseProperties + [
            ("enable.idempotence", idempotent ? "true" : "false"),
            ("message.timeout.ms", String(messageTimeout.milliseconds)),
            ("linger.ms", String(linger.milliseconds)),
            ("queue.buffering.max.messages", String(queueCapacity)),
        ] + client.properties.filter { !Self.consumerOnlyProperties.contains($0.key) }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Consumer-group properties, which commands pass to all their clients; a producer would
    /// only warn about each of them.
    static let consumerOnlyProperties: Set<String> = [
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "auto.offset.reset", "enable.auto.commit",
        "auto.commit.interval.ms", "enable.auto.offset.store", "partition.assignment.strategy", "group.instance.id", "fetch.min.bytes",
        "fetch.wait.max.ms", "isolation.level",
    ]
}

package struct KafkaConsumerConfiguration: Sendable {
    package enum OffsetReset: String, Sendable { case earliest, latest }

    package var client: KafkaClientConfiguration
    package var groupID: String
    /// Where a group without a committed offset starts.
    package var offsetReset: OffsetReset = .earliest
    /// How soon a dead member's partitions move to the others. Kafka's default (45 s) makes
    /// tests and small deployments look hung; 10 s is a common production choice.
    package var sessionTimeout: Duration = .seconds(10)
    package var heartbeatInterval: Duration = .seconds(1)
    /// Longest gap between polls before the member is evicted. Pushfan polls on its own
    /// thread and pauses partitions for long work, so this only bounds a stuck process.
    package var maxPollInterval: Duration = .seconds(300)
    /// How often stored offsets are committed in the background.
    package var autoCommitInterval: Duration = .seconds(1)
    /// Records buffered between the poll thread and the caller before polling waits.
    package var bufferCapacity = 20_000
    /// Records handed to the caller at most per poll: one batch of its work.
    package var pollBatch = 1_000
    /// How long a broker may hold a fetch that finds nothing new. A real broker answers a
    /// held fetch as soon as a record arrives, so there this only sets how often an idle
    /// consumer asks (ten times a second per broker); librdkafka's mock cluster answers when
    /// the wait runs out, so there it is the latency of every hop. librdkafka's default,
    /// 500 ms, made a campaign's first request wait about a second on the dev cluster.
    package var fetchWaitMax: Duration = .milliseconds(100)

    package init(client: KafkaClientConfiguration, groupID: String) {
        self.client = client
        self.groupID = groupID
    }

    var rdkafkaProperties: [(String, String)] {
        client.baseProperties + [
            ("group.id", groupID),
            ("auto.offset.reset", offsetReset.rawValue),
            ("session.timeout.ms", String(sessionTimeout.milliseconds)),
            ("heartbeat.interval.ms", String(heartbeatInterval.milliseconds)),
            ("max.poll.interval.ms", String(maxPollInterval.milliseconds)),
            // Offsets are stored by the caller only once a record's work is durable;
            // librdkafka then commits what was stored.
            ("enable.auto.offset.store", "false"),
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", String(autoCommitInterval.milliseconds)),
            ("enable.partition.eof", "false"),
            ("fetch.wait.max.ms", String(fetchWaitMax.milliseconds)),
            // Lag per partition for the metrics (`KafkaConsumer.lag`).
            ("statistics.interval.ms", "5000"),
        ] + client.properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

/// Builds an `rd_kafka_conf_t`, reporting the first rejected property by name.
func makeRDKafkaConf(_ properties: [(String, String)]) throws(KafkaError) -> OpaquePointer {
    guard let conf = rd_kafka_conf_new() else { throw KafkaError.configuration("rd_kafka_conf_new failed") }
    var errorText = [CChar](repeating: 0, count: 512)
    for (key, value) in properties {
        let result = rd_kafka_conf_set(conf, key, value, &errorText, errorText.count)
        if result != RD_KAFKA_CONF_OK {
            rd_kafka_conf_destroy(conf)
            let text = String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw KafkaError.configuration("property \(key)=\(value): \(text)")
        }
    }
    return conf
}
