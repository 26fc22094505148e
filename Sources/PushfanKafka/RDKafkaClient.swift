internal import CRdkafka
import Foundation
import PushfanSupport
import Synchronization

/// An `rd_kafka_t *`. librdkafka handles are thread-safe, so sharing the pointer is sound;
/// the owner (producer, consumer, dev cluster) destroys it exactly once in `close`.
struct RDKafkaHandle: @unchecked Sendable {
    let raw: OpaquePointer
}

/// State the C callbacks need. It is passed to librdkafka as the conf opaque with
/// `passRetained` in `makeRDKafkaClient`; the owning client releases it after
/// `rd_kafka_destroy`, when no callback can run any more.
final class ClientContext: Sendable {
    let logger: Logger
    let consumerEvents: ConsumerEventChannel?
    /// Called on the poll thread when partitions are revoked, before their stored offsets
    /// are committed; see `KafkaConsumer.onRevoke`.
    let revokeHandler = Locked<(@Sendable ([TopicPartition]) -> Void)?>(nil)
    /// Called on the poll thread when partitions are assigned, for the offsets to start
    /// them at; see `KafkaConsumer.onAssign`.
    let assignHandler = Locked<(@Sendable ([TopicPartition]) -> [TopicPartition: Int64])?>(nil)
    /// The group has handed this consumer an assignment (possibly empty) at least once.
    let assignedOnce = Locked(false)
    /// Consumer lag per topic and partition from librdkafka's last statistics (consumers).
    let consumerLag = Locked<[String: [Int32: Int64]]>([:])

    /// The consumer was configured for the cooperative rebalance protocol
    /// (`partition.assignment.strategy` cooperative-sticky).
    let cooperative: Bool

    init(logger: Logger, consumerEvents: ConsumerEventChannel? = nil, cooperative: Bool = false) {
        self.logger = logger
        self.consumerEvents = consumerEvents
        self.cooperative = cooperative
    }

    static func from(_ opaque: UnsafeMutableRawPointer?) -> ClientContext? {
        opaque.map { Unmanaged<ClientContext>.fromOpaque($0).takeUnretainedValue() }
    }
}

/// Creates a librdkafka client whose logs and errors go through Pushfan's logger.
/// `configure` adds type-specific callbacks to the conf before the client is created.
/// Returns the handle and the retained context pointer the caller must release.
func makeRDKafkaClient(
    type: rd_kafka_type_t, properties: [(String, String)], context: ClientContext,
    configure: (OpaquePointer) -> Void = { _ in }
) throws(KafkaError) -> (RDKafkaHandle, Unmanaged<ClientContext>) {
    let conf = try makeRDKafkaConf(properties + [("log.queue", "false")])
    // Retained for the client's lifetime; released by the owner after rd_kafka_destroy.
    let retained = Unmanaged.passRetained(context)
    rd_kafka_conf_set_opaque(conf, retained.toOpaque())
    rd_kafka_conf_set_log_cb(conf) { client, level, facility, text in
        guard let client, let context = ClientContext.from(rd_kafka_opaque(client)) else { return }
        let severity: LogLevel =
            switch level {
            case ...3: .error
            case 4: .warning
            case 5: .notice
            case 6: .info
            default: .debug
            }
        context.logger.log(
            severity, "kafka.librdkafka",
            ["kafka.facility": facility.map { String(cString: $0) } ?? "", "kafka.message": text.map { String(cString: $0) } ?? ""])
    }
    rd_kafka_conf_set_error_cb(conf) { client, code, reason, opaque in
        guard let context = ClientContext.from(opaque) else { return }
        var message = reason.map { String(cString: $0) } ?? ""
        let error = rd_kafka_resp_err_t(rawValue: code)
        if error == RD_KAFKA_RESP_ERR__FATAL, let client {
            var text = [CChar](repeating: 0, count: 512)
            let underlying = rd_kafka_fatal_error(client, &text, text.count)
            message = "fatal \(String(cString: rd_kafka_err2name(underlying))): " + String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            context.consumerEvents?.publishError(KafkaError(operation: "client", code: underlying, message: message, fatal: true))
        }
        context.logger.warning("kafka.error", ["kafka.code": String(cString: rd_kafka_err2name(error)), "kafka.message": message])
    }
    rd_kafka_conf_set_stats_cb(conf) { _, json, length, opaque in
        guard let json, let context = ClientContext.from(opaque) else { return 0 }
        let lag = KafkaStatistics.consumerLag(Data(bytes: json, count: length))
        context.consumerLag.withLock { $0 = lag }
        // 0: librdkafka frees the JSON.
        return 0
    }
    configure(conf)
    var errorText = [CChar](repeating: 0, count: 512)
    guard let client = rd_kafka_new(type, conf, &errorText, errorText.count) else {
        // On failure the conf is still ours.
        rd_kafka_conf_destroy(conf)
        retained.release()
        let text = String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        throw KafkaError.configuration(text)
    }
    return (RDKafkaHandle(raw: client), retained)
}

/// A thread that runs `body` until asked to stop; `stop()` waits for it to finish.
final class ServiceThread: Sendable {
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// `body` should return soon after `isStopping` turns true.
    init(name: String, body: @escaping @Sendable (_ isStopping: @Sendable () -> Bool) -> Void) {
        let thread = Thread { [self] in
            body { self.stopping.load(ordering: .relaxed) }
            finished.signal()
        }
        thread.name = name
        thread.start()
    }

    func stop() {
        if stopping.exchange(true, ordering: .relaxed) { return }
        finished.wait()
    }
}
