internal import CRdkafka
import Foundation
import PushfanSupport
import Synchronization

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

/// Many records for one topic in one contiguous buffer: the allocation-free way to queue
/// records at high rates (a `[ProducerRecord]` costs two arrays per record).
package struct ProducerBatch: Sendable {
    fileprivate struct Entry: Sendable {
        var keyStart: Int
        /// -1 for a record without a key.
        var keyLength: Int
        var valueStart: Int
        var valueLength: Int
    }

    package let topic: String
    package let partition: Int32?
    fileprivate private(set) var storage: [UInt8] = []
    fileprivate private(set) var entries: [Entry] = []

    package init(topic: String, partition: Int32? = nil, capacity: Int = 0, bytesPerRecord: Int = 0) {
        self.topic = topic
        self.partition = partition
        entries.reserveCapacity(capacity)
        storage.reserveCapacity(capacity * bytesPerRecord)
    }

    package var count: Int { entries.count }
    package var isEmpty: Bool { entries.isEmpty }

    /// Concrete byte types rather than generic collections: this runs once per record and
    /// is called from other modules, where a generic would not be specialised.
    package mutating func append(key: UnsafeRawBufferPointer?, value: UnsafeRawBufferPointer) {
        var entry = Entry(keyStart: storage.count, keyLength: -1, valueStart: 0, valueLength: value.count)
        if let key {
            storage.append(contentsOf: key)
            entry.keyLength = key.count
        }
        entry.valueStart = storage.count
        storage.append(contentsOf: value)
        entries.append(entry)
    }

    package mutating func append(key: [UInt8]?, value: [UInt8]) {
        value.withUnsafeBytes { value in
            if let key {
                key.withUnsafeBytes { append(key: $0, value: value) }
            } else {
                append(key: nil, value: value)
            }
        }
    }

    package mutating func removeAll() {
        storage.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
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

/// A handle on an enqueued batch; await `delivery()` to learn its fate.
package struct DeliveryTicket: Sendable {
    fileprivate let pending: PendingBatch

    package func delivery() async -> BatchDelivery { await pending.wait() }
}

/// The delivery state of one enqueued batch.
///
/// Delivery reports find it without a table lookup or an allocation per record: a record's
/// `msg_opaque` carries the batch object's address in its low 48 bits (user-space
/// addresses fit in 48 bits on x86-64 and arm64 Linux) and the record's index in the high
/// 16, hence at most 65,535 records per batch. The object holds one retain while any of its
/// records is in flight (taken in `retainWhileInFlight`, released by the last report).
final class PendingBatch: Sendable {
    static let maxCount = 0xFFFF

    private struct State {
        var result: BatchDelivery
        var remaining: Int
        var waiter: CheckedContinuation<BatchDelivery, Never>?
    }

    private let state: Locked<State>

    init(count: Int) {
        state = Locked(State(result: BatchDelivery(count: count), remaining: count))
        if count > 0 { _ = Unmanaged.passRetained(self) }
    }

    func opaque(index: Int) -> UnsafeMutableRawPointer? {
        let address = UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque())
        return UnsafeMutableRawPointer(bitPattern: address | UInt(index) << 48)
    }

    /// Records a report delivered with an opaque made by `opaque(index:)`.
    static func complete(opaque: UnsafeMutableRawPointer?, _ outcome: Result<DeliveryReport, KafkaError>) {
        let bits = UInt(bitPattern: opaque)
        guard let address = UnsafeMutableRawPointer(bitPattern: bits & 0xFFFF_FFFF_FFFF) else { return }
        let batch = Unmanaged<PendingBatch>.fromOpaque(address)
        let last = batch._withUnsafeGuaranteedRef { $0.complete(index: Int(bits >> 48), outcome) }
        // The last report gives back the in-flight retain.
        if last { batch.release() }
    }

    /// Returns true when this was the batch's last outstanding record.
    @discardableResult
    func complete(index: Int, _ outcome: Result<DeliveryReport, KafkaError>) -> Bool {
        let (waiter, result, last): (CheckedContinuation<BatchDelivery, Never>?, BatchDelivery?, Bool) = state.withLock { state in
            switch outcome {
            case .success(let report):
                state.result.delivered += 1
                if index == 0 { state.result.firstReport = report }
            case .failure(let error):
                state.result.failures.append(.init(index: index, error: error))
            }
            state.remaining -= 1
            guard state.remaining == 0 else { return (nil, nil, false) }
            defer { state.waiter = nil }
            return (state.waiter, state.result, true)
        }
        if let waiter, let result { waiter.resume(returning: result) }
        return last
    }

    /// Records that never reached librdkafka complete here, on the enqueueing side.
    func fail(index: Int, _ error: KafkaError) {
        if complete(index: index, .failure(error)) { Unmanaged.passUnretained(self).release() }
    }

    func wait() async -> BatchDelivery {
        await withCheckedContinuation { continuation in
            let ready: BatchDelivery? = state.withLock { state in
                if state.remaining == 0 { return state.result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// Produces records to Kafka: idempotent by default, asynchronous, and never dropping a
/// record. When librdkafka's local queue is full, sending waits until there is room.
package final class KafkaProducer: Sendable {
    private let handle: RDKafkaHandle
    private let context: Unmanaged<ClientContext>
    private let poller: ServiceThread
    private let logger: Logger
    /// Topic handles by name; destroyed in `close` before the client.
    private let topics = Locked<[String: TopicHandle]>([:])
    private let closed = Atomic<Bool>(false)
    private let queueFullWaits = Atomic<Int>(0)
    /// Senders waiting for room in librdkafka's queue; the poll thread wakes them whenever
    /// it has served delivery reports (which is what frees room), and at least every 100 ms.
    private let roomWaiters = RoomWaiters()

    /// How many times a send found librdkafka's queue full and waited for room.
    package var backPressureWaits: Int { queueFullWaits.load(ordering: .relaxed) }

    private struct TopicHandle: @unchecked Sendable { let raw: OpaquePointer }

    package init(configuration: KafkaProducerConfiguration, logger: Logger) throws(KafkaError) {
        let context = ClientContext(logger: logger)
        (handle, self.context) = try makeRDKafkaClient(
            type: RD_KAFKA_PRODUCER, properties: configuration.rdkafkaProperties, context: context
        ) { conf in
            rd_kafka_conf_set_dr_msg_cb(conf) { _, message, opaque in
                guard let message else { return }
                let record = message.pointee
                // The status tells persisted from possibly-persisted; only the first counts as delivered.
                let status = rd_kafka_message_status(message)
                if record.err == RD_KAFKA_RESP_ERR_NO_ERROR && status == RD_KAFKA_MSG_STATUS_PERSISTED {
                    PendingBatch.complete(opaque: record._private, .success(DeliveryReport(partition: record.partition, offset: record.offset)))
                } else {
                    let persisted = status == RD_KAFKA_MSG_STATUS_POSSIBLY_PERSISTED ? " (the broker may have written it)" : ""
                    let code = record.err == RD_KAFKA_RESP_ERR_NO_ERROR ? RD_KAFKA_RESP_ERR__FAIL : record.err
                    let error = KafkaError(operation: "produce", code: code, message: String(cString: rd_kafka_err2str(code)) + persisted)
                    PendingBatch.complete(opaque: record._private, .failure(error))
                }
            }
        }
        self.logger = logger
        let handle = self.handle
        let roomWaiters = self.roomWaiters
        // Serves delivery reports; they are the only callbacks a producer needs polled.
        poller = ServiceThread(name: "pushfan.kafka.producer") { isStopping in
            while !isStopping() {
                rd_kafka_poll(handle.raw, 100)
                roomWaiters.wakeAll()
            }
            roomWaiters.wakeAll()
        }
    }

    deinit {
        if !closed.load(ordering: .relaxed) {
            logger.warning("kafka.producer_not_closed")
            shutDown()
        }
    }

    /// How many partitions `topic` has, from the cluster's metadata (the topic is created if
    /// the cluster auto-creates topics).
    package func partitionCount(topic: String, timeout: Duration = .seconds(10)) async throws(KafkaError) -> Int {
        let handle = self.handle
        let result: Result<Int, KafkaError> = await BlockingWork.run {
            guard let topicHandle = rd_kafka_topic_new(handle.raw, topic, nil) else {
                return .failure(KafkaError.configuration("cannot open topic \(topic)"))
            }
            defer { rd_kafka_topic_destroy(topicHandle) }
            var metadata: UnsafePointer<rd_kafka_metadata>?
            let code = rd_kafka_metadata(handle.raw, 0, topicHandle, &metadata, Int32(clamping: timeout.milliseconds))
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                return .failure(KafkaError(operation: "metadata for \(topic)", code: code))
            }
            defer { rd_kafka_metadata_destroy(metadata) }
            guard metadata.pointee.topic_cnt > 0 else { return .failure(KafkaError.configuration("no metadata for \(topic)")) }
            let entry = metadata.pointee.topics[0]
            guard entry.err == RD_KAFKA_RESP_ERR_NO_ERROR, entry.partition_cnt > 0 else {
                return .failure(KafkaError(operation: "metadata for \(topic)", code: entry.err == RD_KAFKA_RESP_ERR_NO_ERROR ? RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION : entry.err))
            }
            return .success(Int(entry.partition_cnt))
        }
        return try result.get()
    }

    /// Sends one record and returns where it was written, or why it could not be.
    package func send(_ record: ProducerRecord) async throws(KafkaError) -> DeliveryReport {
        let result = try await enqueue([record]).delivery()
        if let failure = result.failures.first { throw failure.error }
        guard let report = result.firstReport else { throw KafkaError(operation: "produce", code: RD_KAFKA_RESP_ERR__FAIL) }
        return report
    }

    /// Queues records (waiting whenever the local queue is full) and returns a ticket for
    /// their delivery, so the next batch can be queued while this one is in flight.
    /// Records keep their order within a partition.
    package func enqueue(_ records: [ProducerRecord]) async throws(KafkaError) -> DeliveryTicket {
        var cachedName = ""
        var cachedTopic: OpaquePointer?
        return try await enqueue(count: records.count) { index, opaque in
            let record = records[index]
            if record.topic != cachedName || cachedTopic == nil {
                cachedTopic = topicHandle(record.topic)
                cachedName = record.topic
            }
            guard let topic = cachedTopic else { return RD_KAFKA_RESP_ERR__INVALID_ARG }
            let rc = record.value.withUnsafeBytes { value in
                withOptionalBytes(record.key) { key in
                    rd_kafka_produce(
                        topic, record.partition ?? pushfan_rdk_partition_unassigned(), pushfan_rdk_msg_f_copy(),
                        UnsafeMutableRawPointer(mutating: value.baseAddress), value.count, key?.baseAddress, key?.count ?? 0, opaque)
                }
            }
            return rc == 0 ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_last_error()
        }
    }

    /// The high-rate path: queues a `ProducerBatch`, like `enqueue(_: [ProducerRecord])`.
    package func enqueue(_ batch: ProducerBatch) async throws(KafkaError) -> DeliveryTicket {
        guard let topic = topicHandle(batch.topic) else { throw KafkaError.configuration("cannot create a handle for topic \(batch.topic)") }
        let partition = batch.partition ?? pushfan_rdk_partition_unassigned()
        return try await enqueue(count: batch.count) { index, opaque in
            let entry = batch.entries[index]
            let rc = batch.storage.withUnsafeBytes { bytes in
                rd_kafka_produce(
                    topic, partition, pushfan_rdk_msg_f_copy(), UnsafeMutableRawPointer(mutating: bytes.baseAddress! + entry.valueStart),
                    entry.valueLength, entry.keyLength < 0 ? nil : bytes.baseAddress! + entry.keyStart, max(entry.keyLength, 0), opaque)
            }
            return rc == 0 ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_last_error()
        }
    }

    /// Calls `produce` for each index, waiting while librdkafka's queue is full; a record
    /// refused for any other reason is reported as failed at once.
    private func enqueue(
        count: Int, produce: (Int, UnsafeMutableRawPointer?) -> rd_kafka_resp_err_t
    ) async throws(KafkaError) -> DeliveryTicket {
        guard !closed.load(ordering: .relaxed) else { throw KafkaError.closed("produce") }
        guard count <= PendingBatch.maxCount else {
            throw KafkaError.configuration("a batch holds at most \(PendingBatch.maxCount) records, got \(count)")
        }
        let batch = PendingBatch(count: count)
        var index = 0
        while index < count {
            let code = produce(index, batch.opaque(index: index))
            if code == RD_KAFKA_RESP_ERR_NO_ERROR {
                index += 1
            } else if code == RD_KAFKA_RESP_ERR__QUEUE_FULL {
                // Back-pressure: wait until the poll thread has served delivery reports.
                queueFullWaits.wrappingAdd(1, ordering: .relaxed)
                await roomWaiters.wait()
                if Task.isCancelled {
                    for rest in index..<count {
                        batch.fail(index: rest, .cancelled("produce"))
                    }
                    break
                }
            } else {
                batch.fail(index: index, KafkaError(operation: "produce", code: code))
                index += 1
            }
        }
        return DeliveryTicket(pending: batch)
    }

    private func topicHandle(_ name: String) -> OpaquePointer? {
        topics.withLock { table in
            if let existing = table[name] { return existing.raw }
            guard let created = rd_kafka_topic_new(handle.raw, name, nil) else { return nil }
            table[name] = TopicHandle(raw: created)
            return created
        }
    }

    /// Records queued or in flight to the brokers now.
    package var queueDepth: Int { Int(rd_kafka_outq_len(handle.raw)) }

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

/// Tasks waiting for room in the producer queue.
private final class RoomWaiters: Sendable {
    private let waiting = Locked<[CheckedContinuation<Void, Never>]>([])

    func wait() async {
        await withCheckedContinuation { continuation in waiting.withLock { $0.append(continuation) } }
    }

    func wakeAll() {
        let waiters = waiting.withLock { list in
            defer { list.removeAll() }
            return list
        }
        for waiter in waiters { waiter.resume() }
    }
}

func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    return bytes.withUnsafeBytes { body($0) }
}
