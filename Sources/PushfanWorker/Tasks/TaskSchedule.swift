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

    /// Tasks queued and running, over every owned partition (a metric's scrape).
    var counts: (queued: Int, running: Int) {
        var queued = 0
        var running = 0
        for owned in partitions.values {
            for entry in owned.live where entry.lane != nil {
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

    /// One owned partition's entries in offset order from `head` on. Finished ones at the
    /// front are passed by moving `head` and dropped in bulk, so neither the front's
    /// advance nor a lookup by offset (a binary search) walks the whole queue: a worker may
    /// hold thousands of small tasks (transactional messages) in one partition.
    struct Owned: Sendable {
        var entries: [Entry] = []
        var head = 0

        var live: ArraySlice<Entry> { entries[head...] }

        func index(of offset: Int64) -> Int? {
            var low = head
            var high = entries.count
            while low < high {
                let middle = (low + high) / 2
                if entries[middle].offset < offset { low = middle + 1 } else { high = middle }
            }
            return low < entries.count && entries[low].offset == offset ? low : nil
        }

        /// Passes finished entries at the front; the offset to store, if it moved.
        mutating func advance() -> Int64? {
            var next: Int64?
            while head < entries.count, entries[head].phase == .done {
                next = entries[head].offset + 1
                head += 1
            }
            if head == entries.count {
                entries.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 1024, head * 2 > entries.count {
                entries.removeFirst(head)
                head = 0
            }
            return next
        }
    }

    /// A lane's queued tasks, oldest first from `head` (taken from the front without shifting the rest).
    private struct Line: Sendable {
        var keys: [Key] = []
        var head = 0

        var first: Key? { head < keys.count ? keys[head] : nil }
        var isEmpty: Bool { head == keys.count }

        mutating func removeFirst() {
            head += 1
            if head > 1024, head * 2 > keys.count {
                keys.removeFirst(head)
                head = 0
            }
        }

        /// A handed-back task goes before the later tasks of its partition.
        mutating func putBack(_ key: Key) {
            let at = keys[head...].firstIndex { $0.partition == key.partition && $0.offset > key.offset } ?? keys.endIndex
            keys.insert(key, at: at)
        }

        mutating func removeAll(in partition: TopicPartition) {
            keys = keys[head...].filter { $0.partition != partition }
            head = 0
        }
    }

    private(set) var partitions: [TopicPartition: Owned] = [:]
    /// Queued tasks per lane: what `startable` takes from, without looking at the tasks of
    /// lanes that have no room.
    private var waiting: [String: Line] = [:]
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
            forgetWaiting(in: partition)
            partitions[partition] = Owned()
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
        partitions[partition]!.entries.append(Entry(offset: offset, lane: lane, payload: payload, phase: lane == nil ? .done : .queued))
        if let lane {
            waiting[lane, default: Line()].keys.append(Key(partition: partition, offset: offset))
            return .queued
        }
        return partitions[partition]!.advance().map(Queued.storeOffset) ?? .queued
    }

    /// Marks and returns every queued task whose lane has room: no task of the lane still
    /// reading pages and fewer than `tasksPerLane` running, in offset order; different lanes
    /// side by side.
    mutating func startable() -> [Start] {
        guard !stopping else { return [] }
        var starts: [Start] = []
        for lane in Array(waiting.keys) where !readingLanes.contains(lane) && busyLanes[lane, default: 0] < tasksPerLane {
            guard let key = waiting[lane]?.first, !revoking.contains(key.partition) else { continue }
            waiting[lane]!.removeFirst()
            if waiting[lane]!.isEmpty { waiting[lane] = nil }
            guard let index = partitions[key.partition]?.index(of: key.offset) else { continue }
            busyLanes[lane, default: 0] += 1
            readingLanes.insert(lane)
            partitions[key.partition]!.entries[index].phase = .running
            starts.append(Start(partition: key.partition, offset: key.offset, lane: lane, payload: partitions[key.partition]!.entries[index].payload))
        }
        return starts.sorted { ($0.partition.description, $0.offset) < ($1.partition.description, $1.offset) }
    }

    /// A task ended: its lane has room again; a finished task may let the partition's offset move
    /// (returned), a handed-back one waits to run again if the partition is read again.
    mutating func finish(_ key: Key, lane: String, handedBack: Bool) -> Int64? {
        if let running = busyLanes[lane] { busyLanes[lane] = running > 1 ? running - 1 : nil }
        guard let index = partitions[key.partition]?.index(of: key.offset) else {
            readingLanes.remove(lane)
            return nil
        }
        if !partitions[key.partition]!.entries[index].drained { readingLanes.remove(lane) }
        partitions[key.partition]!.entries[index].phase = handedBack ? .queued : .done
        partitions[key.partition]!.entries[index].drained = false
        guard !handedBack else {
            waiting[lane, default: Line()].putBack(key)
            return nil
        }
        return partitions[key.partition]!.advance()
    }

    /// A running task has every page on the wire: the lane's next task may start beside it.
    /// Returns whether that changed anything (the caller then starts what is startable).
    mutating func drained(_ key: Key, lane: String) -> Bool {
        guard let index = partitions[key.partition]?.index(of: key.offset),
              partitions[key.partition]!.entries[index].phase == .running, !partitions[key.partition]!.entries[index].drained else { return false }
        partitions[key.partition]!.entries[index].drained = true
        readingLanes.remove(lane)
        return true
    }

    /// Drops the queued tasks of a partition from their lanes' lines.
    private mutating func forgetWaiting(in partition: TopicPartition) {
        for lane in Array(waiting.keys) {
            waiting[lane]!.removeAll(in: partition)
            if waiting[lane]!.isEmpty { waiting[lane] = nil }
        }
    }

    /// Starts giving partitions up; returns their running tasks, which the caller stops.
    mutating func beginRevoke(_ revoked: [TopicPartition]) -> [Key] {
        var running: [Key] = []
        for partition in revoked {
            guard let owned = partitions[partition] else { continue }
            revoking.insert(partition)
            running += owned.live.filter { $0.phase == .running }.map { Key(partition: partition, offset: $0.offset) }
        }
        return running
    }

    /// The partitions are gone (unless assigned again meanwhile).
    mutating func endRevoke(_ revoked: [TopicPartition]) {
        for partition in revoked where revoking.contains(partition) {
            partitions.removeValue(forKey: partition)
            forgetWaiting(in: partition)
            revoking.remove(partition)
        }
    }

    /// Stops taking tasks; returns the running ones, which the caller stops.
    mutating func stop() -> [Key] {
        stopping = true
        return partitions.flatMap { partition, owned in
            owned.live.filter { $0.phase == .running }.map { Key(partition: partition, offset: $0.offset) }
        }
    }
}
