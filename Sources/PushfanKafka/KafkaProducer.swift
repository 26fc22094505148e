import Foundation
import PushfanCore
import Synchronization
internal import CRdkafka

/// A record to produce. A nil partition lets librdkafka's partitioner pick one by key.
package struct ProducerRecord: Sendable {
    package var topic: String
    package var key: [UInt8]?
    package var value: [UInt8]
    package var partition: Int32?

    package init(topic: String, key: [UInt8]?, value: [UInt8], partition: Int32? = nil) {
        self.topic = topic
        self.key = key
        self.value = value
        self.partition = partition
    }

    package init(topic: String, key: String?, value: some DataProtocol, partition: Int32? = nil) {
        self.init(topic: topic, key: key.map { Array($0.utf8) }, value: Array(value), partition: partition)
    }
}

/// Where a record was written.
package struct DeliveryReport: Sendable, Equatable {
    package let partition: Int32
    package let offset: Int64
}

/// The outcome of a batch: how many records the brokers acknowledged and which failed.
package struct BatchDelivery: Sendable {
    package struct Failure: Sendable {
        /// Position of the record in the enqueued batch.
        package let index: Int
        package let error: KafkaError
    }

    package let count: Int
    package fileprivate(set) var delivered = 0
    package fileprivate(set) var failures: [Failure] = []
    /// Where the first record of the batch landed (the answer for single sends).
    package fileprivate(set) var firstReport: DeliveryReport?

    package var allDelivered: Bool { delivered == count }
}

/// A handle on an enqueued batch; await `delivery()` exactly once to learn its fate.
package struct DeliveryTicket: Sendable {
    fileprivate let id: UInt64
    fileprivate let tracker: DeliveryTracker

    package func delivery() async -> BatchDelivery { await tracker.wait(id) }
}

/// Matches librdkafka's delivery reports to waiting batches without an allocation per
/// record: a record's `msg_opaque` is not a pointer but `batch id << 24 | index`.
final class DeliveryTracker: Sendable {
    static let maxBatch = 1 << 24

    private struct Pending {
        var result: BatchDelivery
        var remaining: Int
        var waiter: CheckedContinuation<BatchDelivery, Never>?
    }

    private let pending = Mutex<[UInt64: Pending]>([:])
    private let nextID = Atomic<UInt64>(1)

    func begin(count: Int) -> UInt64 {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        pending.withLock { $0[id] = Pending(result: BatchDelivery(count: count), remaining: count) }
        return id
    }

    static func opaque(batch: UInt64, index: Int) -> UnsafeMutableRawPointer? {
        UnsafeMutableRawPointer(bitPattern: UInt(batch << 24) | UInt(index))
    }

    func complete(opaque: UnsafeMutableRawPointer?, _ outcome: Result<DeliveryReport, KafkaError>) {
        let bits = UInt64(UInt(bitPattern: opaque))
        complete(batch: bits >> 24, index: Int(bits & 0xFF_FFFF), outcome)
    }

    func complete(batch: UInt64, index: Int, _ outcome: Result<DeliveryReport, KafkaError>) {
        let resume: (CheckedContinuation<BatchDelivery, Never>, BatchDelivery)? = pending.withLock { table in
            guard var entry = table[batch] else { return nil }
            switch outcome {
            case .success(let report):
                entry.result.delivered += 1
                if index == 0 { entry.result.firstReport = report }
            case .failure(let error):
                entry.result.failures.append(.init(index: index, error: error))
            }
            entry.remaining -= 1
            if entry.remaining == 0, let waiter = entry.waiter {
                table[batch] = nil
                return (waiter, entry.result)
            }
            table[batch] = entry
            return nil
        }
        if let (waiter, result) = resume { waiter.resume(returning: result) }
    }

    func wait(_ batch: UInt64) async -> BatchDelivery {
        await withCheckedContinuation { continuation in
            let ready: BatchDelivery? = pending.withLock { table in
                guard var entry = table[batch] else { return BatchDelivery(count: 0) }
                if entry.remaining == 0 {
                    table[batch] = nil
                    return entry.result
                }
                entry.waiter = continuation
                table[batch] = entry
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    var outstandingBatches: Int { pending.withLock { $0.count } }
}

/// Produces records to Kafka: idempotent by default, asynchronous, and never dropping a
/// record. When librdkafka's local queue is full, sending waits until there is room.
package final class KafkaProducer: Sendable {
    private let handle: RDKafkaHandle
    private let context: Unmanaged<ClientContext>
    private let deliveries: DeliveryTracker
    private let poller: ServiceThread
    private let logger: Logger
    /// Topic handles by name; destroyed in `close` before the client.
    private let topics = Mutex<[String: TopicHandle]>([:])
    private let closed = Atomic<Bool>(false)
    private let queueFullWaits = Atomic<Int>(0)

    /// How many times a send found librdkafka's queue full and waited for room.
    package var backPressureWaits: Int { queueFullWaits.load(ordering: .relaxed) }

    private struct TopicHandle: @unchecked Sendable { let raw: OpaquePointer }

    package init(configuration: KafkaProducerConfiguration, logger: Logger) throws(KafkaError) {
        let deliveries = DeliveryTracker()
        let context = ClientContext(logger: logger, deliveries: deliveries)
        (handle, self.context) = try makeRDKafkaClient(
            type: RD_KAFKA_PRODUCER, properties: configuration.rdkafkaProperties, context: context
        ) { conf in
            rd_kafka_conf_set_dr_msg_cb(conf) { _, message, opaque in
                guard let message, let context = ClientContext.from(opaque), let deliveries = context.deliveries else { return }
                let record = message.pointee
                // The status tells persisted from possibly-persisted; only the first counts as delivered.
                let status = rd_kafka_message_status(message)
                if record.err == RD_KAFKA_RESP_ERR_NO_ERROR && status == RD_KAFKA_MSG_STATUS_PERSISTED {
                    deliveries.complete(opaque: record._private, .success(DeliveryReport(partition: record.partition, offset: record.offset)))
                } else {
                    let persisted = status == RD_KAFKA_MSG_STATUS_POSSIBLY_PERSISTED ? " (the broker may have written it)" : ""
                    let code = record.err == RD_KAFKA_RESP_ERR_NO_ERROR ? RD_KAFKA_RESP_ERR__FAIL : record.err
                    let error = KafkaError(operation: "produce", code: code, message: String(cString: rd_kafka_err2str(code)) + persisted)
                    deliveries.complete(opaque: record._private, .failure(error))
                }
            }
        }
        self.deliveries = deliveries
        self.logger = logger
        let handle = self.handle
        // Serves delivery reports; they are the only callbacks a producer needs polled.
        poller = ServiceThread(name: "pushfan.kafka.producer") { isStopping in
            while !isStopping() { rd_kafka_poll(handle.raw, 100) }
        }
    }

    deinit {
        if !closed.load(ordering: .relaxed) {
            logger.warning("kafka.producer_not_closed")
            shutDown()
        }
    }

    /// Sends one record and returns where it was written, or why it could not be.
    package func send(_ record: ProducerRecord) async throws(KafkaError) -> DeliveryReport {
        let result = try await enqueue([record]).delivery()
        if let failure = result.failures.first { throw failure.error }
        guard let report = result.firstReport else { throw KafkaError(operation: "produce", code: RD_KAFKA_RESP_ERR__FAIL) }
        return report
    }

    /// The high-rate path: queues a batch (waiting whenever the local queue is full) and
    /// returns a ticket for its delivery, so the next batch can be queued while this one
    /// is in flight. Records keep their order within a partition.
    package func enqueue(_ records: [ProducerRecord]) async throws(KafkaError) -> DeliveryTicket {
        guard !closed.load(ordering: .relaxed) else { throw KafkaError.closed("produce") }
        precondition(records.count < DeliveryTracker.maxBatch, "batches are limited to 16M records")
        let batch = deliveries.begin(count: records.count)
        var cachedName = ""
        var cachedTopic: OpaquePointer?
        var index = 0
        while index < records.count {
            let record = records[index]
            if record.topic != cachedName || cachedTopic == nil {
                cachedTopic = topicHandle(record.topic)
                cachedName = record.topic
            }
            let code = produce(record, topic: cachedTopic, opaque: DeliveryTracker.opaque(batch: batch, index: index))
            if code == RD_KAFKA_RESP_ERR_NO_ERROR {
                index += 1
            } else if code == RD_KAFKA_RESP_ERR__QUEUE_FULL {
                // Back-pressure: the poll thread drains deliveries meanwhile.
                queueFullWaits.wrappingAdd(1, ordering: .relaxed)
                do {
                    try await Task.sleep(for: .milliseconds(1))
                } catch {
                    for rest in index..<records.count {
                        deliveries.complete(batch: batch, index: rest, .failure(.cancelled("produce")))
                    }
                    break
                }
            } else {
                deliveries.complete(batch: batch, index: index, .failure(KafkaError(operation: "produce", code: code)))
                index += 1
            }
        }
        return DeliveryTicket(id: batch, tracker: deliveries)
    }

    private func produce(_ record: ProducerRecord, topic: OpaquePointer?, opaque: UnsafeMutableRawPointer?) -> rd_kafka_resp_err_t {
        guard let topic else { return RD_KAFKA_RESP_ERR__INVALID_ARG }
        let partition = record.partition ?? pushfan_rdk_partition_unassigned()
        let rc = record.value.withUnsafeBytes { value in
            withOptionalBytes(record.key) { key in
                rd_kafka_produce(
                    topic, partition, pushfan_rdk_msg_f_copy(), UnsafeMutableRawPointer(mutating: value.baseAddress), value.count,
                    key?.baseAddress, key?.count ?? 0, opaque)
            }
        }
        return rc == 0 ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_last_error()
    }

    private func topicHandle(_ name: String) -> OpaquePointer? {
        topics.withLock { table in
            if let existing = table[name] { return existing.raw }
            guard let created = rd_kafka_topic_new(handle.raw, name, nil) else { return nil }
            table[name] = TopicHandle(raw: created)
            return created
        }
    }

    /// Waits until every queued record is delivered or failed, up to `timeout`.
    /// Returns the number of records still queued (0 when everything went out).
    @discardableResult
    package func flush(timeout: Duration = .seconds(30)) async -> Int {
        let handle = self.handle
        return await BlockingWork.run {
            _ = rd_kafka_flush(handle.raw, Int32(clamping: timeout.milliseconds))
            return Int(rd_kafka_outq_len(handle.raw))
        }
    }

    /// Flushes, then releases the client. Records still queued after `timeout` are reported
    /// to their waiters as failed, never silently dropped.
    package func close(timeout: Duration = .seconds(30)) async {
        let left = await flush(timeout: timeout)
        if left > 0 { logger.warning("kafka.producer_close_undelivered", ["kafka.records": String(left)]) }
        shutDown()
    }

    private func shutDown() {
        if closed.exchange(true, ordering: .relaxed) { return }
        // Fail what is still queued so every waiter hears back, then serve those reports.
        _ = rd_kafka_purge(handle.raw, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT)
        rd_kafka_poll(handle.raw, 0)
        poller.stop()
        topics.withLock { table in
            for topic in table.values { rd_kafka_topic_destroy(topic.raw) }
            table.removeAll()
        }
        rd_kafka_destroy(handle.raw)
        context.release()
    }
}

func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    return bytes.withUnsafeBytes { body($0) }
}
