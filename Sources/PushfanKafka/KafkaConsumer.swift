internal import CRdkafka
import Foundation
import PushfanSupport
import Synchronization

/// A member of a Kafka consumer group.
///
/// Polling runs on a dedicated thread (never on Swift's cooperative pool) and reaches the
/// caller through `events`, in order: records, assignments, revocations and errors.
/// Offsets are stored only when the caller says a record's work is durable
/// (`storeOffset`), and librdkafka commits what was stored, so a crash re-delivers the
/// records whose work was not finished and nothing else.
package final class KafkaConsumer: Sendable {
    private let handle: RDKafkaHandle
    private let context: Unmanaged<ClientContext>
    private let channel: ConsumerEventChannel
    private let poller: ServiceThread
    private let logger: Logger
    private let closed = Atomic<Bool>(false)
    /// True once `close` began; held while offsets are stored, so a store that finishes late
    /// (work still in flight at shutdown) is refused instead of reaching a freed handle.
    private let closing = Locked(false)

    package init(configuration: KafkaConsumerConfiguration, logger: Logger) throws(KafkaError) {
        let channel = ConsumerEventChannel(capacity: configuration.bufferCapacity)
        let strategy = configuration.rdkafkaProperties.last { $0.0 == "partition.assignment.strategy" }?.1
        let context = ClientContext(
            logger: logger, consumerEvents: channel,
            cooperative: strategy?.trimmingCharacters(in: .whitespaces) == "cooperative-sticky")
        (handle, self.context) = try makeRDKafkaClient(
            type: RD_KAFKA_CONSUMER, properties: configuration.rdkafkaProperties, context: context
        ) { conf in
            rd_kafka_conf_set_rebalance_cb(conf) { client, code, partitions, opaque in
                guard let client, let context = ClientContext.from(opaque) else { return }
                KafkaConsumer.rebalance(client: client, code: code, partitions: partitions, context: context)
            }
        }
        self.channel = channel
        self.logger = logger
        // Route the main queue (errors, rebalances) to the consumer queue the poll thread serves.
        rd_kafka_poll_set_consumer(handle.raw)
        let (handle, capacity) = (self.handle, max(1, configuration.pollBatch))
        poller = ServiceThread(name: "pushfan.kafka.consumer") { isStopping in
            KafkaConsumer.pollLoop(handle: handle, channel: channel, capacity: capacity, isStopping: isStopping)
        }
    }

    deinit {
        if !closed.load(ordering: .relaxed) {
            logger.warning("kafka.consumer_not_closed")
            channel.finish()
            poller.stop()
            rd_kafka_destroy(handle.raw)
            context.release()
        }
    }

    /// Joins the group for these topics; assignments arrive as `.assigned` events.
    package func subscribe(topics: [String]) throws(KafkaError) {
        try withPartitionList(topics.map { TopicPartition(topic: $0, partition: pushfan_rdk_partition_unassigned()) }) { list throws(KafkaError) in
            try KafkaError.check(rd_kafka_subscribe(handle.raw, list), "subscribe")
        }
    }

    /// Lag of this member's partitions (offsets behind the partition's end), from librdkafka's
    /// statistics every `statisticsInterval`.
    package var lag: [(topic: String, partition: Int32, lag: Int64)] {
        context.takeUnretainedValue().consumerLag.withLock { lag in
            lag.flatMap { topic, partitions in partitions.map { (topic, $0.key, $0.value) } }
        }
    }

    /// The event stream. Iterate it from one task only.
    package var events: Events { Events(channel: channel) }

    package struct Events: AsyncSequence, Sendable {
        package typealias Element = ConsumerEvent
        fileprivate let channel: ConsumerEventChannel

        package struct AsyncIterator: AsyncIteratorProtocol {
            fileprivate let channel: ConsumerEventChannel
            package mutating func next() async -> ConsumerEvent? { await channel.next() }
        }

        package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }
    }

    /// Marks everything up to and including these records as done. Call it only once their
    /// work is durable; the highest offset per partition wins.
    package func storeOffsets(_ records: some Sequence<KafkaRecord>) throws(KafkaError) {
        var next: [TopicPartition: Int64] = [:]
        // Records come in runs per partition; touch the table once per run.
        var run: KafkaRecord?
        var runOffset: Int64 = 0
        func flushRun() {
            guard let run else { return }
            next[run.topicPartition] = max(next[run.topicPartition] ?? 0, runOffset + 1)
        }
        for record in records {
            if let current = run, current.samePartition(as: record) {
                runOffset = max(runOffset, record.offset)
            } else {
                flushRun()
                run = record
                runOffset = record.offset
            }
        }
        flushRun()
        guard !next.isEmpty else { return }
        try storeNextOffsets(next)
    }

    package func storeOffset(_ record: KafkaRecord) throws(KafkaError) {
        try storeNextOffsets([record.topicPartition: record.offset + 1])
    }

    /// Stores "next offset to read" per partition. A partition this member no longer owns
    /// is refused (its new owner re-reads the records), which is reported, not hidden.
    package func storeNextOffsets(_ offsets: [TopicPartition: Int64]) throws(KafkaError) {
        let entries = offsets.map { ($0.key, $0.value) }
        try closing.withLock { closing throws(KafkaError) in
            guard !closing else { throw KafkaError.closed("store offsets") }
            try withPartitionList(entries.map(\.0)) { list throws(KafkaError) in
                for (index, entry) in entries.enumerated() { list.pointee.elems[index].offset = entry.1 }
                try KafkaError.check(rd_kafka_offsets_store(handle.raw, list), "store offsets")
                for index in 0..<Int(list.pointee.cnt) where list.pointee.elems[index].err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    throw KafkaError(operation: "store offsets for \(entries[index].0)", code: list.pointee.elems[index].err)
                }
            }
        }
    }

    /// Runs `handler` synchronously when partitions are revoked, before the offsets stored
    /// for them are committed and before they can be assigned elsewhere: the place to stop
    /// the work of those partitions and store what finished, so two members never work on
    /// one partition at once. It blocks polling, so it must return within seconds.
    package func onRevoke(_ handler: @escaping @Sendable ([TopicPartition]) -> Void) {
        context.takeUnretainedValue().revokeHandler.withLock { $0 = handler }
    }

    /// Runs `handler` synchronously when partitions are assigned, before reading starts: it
    /// gives the offset to start each partition at, for a reader that keeps its offsets with
    /// its own results (a partition it leaves out starts at the group's committed offset;
    /// `KafkaConsumer.beginning` starts one at its first record). It blocks polling, so it
    /// must return within seconds.
    package func onAssign(_ handler: @escaping @Sendable ([TopicPartition]) -> [TopicPartition: Int64]) {
        context.takeUnretainedValue().assignHandler.withLock { $0 = handler }
    }

    /// The offset `onAssign` gives for a partition's first record.
    package static let beginning = Int64(RD_KAFKA_OFFSET_BEGINNING)

    /// Commits stored offsets now and waits for the broker's answer.
    package func commit() async throws(KafkaError) {
        let handle = self.handle
        let code = await BlockingWork.run { rd_kafka_commit(handle.raw, nil, 0).rawValue }
        let error = rd_kafka_resp_err_t(rawValue: code)
        // _NO_OFFSET: nothing was stored since the last commit.
        if error != RD_KAFKA_RESP_ERR__NO_OFFSET { try KafkaError.check(error, "commit") }
    }

    /// Stops fetching these partitions while keeping them (long work, back-pressure).
    package func pause(_ partitions: [TopicPartition]) throws(KafkaError) {
        try withPartitionList(partitions) { list throws(KafkaError) in
            try KafkaError.check(rd_kafka_pause_partitions(handle.raw, list), "pause")
        }
    }

    package func resume(_ partitions: [TopicPartition]) throws(KafkaError) {
        try withPartitionList(partitions) { list throws(KafkaError) in
            try KafkaError.check(rd_kafka_resume_partitions(handle.raw, list), "resume")
        }
    }

    /// Each partition's first and next offsets as the broker has them now (a partition is
    /// read to its end when the last record read is at `high - 1`; empty when `low == high`).
    /// Blocks up to `timeout` per partition: call it off the cooperative pool's hot paths.
    package func watermarks(_ partitions: [TopicPartition], timeout: Duration = .seconds(10)) async throws(KafkaError) -> [TopicPartition: (low: Int64, high: Int64)] {
        let handle = self.handle
        let milliseconds = Int32(clamping: timeout.milliseconds)
        let answers = await BlockingWork.run { () -> [(TopicPartition, Int64, Int64, Int32)] in
            partitions.map { partition in
                var low: Int64 = 0, high: Int64 = 0
                let code = rd_kafka_query_watermark_offsets(handle.raw, partition.topic, partition.partition, &low, &high, milliseconds)
                return (partition, low, high, code.rawValue)
            }
        }
        var marks: [TopicPartition: (low: Int64, high: Int64)] = [:]
        for (partition, low, high, code) in answers {
            try KafkaError.check(rd_kafka_resp_err_t(rawValue: code), "watermarks of \(partition)")
            marks[partition] = (low, high)
        }
        return marks
    }

    /// The partitions this member owns now.
    package func assignment() throws(KafkaError) -> [TopicPartition] {
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        try KafkaError.check(rd_kafka_assignment(handle.raw, &list), "assignment")
        defer { if let list { rd_kafka_topic_partition_list_destroy(list) } }
        return list.map(KafkaConsumer.partitions(of:)) ?? []
    }

    /// Commits stored offsets, leaves the group (so partitions move at once rather than
    /// after the session timeout) and releases the client. The event stream ends.
    /// Leaves the group (committing what was stored) and frees the client. Bounded by
    /// `timeout`: librdkafka's close has been seen to hang after offset resets on the dev
    /// cluster, and a process that is stopping must not hang with it. Past the bound it goes
    /// on (logged); the close finishes in the background if it ever does.
    package func close(timeout: Duration = .seconds(20)) async {
        if closed.exchange(true, ordering: .relaxed) { return }
        closing.withLock { $0 = true }
        channel.finish()
        poller.stop()
        let (handle, context, logger) = (self.handle, self.context, self.logger)
        let outcome = AsyncStream<Bool>.makeStream()
        Task {
            let code = await BlockingWork.run { rd_kafka_consumer_close(handle.raw).rawValue }
            if code != 0 {
                logger.warning("kafka.consumer_close", ["kafka.code": String(cString: rd_kafka_err2name(rd_kafka_resp_err_t(rawValue: code)))])
            }
            if Self.destroyWouldAbort(context: context.takeUnretainedValue()) {
                // The consumer has left its group; its handle and threads go with the process.
                logger.info("kafka.consumer_destroy_skipped", ["reason": "librdkafka before 2.3.0 aborts destroying a cooperative-sticky consumer never assigned (librdkafka #4312)"])
            } else {
                await BlockingWork.run { rd_kafka_destroy(handle.raw) }
                context.release()
            }
            outcome.continuation.yield(true)
        }
        let bound = Task {
            try? await Task.sleep(for: timeout)
            outcome.continuation.yield(false)
        }
        for await closedInTime in outcome.stream {
            bound.cancel()
            if !closedInTime { logger.warning("kafka.consumer_close_timeout", ["timeout_s": String(timeout.components.seconds)]) }
            break
        }
    }

    // MARK: - Poll thread

    private static func pollLoop(handle: RDKafkaHandle, channel: ConsumerEventChannel, capacity: Int, isStopping: () -> Bool) {
        guard let queue = rd_kafka_queue_get_consumer(handle.raw) else { return }
        defer { rd_kafka_queue_destroy(queue) }
        let messages = UnsafeMutablePointer<UnsafeMutablePointer<rd_kafka_message_t>?>.allocate(capacity: capacity)
        defer { messages.deallocate() }
        while !isStopping() {
            let count = rd_kafka_consume_batch_queue(queue, 100, messages, capacity)
            guard count > 0 else { continue }
            var records: [KafkaRecord] = []
            records.reserveCapacity(count)
            // All keys and values of this poll go into one buffer; records slice it.
            var total = 0
            for index in 0..<count {
                if let message = messages[index] { total += message.pointee.len + message.pointee.key_len }
            }
            var storage = [UInt8]()
            storage.reserveCapacity(total)
            var pending: [(topic: Int, partition: Int32, offset: Int64, key: Range<Int>?, value: Range<Int>, timestamp: Int64?)] = []
            pending.reserveCapacity(count)
            var topics: [String] = []
            var topicIndexes: [OpaquePointer: Int] = [:]
            for index in 0..<count {
                guard let message = messages[index] else { continue }
                defer { rd_kafka_message_destroy(message) }
                let m = message.pointee
                var topicIndex = 0
                if let rkt = m.rkt {
                    if let known = topicIndexes[rkt] {
                        topicIndex = known
                    } else {
                        topicIndex = topics.count
                        topics.append(String(cString: rd_kafka_topic_name(rkt)))
                        topicIndexes[rkt] = topicIndex
                    }
                } else {
                    topicIndex = topics.count
                    topics.append("")
                }
                if m.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    let text = m.payload.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: m.len), as: UTF8.self) }
                    channel.publish(.error(KafkaError(operation: "consume \(topics[topicIndex])[\(m.partition)]", code: m.err, message: text)))
                    continue
                }
                var key: Range<Int>?
                if let bytes = m.key {
                    let start = storage.count
                    storage.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: m.key_len))
                    key = start..<storage.count
                }
                let valueStart = storage.count
                if let bytes = m.payload { storage.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: m.len)) }
                var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
                let timestamp = rd_kafka_message_timestamp(message, &timestampType)
                pending.append((topicIndex, m.partition, m.offset, key, valueStart..<storage.count, timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp))
            }
            let batch = PolledBatch(storage: storage, topics: topics)
            for entry in pending {
                records.append(
                    KafkaRecord(
                        batch: batch, topicIndex: entry.topic, partition: entry.partition, offset: entry.offset, keyRange: entry.key,
                        valueRange: entry.value, timestamp: entry.timestamp))
            }
            if !records.isEmpty { channel.publish(.records(records)) }
        }
    }

    /// librdkafka before 2.3.0 asserts in `rd_kafka_destroy` when a cooperative-sticky
    /// consumer never received an assignment (its assignor state is made by the first one;
    /// librdkafka #4312, fixed by #4381): a worker stopped while its first join was still
    /// under way died with SIGABRT instead of exiting. Debian 12 ships 2.0.2.
    private static func destroyWouldAbort(context: ClientContext) -> Bool {
        abortsDestroyingUnassignedCooperative && context.cooperative && !context.assignedOnce.withLock { $0 }
    }

    /// Whether the linked librdkafka has that bug (before 2.3.0).
    package static var abortsDestroyingUnassignedCooperative: Bool { rd_kafka_version() < 0x0203_00ff }

    /// Runs on the poll thread (or in close) when the group coordinator moves partitions.
    private static func rebalance(
        client: OpaquePointer, code: rd_kafka_resp_err_t, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
        context: ClientContext
    ) {
        // NULL before the consumer has joined or once it is closing: the configured protocol.
        let cooperative = rd_kafka_rebalance_protocol(client).map { String(cString: $0) == "COOPERATIVE" } ?? context.cooperative
        let changed = partitions.map(KafkaConsumer.partitions(of:)) ?? []
        let events = context.consumerEvents
        switch code {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            context.assignedOnce.withLock { $0 = true }
            if let partitions, let handler = context.assignHandler.withLock({ $0 }) {
                let starts = handler(changed)
                for index in 0..<Int(partitions.pointee.cnt) {
                    if let start = starts[changed[index]] { partitions.pointee.elems[index].offset = start }
                }
            }
            if cooperative {
                if let error = rd_kafka_incremental_assign(client, partitions) {
                    events?.publish(.error(KafkaError(operation: "assign", consuming: error)))
                }
            } else {
                _ = rd_kafka_assign(client, partitions)
            }
            context.logger.info("kafka.assigned", ["kafka.partitions": changed.map(\.description).joined(separator: ",")])
            events?.publish(.assigned(changed))
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            events?.publish(.revoked(changed))
            if let handler = context.revokeHandler.withLock({ $0 }) { handler(changed) }
            // What the caller stored before losing the partitions is committed now, so the
            // next owner starts right after the last durable record.
            _ = rd_kafka_commit(client, nil, 0)
            if cooperative {
                if let error = rd_kafka_incremental_unassign(client, partitions) { rd_kafka_error_destroy(error) }
            } else {
                _ = rd_kafka_assign(client, nil)
            }
            context.logger.info("kafka.revoked", ["kafka.partitions": changed.map(\.description).joined(separator: ",")])
        default:
            _ = rd_kafka_assign(client, nil)
            events?.publish(.error(KafkaError(operation: "rebalance", code: code)))
        }
    }

    static func partitions(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> [TopicPartition] {
        (0..<Int(list.pointee.cnt)).map { index in
            let element = list.pointee.elems[index]
            return TopicPartition(topic: String(cString: element.topic), partition: element.partition)
        }
    }
}

/// Builds a temporary `rd_kafka_topic_partition_list_t` for one call.
func withPartitionList<R>(
    _ partitions: [TopicPartition], _ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) throws(KafkaError) -> R
) throws(KafkaError) -> R {
    guard let list = rd_kafka_topic_partition_list_new(Int32(clamping: partitions.count)) else {
        throw KafkaError.configuration("out of memory for a partition list")
    }
    defer { rd_kafka_topic_partition_list_destroy(list) }
    for partition in partitions { _ = rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition) }
    return try body(list)
}
