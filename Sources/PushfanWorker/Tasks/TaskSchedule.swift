import PushfanKafka

/// The scheduler's bookkeeping as a value, with no I/O: the queued, running and finished
/// tasks of each owned partition, the lanes that are busy, and how far each partition's
/// offset may be stored. Its methods change the state and return what the caller must do
/// (start these tasks, store this offset), which the caller performs outside its lock.
///
/// `Payload` is what the caller needs to run a task (its record and decoded task); the
/// schedule only keeps it.
struct TaskSchedule<Payload: Sendable>: Sendable {
    enum Phase: Sendable, Equatable {
        case queued
        case running
        case done
    }

    struct Entry: Sendable {
        let offset: Int64
        /// The task's lane (its Kafka key); nil for a record with nothing to run.
        let lane: String?
        let payload: Payload
        var phase: Phase
        /// Running with every page on the wire: it only waits for answers, retries and results.
        var drained = false
    }

    /// Tasks queued and running, over every owned partition.
    var counts: (queued: Int, running: Int) {
        var queued = 0
        var running = 0
        for entries in partitions.values {
            for entry in entries where entry.lane != nil {
                if entry.phase == .queued { queued += 1 } else if entry.phase == .running { running += 1 }
            }
        }
        return (queued, running)
    }

    /// A task to start now.
    struct Start: Sendable {
        let partition: TopicPartition
        let offset: Int64
        let lane: String
        let payload: Payload
    }

    /// Where a task is, for the caller's handles.
    struct Key: Sendable, Hashable {
        let partition: TopicPartition
        let offset: Int64
    }

    /// Entries in offset order per owned partition; finished ones at the front are dropped
    /// as the stored offset advances.
    private var partitions: [TopicPartition: [Entry]] = [:]
    /// Running tasks per lane.
    private var busyLanes: [String: Int] = [:]
    /// Lanes with a running task still reading and claiming pages.
    private var readingLanes: Set<String> = []
    /// Tasks of one lane that may run at once.
    let tasksPerLane: Int
    /// Partitions being given up: nothing new starts or queues there.
    private var revoking: Set<TopicPartition> = []
    private(set) var stopping = false

    /// `tasksPerLane` 4: a lane's next task starts once the one before it has every page on
    /// the wire (`drained`) and only waits for its slowest answers (seconds at APNs' real
    /// latency), so the lane keeps sending at its rate between tasks, and up to three tasks'
    /// last pages wait beside the one reading (a task of 5,000 devices is ten pages, fewer
    /// than a lane at a high rate has waiting at that latency). One task of a lane reads
    /// pages at a time; all take their sends from the lane's one bucket.
    init(tasksPerLane: Int = 4) {
        precondition(tasksPerLane >= 1)
        self.tasksPerLane = tasksPerLane
    }

    /// Takes ownership of partitions (again, if they were being given up).
    mutating func assign(_ assigned: [TopicPartition]) {
        for partition in assigned where partitions[partition] == nil || revoking.contains(partition) {
            partitions[partition] = []
            revoking.remove(partition)
        }
    }

    /// What became of an offered record.
    enum Queued: Sendable, Equatable {
        /// Not this worker's (not owned, being revoked, or stopping): the next owner reads it.
        case dropped
        case queued
        /// Nothing to run (it was dead-lettered) and it let the partition's offset move.
        case storeOffset(Int64)
    }

    /// Queues a record of a partition; `lane` nil when there is nothing to run.
    mutating func enqueue(_ partition: TopicPartition, offset: Int64, lane: String?, payload: Payload) -> Queued {
        guard !stopping, partitions[partition] != nil, !revoking.contains(partition) else { return .dropped }
        partitions[partition]!.append(Entry(offset: offset, lane: lane, payload: payload, phase: lane == nil ? .done : .queued))
        guard lane == nil else { return .queued }
        return advance(partition).map(Queued.storeOffset) ?? .queued
    }

    /// Marks and returns every queued task whose lane has room: no task of the lane still
    /// reading pages and fewer than `tasksPerLane` running, in offset order; different lanes
    /// side by side.
    mutating func startable() -> [Start] {
        guard !stopping else { return [] }
        var starts: [Start] = []
        for partition in partitions.keys.sorted(by: { $0.description < $1.description }) where !revoking.contains(partition) {
            for index in partitions[partition]!.indices {
                let entry = partitions[partition]![index]
                guard entry.phase == .queued, let lane = entry.lane, !readingLanes.contains(lane),
                      busyLanes[lane, default: 0] < tasksPerLane else { continue }
                busyLanes[lane, default: 0] += 1
                readingLanes.insert(lane)
                partitions[partition]![index].phase = .running
                starts.append(Start(partition: partition, offset: entry.offset, lane: lane, payload: entry.payload))
            }
        }
        return starts
    }

    /// A task ended: its lane has room again; a finished task may let the partition's offset move
    /// (returned), a handed-back one waits to run again if the partition is read again.
    mutating func finish(_ key: Key, lane: String, handedBack: Bool) -> Int64? {
        if let running = busyLanes[lane] { busyLanes[lane] = running > 1 ? running - 1 : nil }
        guard let index = partitions[key.partition]?.firstIndex(where: { $0.offset == key.offset }) else {
            readingLanes.remove(lane)
            return nil
        }
        if !partitions[key.partition]![index].drained { readingLanes.remove(lane) }
        partitions[key.partition]![index].phase = handedBack ? .queued : .done
        partitions[key.partition]![index].drained = false
        return handedBack ? nil : advance(key.partition)
    }

    /// A running task has every page on the wire: the lane's next task may start beside it.
    /// Returns whether that changed anything (the caller then starts what is startable).
    mutating func drained(_ key: Key, lane: String) -> Bool {
        guard let index = partitions[key.partition]?.firstIndex(where: { $0.offset == key.offset }),
              partitions[key.partition]![index].phase == .running, !partitions[key.partition]![index].drained else { return false }
        partitions[key.partition]![index].drained = true
        readingLanes.remove(lane)
        return true
    }

    /// Drops finished entries at the partition's front; the offset to store, if it moved.
    private mutating func advance(_ partition: TopicPartition) -> Int64? {
        guard var entries = partitions[partition] else { return nil }
        var next: Int64?
        while let first = entries.first, first.phase == .done {
            next = first.offset + 1
            entries.removeFirst()
        }
        partitions[partition] = entries
        return next
    }

    /// Starts giving partitions up; returns their running tasks, which the caller stops.
    mutating func beginRevoke(_ revoked: [TopicPartition]) -> [Key] {
        var running: [Key] = []
        for partition in revoked {
            guard let entries = partitions[partition] else { continue }
            revoking.insert(partition)
            running += entries.filter { $0.phase == .running }.map { Key(partition: partition, offset: $0.offset) }
        }
        return running
    }

    /// The partitions are gone (unless assigned again meanwhile).
    mutating func endRevoke(_ revoked: [TopicPartition]) {
        for partition in revoked where revoking.contains(partition) {
            partitions.removeValue(forKey: partition)
            revoking.remove(partition)
        }
    }

    /// Stops taking tasks; returns the running ones, which the caller stops.
    mutating func stop() -> [Key] {
        stopping = true
        return partitions.flatMap { partition, entries in
            entries.filter { $0.phase == .running }.map { Key(partition: partition, offset: $0.offset) }
        }
    }

    /// Entries of a partition this worker owns (tests look at them).
    func entries(of partition: TopicPartition) -> [Entry]? { partitions[partition] }
}
