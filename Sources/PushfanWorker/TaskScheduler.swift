import Dispatch
import Foundation
import PushfanCore
import PushfanKafka
import Synchronization

/// Runs the tasks of the partitions this worker owns and stores their offsets in order.
///
/// - Tasks of one rate lane (`<app>#<lane>`, one Kafka key) run one after another; tasks of
///   different lanes run at the same time, so one app's huge campaign never holds up
///   another app's small one on the same partition.
/// - A partition's offset is stored up to its first unfinished task: a crash re-delivers
///   exactly the tasks whose devices may not all be final yet.
/// - On revocation the partition's tasks are stopped (they record what they sent and
///   release the rest) before the revocation completes, so a lane is never sent by two
///   workers at once.
package final class TaskScheduler: Sendable {
    private struct Entry {
        let offset: Int64
        let record: KafkaRecord
        let task: TaskRecord?
        var started = false
        var done = false
        var handle: Task<Void, Never>?
    }

    private struct PartitionState {
        /// Entries in offset order; finished ones at the front are dropped as the stored
        /// offset advances.
        var entries: [Entry] = []
    }

    private struct State {
        var partitions: [TopicPartition: PartitionState] = [:]
        /// Lanes with a running task.
        var busyLanes: Set<String> = []
        /// Partitions being given up: nothing new starts there.
        var revoking: Set<TopicPartition> = []
        var stopping = false
    }

    private let state = Mutex(State())
    private let consumer: KafkaConsumer
    private let makeSender: @Sendable (TaskRecord) -> ShardSender
    private let deadLetter: @Sendable (_ record: KafkaRecord, _ code: String, _ reason: String) async -> Void
    private let logger: Logger

    package init(
        consumer: KafkaConsumer, logger: Logger, makeSender: @escaping @Sendable (TaskRecord) -> ShardSender,
        deadLetter: @escaping @Sendable (_ record: KafkaRecord, _ code: String, _ reason: String) async -> Void
    ) {
        self.consumer = consumer
        self.logger = logger
        self.makeSender = makeSender
        self.deadLetter = deadLetter
    }

    /// Takes ownership of newly assigned partitions.
    package func assigned(_ partitions: [TopicPartition]) {
        state.withLock { state in
            for partition in partitions where state.partitions[partition] == nil || state.revoking.contains(partition) {
                state.partitions[partition] = PartitionState()
                state.revoking.remove(partition)
            }
        }
    }

    /// Queues the records of owned partitions; records of a partition this worker no longer
    /// owns (polled before a revocation) are dropped: the new owner reads them again.
    package func enqueue(_ records: [KafkaRecord]) async {
        for record in records {
            var task: TaskRecord?
            do {
                task = try MessageCodec.decode(TaskRecord.self, from: Data(record.value))
            } catch {
                await deadLetter(record, error.code, error.description)
            }
            let accepted = state.withLock { state -> Bool in
                guard !state.stopping, state.partitions[record.topicPartition] != nil, !state.revoking.contains(record.topicPartition) else { return false }
                state.partitions[record.topicPartition]!.entries.append(Entry(offset: record.offset, record: record, task: task, done: task == nil))
                return true
            }
            if accepted && task == nil { advance(record.topicPartition) }
        }
        pump()
    }

    /// Starts every queued task whose lane is free.
    private func pump() {
        let starts: [(TopicPartition, Int64, TaskRecord, KafkaRecord)] = state.withLock { state in
            guard !state.stopping else { return [] }
            var starts: [(TopicPartition, Int64, TaskRecord, KafkaRecord)] = []
            for (partition, partitionState) in state.partitions where !state.revoking.contains(partition) {
                for (index, entry) in partitionState.entries.enumerated() where !entry.started && !entry.done {
                    guard let task = entry.task, !state.busyLanes.contains(task.kafkaKey) else { continue }
                    state.busyLanes.insert(task.kafkaKey)
                    state.partitions[partition]!.entries[index].started = true
                    starts.append((partition, entry.offset, task, entry.record))
                }
            }
            return starts
        }
        for (partition, offset, task, record) in starts {
            let sender = makeSender(task)
            let handle = Task {
                let end = await sender.run()
                if case .abandoned(let code, let reason) = end { await self.deadLetter(record, code, reason) }
                self.finished(partition, offset: offset, task: task, end: end)
            }
            state.withLock { state in
                guard let index = state.partitions[partition]?.entries.firstIndex(where: { $0.offset == offset }) else { return }
                state.partitions[partition]!.entries[index].handle = handle
            }
        }
    }

    private func finished(_ partition: TopicPartition, offset: Int64, task: TaskRecord, end: TaskEnd) {
        state.withLock { state in
            state.busyLanes.remove(task.kafkaKey)
            guard let index = state.partitions[partition]?.entries.firstIndex(where: { $0.offset == offset }) else { return }
            state.partitions[partition]!.entries[index].handle = nil
            if end == .handedBack {
                // It runs again here only if the partition is re-read.
                state.partitions[partition]!.entries[index].started = false
            } else {
                state.partitions[partition]!.entries[index].done = true
            }
        }
        if end != .handedBack {
            logger.info("task.finished", ["campaign.id": task.campaign, "task.shard": String(task.shard), "task.lane": task.kafkaKey])
            advance(partition)
        }
        pump()
    }

    /// Stores the partition's offset past every finished task at its front.
    private func advance(_ partition: TopicPartition) {
        let next: Int64? = state.withLock { state in
            guard var partitionState = state.partitions[partition] else { return nil }
            var next: Int64?
            while let first = partitionState.entries.first, first.done {
                next = first.offset + 1
                partitionState.entries.removeFirst()
            }
            state.partitions[partition] = partitionState
            return next
        }
        guard let next else { return }
        do {
            try consumer.storeNextOffsets([partition: next])
        } catch {
            logger.info("task.offset_not_stored", ["kafka.partition": partition.description, "error": error.description])
        }
    }

    /// Stops the tasks of revoked partitions and waits (up to `timeout`) until they have
    /// recorded what they sent; called on the consumer's poll thread by `onRevoke`.
    package func revoke(_ partitions: [TopicPartition], timeout: Duration) {
        let handles: [Task<Void, Never>] = state.withLock { state in
            var handles: [Task<Void, Never>] = []
            for partition in partitions {
                guard let partitionState = state.partitions[partition] else { continue }
                state.revoking.insert(partition)
                handles += partitionState.entries.compactMap(\.handle)
            }
            return handles
        }
        // Tasks that finish meanwhile still store their offsets, which are committed next.
        Self.stopAndWait(handles, timeout: timeout)
        state.withLock { state in
            for partition in partitions where state.revoking.contains(partition) {
                state.partitions.removeValue(forKey: partition)
                state.revoking.remove(partition)
            }
        }
        if !handles.isEmpty { logger.info("task.handed_back", ["tasks": String(handles.count)]) }
    }

    /// Stops taking tasks and stops the running ones (they hand back what is left).
    package func stop(timeout: Duration) {
        let handles: [Task<Void, Never>] = state.withLock { state in
            state.stopping = true
            return state.partitions.values.flatMap { $0.entries.compactMap(\.handle) }
        }
        Self.stopAndWait(handles, timeout: timeout)
    }

    private static func stopAndWait(_ handles: [Task<Void, Never>], timeout: Duration) {
        guard !handles.isEmpty else { return }
        for handle in handles { handle.cancel() }
        let done = DispatchSemaphore(value: 0)
        Task {
            for handle in handles { await handle.value }
            done.signal()
        }
        _ = done.wait(timeout: .now() + timeout.seconds)
    }
}
