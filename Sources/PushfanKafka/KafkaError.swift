import Foundation
internal import CRdkafka

/// The one error type of the Kafka layer. It keeps librdkafka's code and says whether the
/// caller may retry (the condition is transient) and whether the client is unusable (fatal).
package struct KafkaError: Error, CustomStringConvertible, Sendable, Equatable {
    private enum Kind: Equatable, Sendable {
        case librdkafka(Int32)
        case configuration
        case closed
        case cancelled
    }

    private let kind: Kind
    /// What Pushfan was doing: `produce`, `commit`, `subscribe`, ...
    package let operation: String
    /// librdkafka's human-readable text, or Pushfan's for non-librdkafka errors.
    package let message: String
    package let isRetriable: Bool
    package let isFatal: Bool

    /// librdkafka's `rd_kafka_resp_err_t` value, or nil for errors raised by Pushfan itself.
    package var code: Int32? {
        if case .librdkafka(let code) = kind { return code }
        return nil
    }

    /// librdkafka's symbolic name (`_MSG_TIMED_OUT`, `UNKNOWN_TOPIC_OR_PART`) or a Pushfan code;
    /// stable and free of values, so it is safe as a metric label.
    package var name: String {
        switch kind {
        case .librdkafka(let code): String(cString: rd_kafka_err2name(rd_kafka_resp_err_t(rawValue: code)))
        case .configuration: "configuration"
        case .closed: "closed"
        case .cancelled: "cancelled"
        }
    }

    package var description: String { "kafka \(operation): \(message) (\(name))" }

    init(operation: String, code: rd_kafka_resp_err_t, message: String? = nil, retriable: Bool? = nil, fatal: Bool = false) {
        self.kind = .librdkafka(code.rawValue)
        self.operation = operation
        self.message = message ?? String(cString: rd_kafka_err2str(code))
        self.isRetriable = retriable ?? KafkaError.isTransient(code)
        self.isFatal = fatal || code == RD_KAFKA_RESP_ERR__FATAL
    }

    /// Takes ownership of an `rd_kafka_error_t` and destroys it.
    init(operation: String, consuming error: OpaquePointer) {
        self.init(
            operation: operation, code: rd_kafka_error_code(error),
            message: String(cString: rd_kafka_error_string(error)),
            retriable: rd_kafka_error_is_retriable(error) != 0, fatal: rd_kafka_error_is_fatal(error) != 0)
        rd_kafka_error_destroy(error)
    }

    private init(kind: Kind, operation: String, message: String) {
        self.kind = kind
        self.operation = operation
        self.message = message
        self.isRetriable = false
        self.isFatal = false
    }

    package static func configuration(_ message: String) -> KafkaError {
        KafkaError(kind: .configuration, operation: "configure", message: message)
    }

    package static func closed(_ operation: String) -> KafkaError {
        KafkaError(kind: .closed, operation: operation, message: "the client is closed")
    }

    package static func cancelled(_ operation: String) -> KafkaError {
        KafkaError(kind: .cancelled, operation: operation, message: "the task was cancelled before the record was queued")
    }

    /// Conditions that pass by themselves: brokers away, leaders moving, queues full, timeouts.
    static func isTransient(_ code: rd_kafka_resp_err_t) -> Bool {
        switch code {
        case RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__TIMED_OUT,
            RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR__QUEUE_FULL, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            RD_KAFKA_RESP_ERR_NOT_COORDINATOR, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS,
            RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION, RD_KAFKA_RESP_ERR__WAIT_COORD:
            return true
        default:
            return false
        }
    }

    /// The record itself can never be written (larger than `message.max.bytes`, invalid):
    /// unlike a transient error, trying it again cannot help.
    package var isRecordRejected: Bool {
        guard let code else { return false }
        switch rd_kafka_resp_err_t(rawValue: code) {
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE, RD_KAFKA_RESP_ERR_INVALID_MSG,
            RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE, RD_KAFKA_RESP_ERR_INVALID_RECORD:
            return true
        default:
            return false
        }
    }

    /// Translates a librdkafka return code; the one place where codes become errors.
    static func check(_ code: rd_kafka_resp_err_t, _ operation: String) throws(KafkaError) {
        if code != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(operation: operation, code: code) }
    }

    /// Same, for calls that return an `rd_kafka_error_t *` (NULL on success).
    static func check(_ error: OpaquePointer?, _ operation: String) throws(KafkaError) {
        if let error { throw KafkaError(operation: operation, consuming: error) }
    }
}
