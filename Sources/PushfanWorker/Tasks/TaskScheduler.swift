import Dispatch
import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSupport

/// Runs the tasks of the partitions this worker owns and stores their offsets in order.
///
/// - Tasks of one rate lane (`<app>#<lane>`, one Kafka key) run at most four at a time, one
///   of them reading pages: the next starts once the one before has every page on the wire
///   and waits for its last answers; all send through the lane's one rate bucket. Tasks of different lanes run at
///   the same time, so one app's huge campaign never holds up
///   another app's small one on the same partition.
/// - A partition's offset is stored up to its first unfinished task: a crash re-delivers
///   exactly the tasks whose devices may not all be final yet.
/// - On revocation the partition's tasks are stopped (they record what they sent and
///   release the rest) before the revocation completes, so a lane is never sent by two
///   workers at once.
package final class TaskScheduler: Sendable {
    /// What a running task needs: its record (for the dead letter) and the decoded task.
    struct Payload: Sendable {
        let record: KafkaRecord
        let task: TaskRecord?
    }

    /// The bookkeeping (pure, `TaskSchedule`) and the running tasks' handles, under one lock;
    /// what the schedule says to do happens outside it.
    private struct State {
        var schedule = TaskSchedule<Payload>()
        var handles: [TaskSchedule<Payload>.Key: Task<Void, Never>] = [:]
    }

    private let state = Locked(State())
    private let consumer: KafkaConsumer
    private let makeSender: @Sendable (TaskRecord, _ record: String) -> ShardSender
    private let deadLetter: @Sendable (_ record: KafkaRecord, _ code: String, _ reason: String) async -> Void
    private let logger: Logger

    package init(
        consumer: KafkaConsumer, logger: Logger, makeSender: @escaping @Sendable (TaskRecord, _ record: String) -> ShardSender,
        deadLetter: @escaping @Sendable (_ record: KafkaRecord, _ code: String, _ reason: String) async -> Void
    ) {
        self.consumer = consumer
        self.logger = logger
        self.makeSender = makeSender
        self.deadLetter = deadLetter
    }

    /// Tasks queued and running now.
    package var counts: (queued: Int, running: Int) { state.withLock { $0.schedule.counts } }

    /// Takes ownership of newly assigned partitions.
    package func assigned(_ partitions: [TopicPartition]) {
        state.withLock { $0.schedule.assign(partitions) }
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
            let queued = state.withLock {
                $0.schedule.enqueue(record.topicPartition, offset: record.offset, lane: task?.scheduleLane, payload: Payload(record: record, task: task))
            }
            if case .storeOffset(let next) = queued { store(next, for: record.topicPartition) }
        }
        pump()
    }

    /// Starts every queued task whose lane is free. Each task's handle is kept in the same
    /// lock that marks it running, so a revocation or stop that sees it running can always
    /// cancel and wait for it (the task's body takes the lock only later, when it ends).
    private func pump() {
        state.withLock { state in
            for start in state.schedule.startable() {
                guard let task = start.payload.task else { continue }
                let key = TaskSchedule<Payload>.Key(partition: start.partition, offset: start.offset)
                var sender = makeSender(task, "\(start.partition.partition)@\(start.offset)")
                let record = start.payload.record
                let clock = sender.context.clock
                let started = clock.now
                let queuedMillis = record.timestamp.map { clock.wallMillis - $0 }
                sender.lastPageSent = { [lane = start.lane, logger] in
                    // A message's way to APNs, for who watches its latency: Kafka and the
                    // queue, then the plan, claim and rate wait until its requests are out.
                    if task.transactional {
                        logger.info("message.on_wire", [
                            "campaign.id": task.campaignKey.stored, "queued_ms": queuedMillis.map(String.init) ?? "",
                            "to_wire_ms": String((clock.now - started).milliseconds),
                        ])
                    }
                    self.drained(key, lane: lane)
                }
                state.handles[key] = Task {
                    let end = await sender.run()
                    if case .abandoned(let code, let reason) = end { await self.deadLetter(record, code, reason) }
                    self.finished(key, task: task, end: end)
                }
            }
        }
    }

    private func drained(_ key: TaskSchedule<Payload>.Key, lane: String) {
        if state.withLock({ $0.schedule.drained(key, lane: lane) }) { pump() }
    }

    private func finished(_ key: TaskSchedule<Payload>.Key, task: TaskRecord, end: TaskEnd) {
        let next = state.withLock { state -> Int64? in
            state.handles.removeValue(forKey: key)
            return state.schedule.finish(key, lane: task.scheduleLane, handedBack: end == .handedBack)
        }
        if end != .handedBack {
            logger.info("task.finished", ["campaign.id": task.campaignKey.stored, "task.shard": String(task.shard), "task.lane": task.scheduleLane])
        }
        if let next { store(next, for: key.partition) }
        pump()
    }

    private func store(_ next: Int64, for partition: TopicPartition) {
        do {
            try consumer.storeNextOffsets([partition: next])
        } catch {
            logger.info("task.offset_not_stored", ["kafka.partition": partition.description, "error": error.description])
        }
    }

    /// Stops the tasks of revoked partitions and waits (up to `timeout`) until they have
    /// recorded what they sent; called on the consumer's poll thread by `onRevoke`.
    package func revoke(_ partitions: [TopicPartition], timeout: Duration) {
        let handles = state.withLock { state in
            state.schedule.beginRevoke(partitions).compactMap { state.handles[$0] }
        }
        // Tasks that finish meanwhile still store their offsets, which are committed next.
        Self.stopAndWait(handles, timeout: timeout)
        state.withLock { $0.schedule.endRevoke(partitions) }
        if !handles.isEmpty { logger.info("task.handed_back", ["tasks": String(handles.count)]) }
    }

    /// Stops taking tasks and stops the running ones (they hand back what is left).
    package func stop(timeout: Duration) {
        let handles = state.withLock { state in
            state.schedule.stop().compactMap { state.handles[$0] }
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
