internal import CRdkafka
import Foundation
import PushfanMessages
import PushfanSupport

/// Kafka's admin API, through librdkafka: creating the topics of a `TopicPlan`.
package enum KafkaAdmin {
    /// What happened to one topic.
    package enum Creation: Sendable, Equatable {
        case created
        case alreadyExists
        case failed(String)
    }

    /// Creates `topics` with their partitions, replication and settings, in one request;
    /// waits up to `timeout` for the controller's answer. A topic that exists is left as it
    /// is. Throws when the request itself fails (no broker, no answer).
    package static func createTopics(
        _ topics: [TopicPlan.Topic], client: KafkaClientConfiguration, logger: Logger, timeout: Duration = .seconds(30)
    ) async throws(KafkaError) -> [(String, Creation)] {
        let properties = client.baseProperties + client.properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let (handle, context) = try makeRDKafkaClient(type: RD_KAFKA_PRODUCER, properties: properties, context: ClientContext(logger: logger))
        defer {
            rd_kafka_destroy(handle.raw)
            context.release()
        }
        return try await BlockingWork.run { () throws(KafkaError) -> [(String, Creation)] in
            try create(topics, on: handle, timeout: timeout)
        }
    }

    private static func create(_ topics: [TopicPlan.Topic], on handle: RDKafkaHandle, timeout: Duration) throws(KafkaError) -> [(String, Creation)] {
        var requests: [OpaquePointer?] = []
        defer { for request in requests { rd_kafka_NewTopic_destroy(request) } }
        var errorText = [CChar](repeating: 0, count: 512)
        for topic in topics {
            guard let request = rd_kafka_NewTopic_new(topic.name, Int32(topic.partitions), Int32(topic.replication), &errorText, errorText.count) else {
                throw KafkaError.configuration("topic \(topic.name): " + String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            requests.append(request)
            for (key, value) in topic.config {
                let code = rd_kafka_NewTopic_set_config(request, key, value)
                guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    throw KafkaError.configuration("topic \(topic.name) setting \(key)=\(value): \(String(cString: rd_kafka_err2str(code)))")
                }
            }
        }
        let options = rd_kafka_AdminOptions_new(handle.raw, RD_KAFKA_ADMIN_OP_CREATETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        _ = rd_kafka_AdminOptions_set_request_timeout(options, Int32(clamping: timeout.milliseconds), &errorText, errorText.count)
        _ = rd_kafka_AdminOptions_set_operation_timeout(options, Int32(clamping: timeout.milliseconds), &errorText, errorText.count)
        let queue = rd_kafka_queue_new(handle.raw)
        defer { rd_kafka_queue_destroy(queue) }
        requests.withUnsafeMutableBufferPointer { rd_kafka_CreateTopics(handle.raw, $0.baseAddress, $0.count, options, queue) }
        // The answer, or the request's own failure, arrives as one event.
        guard let event = rd_kafka_queue_poll(queue, Int32(clamping: timeout.milliseconds + 5_000)) else {
            throw KafkaError(operation: "create topics", code: RD_KAFKA_RESP_ERR__TIMED_OUT, message: "no answer from the cluster within \(timeout)")
        }
        defer { rd_kafka_event_destroy(event) }
        let failure = rd_kafka_event_error(event)
        if failure != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(operation: "create topics", code: failure, message: String(cString: rd_kafka_event_error_string(event)))
        }
        guard let result = rd_kafka_event_CreateTopics_result(event) else {
            throw KafkaError(operation: "create topics", code: RD_KAFKA_RESP_ERR__FAIL, message: "the cluster's answer was not a CreateTopics result")
        }
        var count = 0
        guard let answers = rd_kafka_CreateTopics_result_topics(result, &count) else { return [] }
        return (0..<count).map { index in
            let answer = answers[index]
            let name = String(cString: rd_kafka_topic_result_name(answer))
            switch rd_kafka_topic_result_error(answer) {
            case RD_KAFKA_RESP_ERR_NO_ERROR: return (name, .created)
            case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS: return (name, .alreadyExists)
            case let code:
                let text = rd_kafka_topic_result_error_string(answer).map { String(cString: $0) } ?? String(cString: rd_kafka_err2str(code))
                return (name, .failed("\(String(cString: rd_kafka_err2name(code))): \(text)"))
            }
        }
    }
}
