import Foundation

/// A topic and partition.
package struct TopicPartition: Sendable, Hashable, CustomStringConvertible {
    package let topic: String
    package let partition: Int32
    package init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    package var description: String { "\(topic)[\(partition)]" }
}

/// The bytes and topic names of one poll, shared by its records, so that a record costs
/// no allocation of its own and copying one retains a single object.
final class PolledBatch: Sendable {
    let storage: [UInt8]
    let topics: [String]

    init(storage: [UInt8], topics: [String]) {
        self.storage = storage
        self.topics = topics
    }
}

/// A consumed record. Store its offset (`KafkaConsumer.storeOffset`) once its work is durable.
package struct KafkaRecord: Sendable {
    private let batch: PolledBatch
    private let topicIndex: Int
    package let partition: Int32
    package let offset: Int64
    private let keyRange: Range<Int>?
    private let valueRange: Range<Int>
    /// Milliseconds since the epoch, when the broker reported one.
    package let timestamp: Int64?

    init(batch: PolledBatch, topicIndex: Int, partition: Int32, offset: Int64, keyRange: Range<Int>?, valueRange: Range<Int>, timestamp: Int64?) {
        self.batch = batch
        self.topicIndex = topicIndex
        self.partition = partition
        self.offset = offset
        self.keyRange = keyRange
        self.valueRange = valueRange
        self.timestamp = timestamp
    }

    /// A record as a consumer would hand it over, built from its parts: for code that handles
    /// records without a broker to read them from (the planner's in-memory tests).
    package init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8], timestamp: Int64? = nil) {
        let keyRange = key.map { 0..<$0.count }
        let start = key?.count ?? 0
        self.init(
            batch: PolledBatch(storage: (key ?? []) + value, topics: [topic]), topicIndex: 0, partition: partition, offset: offset,
            keyRange: keyRange, valueRange: start..<(start + value.count), timestamp: timestamp)
    }

    package var topic: String { batch.topics[topicIndex] }
    package var key: ArraySlice<UInt8>? { keyRange.map { batch.storage[$0] } }
    package var value: ArraySlice<UInt8> { batch.storage[valueRange] }
    package var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
    package var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }

    /// The value's bytes without copying them.
    package func withValueBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try batch.storage.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[valueRange])) }
    }

    /// True when both records come from the same topic and partition (cheap: no string compare
    /// for records of one poll).
    func samePartition(as other: KafkaRecord) -> Bool {
        partition == other.partition && (batch === other.batch ? topicIndex == other.topicIndex : topic == other.topic)
    }
}

/// What the consumer's poll thread reports, in order.
package enum ConsumerEvent: Sendable {
    /// Records fetched in one poll, possibly from several partitions.
    case records([KafkaRecord])
    /// Partitions now owned by this member.
    case assigned([TopicPartition])
    /// Partitions taken away: stop their work; offsets stored so far were committed.
    case revoked([TopicPartition])
    /// A consumer-level error (fatal errors end the stream after this event).
    case error(KafkaError)
}

/// Hands events from the blocking poll thread to async code. Bounded: when the caller
/// falls behind by `capacity` records, the poll thread waits instead of buffering more.
final class ConsumerEventChannel: @unchecked Sendable {
    // All mutable state is guarded by `condition`, hence @unchecked.
    private let condition = NSCondition()
    private var buffer: [ConsumerEvent] = []
    private var head = 0
    private var bufferedRecords = 0
    private var waiter: CheckedContinuation<ConsumerEvent?, Never>?
    private var finished = false
    private let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Called on the poll thread; blocks while the buffer is full.
    func publish(_ event: ConsumerEvent) {
        condition.lock()
        if case .records = event {
            while bufferedRecords >= capacity && !finished { condition.wait() }
        }
        if finished {
            condition.unlock()
            return
        }
        if let waiter {
            self.waiter = nil
            condition.unlock()
            waiter.resume(returning: event)
            return
        }
        buffer.append(event)
        if case .records(let records) = event { bufferedRecords += records.count }
        condition.unlock()
    }

    func publishError(_ error: KafkaError) { publish(.error(error)) }

    /// Called by the consumer's iterator; nil once finished and drained.
    func next() async -> ConsumerEvent? {
        await withCheckedContinuation { continuation in
            condition.lock()
            if head < buffer.count {
                let event = buffer[head]
                head += 1
                if head == buffer.count {
                    buffer.removeAll(keepingCapacity: true)
                    head = 0
                }
                if case .records(let records) = event {
                    bufferedRecords -= records.count
                    condition.broadcast()
                }
                condition.unlock()
                continuation.resume(returning: event)
            } else if finished {
                condition.unlock()
                continuation.resume(returning: nil)
            } else {
                waiter = continuation
                condition.unlock()
            }
        }
    }

    /// Ends the stream: the iterator sees the buffered events, then nil; publishers stop blocking.
    func finish() {
        condition.lock()
        finished = true
        let waiter = self.waiter
        self.waiter = nil
        condition.broadcast()
        condition.unlock()
        waiter?.resume(returning: nil)
    }
}
