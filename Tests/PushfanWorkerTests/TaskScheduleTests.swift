import Testing
@testable import PushfanWorker
import PushfanKafka

/// The scheduler's bookkeeping without Kafka or tasks: lanes run a bounded number of tasks at a time, offsets
/// are stored only up to the first unfinished task, revocation and stop hand back.
@Suite struct TaskScheduleTests {
    typealias Schedule = TaskSchedule<String>
    let p0 = TopicPartition(topic: "pushfan.tasks", partition: 0)
    let p1 = TopicPartition(topic: "pushfan.tasks", partition: 1)

    func key(_ partition: TopicPartition, _ offset: Int64) -> Schedule.Key { Schedule.Key(partition: partition, offset: offset) }

    @Test("one task per lane at a time when so limited, lanes side by side; records of partitions not owned are dropped")
    func lanes() {
        var schedule = Schedule(tasksPerLane: 1)
        #expect(schedule.enqueue(p0, offset: 0, lane: "shop#0", payload: "a") == .dropped)
        schedule.assign([p0])
        #expect(schedule.enqueue(p0, offset: 0, lane: "shop#0", payload: "a") == .queued)
        #expect(schedule.enqueue(p0, offset: 1, lane: "shop#0", payload: "b") == .queued)
        #expect(schedule.enqueue(p0, offset: 2, lane: "news#0", payload: "c") == .queued)
        #expect(schedule.startable().map(\.payload) == ["a", "c"])
        #expect(schedule.startable().isEmpty, "started tasks do not start twice, and shop#0 is busy")
        #expect(schedule.finish(key(p0, 0), lane: "shop#0", handedBack: false) == 1)
        #expect(schedule.startable().map(\.payload) == ["b"])
    }

    @Test("a lane's next task starts once the running one has every page on the wire; two at most when so limited")
    func nextTaskStartsWhenTheRunningOneDrains() {
        var schedule = Schedule(tasksPerLane: 2)
        schedule.assign([p0])
        for (offset, payload) in [(0, "a"), (1, "b"), (2, "c")] { _ = schedule.enqueue(p0, offset: Int64(offset), lane: "shop#0", payload: payload) }
        #expect(schedule.startable().map(\.payload) == ["a"])
        #expect(schedule.startable().isEmpty, "a is still reading pages")
        let first = schedule.drained(key(p0, 0), lane: "shop#0")
        let again = schedule.drained(key(p0, 0), lane: "shop#0")
        #expect(first)
        #expect(!again, "once")
        #expect(schedule.startable().map(\.payload) == ["b"])
        let second = schedule.drained(key(p0, 1), lane: "shop#0")
        #expect(second)
        #expect(schedule.startable().isEmpty, "two of shop#0 are running")
        #expect(schedule.finish(key(p0, 1), lane: "shop#0", handedBack: false) == nil, "the earlier task is still running: the offset stays")
        #expect(schedule.startable().map(\.payload) == ["c"])
        #expect(schedule.startable().isEmpty, "c is reading")
        #expect(schedule.finish(key(p0, 0), lane: "shop#0", handedBack: false) == 2)
        #expect(schedule.startable().isEmpty, "c is still reading")
    }

    @Test("tasks finishing out of order store the offset only up to the first unfinished one")
    func offsetsInOrder() {
        var schedule = Schedule()
        schedule.assign([p0])
        for (offset, lane) in [(10, "a#0"), (11, "b#0"), (12, "c#0")] { _ = schedule.enqueue(p0, offset: Int64(offset), lane: lane, payload: lane) }
        #expect(schedule.startable().count == 3)
        #expect(schedule.finish(key(p0, 12), lane: "c#0", handedBack: false) == nil)
        #expect(schedule.finish(key(p0, 11), lane: "b#0", handedBack: false) == nil)
        #expect(schedule.finish(key(p0, 10), lane: "a#0", handedBack: false) == 13, "all three are done: the offset passes them")
        #expect(schedule.entries(of: p0)?.isEmpty == true)
    }

    @Test("a record with nothing to run lets the offset pass it when it is at the front")
    func deadLetteredRecords() {
        var schedule = Schedule()
        schedule.assign([p0])
        #expect(schedule.enqueue(p0, offset: 5, lane: nil, payload: "poison") == .storeOffset(6))
        #expect(schedule.enqueue(p0, offset: 6, lane: "a#0", payload: "a") == .queued)
        #expect(schedule.enqueue(p0, offset: 7, lane: nil, payload: "poison") == .queued, "behind an unfinished task")
        _ = schedule.startable()
        #expect(schedule.finish(key(p0, 6), lane: "a#0", handedBack: false) == 8)
    }

    @Test("revoked mid-task: the running task is handed back, nothing new starts there, and the partition goes")
    func revokedMidTask() {
        var schedule = Schedule()
        schedule.assign([p0, p1])
        _ = schedule.enqueue(p0, offset: 0, lane: "a#0", payload: "running")
        _ = schedule.enqueue(p0, offset: 1, lane: "b#0", payload: "queued")
        _ = schedule.enqueue(p1, offset: 0, lane: "a#1", payload: "other")
        let started = schedule.startable()
        #expect(Set(started.map(\.payload)) == ["running", "queued", "other"])
        #expect(schedule.finish(key(p0, 1), lane: "b#0", handedBack: false) == nil)
        #expect(schedule.beginRevoke([p0]) == [key(p0, 0)])
        #expect(schedule.enqueue(p0, offset: 2, lane: "c#0", payload: "late") == .dropped)
        #expect(schedule.finish(key(p0, 0), lane: "a#0", handedBack: true) == nil, "handed back: the offset stays")
        #expect(schedule.startable().isEmpty, "a revoking partition starts nothing")
        schedule.endRevoke([p0])
        #expect(schedule.entries(of: p0) == nil)
        #expect(schedule.entries(of: p1)?.count == 1)
        // Assigned again later: it starts from what Kafka re-delivers.
        schedule.assign([p0])
        #expect(schedule.enqueue(p0, offset: 0, lane: "a#0", payload: "again") == .queued)
        #expect(schedule.startable().map(\.payload) == ["again"])
    }

    @Test("a partition assigned again while being revoked is kept")
    func reassignedDuringRevoke() {
        var schedule = Schedule()
        schedule.assign([p0])
        _ = schedule.beginRevoke([p0])
        schedule.assign([p0])
        schedule.endRevoke([p0])
        #expect(schedule.entries(of: p0) != nil)
        #expect(schedule.enqueue(p0, offset: 3, lane: "a#0", payload: "x") == .queued)
    }

    @Test("stop hands back every running task and takes nothing more")
    func stop() {
        var schedule = Schedule()
        schedule.assign([p0, p1])
        _ = schedule.enqueue(p0, offset: 0, lane: "a#0", payload: "a")
        _ = schedule.enqueue(p1, offset: 0, lane: "b#0", payload: "b")
        _ = schedule.enqueue(p1, offset: 1, lane: "b#0", payload: "c")
        _ = schedule.startable()
        #expect(Set(schedule.stop()) == [key(p0, 0), key(p1, 0)])
        #expect(schedule.enqueue(p0, offset: 1, lane: "d#0", payload: "d") == .dropped)
        #expect(schedule.startable().isEmpty)
    }

    @Test("3,000 queued tasks of one lane and a few of another run in offset order, one at a time, and the stored offset follows each")
    func longQueues() {
        var schedule = Schedule(tasksPerLane: 1)
        schedule.assign([p0, p1])
        for offset in 0..<3_000 { _ = schedule.enqueue(p0, offset: Int64(offset), lane: "shop#0", payload: "s\(offset)") }
        for offset in 0..<3 { _ = schedule.enqueue(p1, offset: Int64(offset), lane: "news#1", payload: "n\(offset)") }
        var started: [String] = []
        var stored: [Int64] = []
        while true {
            let starts = schedule.startable()
            guard !starts.isEmpty else { break }
            for start in starts {
                started.append(start.payload)
                if let next = schedule.finish(key(start.partition, start.offset), lane: start.lane, handedBack: false), start.partition == p0 { stored.append(next) }
            }
        }
        #expect(started.filter { $0.hasPrefix("s") } == (0..<3_000).map { "s\($0)" })
        #expect(started.filter { $0.hasPrefix("n") } == ["n0", "n1", "n2"])
        #expect(stored == (1...3_000).map(Int64.init))
        #expect(schedule.entries(of: p0)?.isEmpty == true && schedule.counts == (0, 0))
    }

    @Test("tasks handed back out of order run again in offset order, before the lane's later tasks")
    func handedBackInOrder() {
        var schedule = Schedule(tasksPerLane: 2)
        schedule.assign([p0])
        for offset in 0..<4 { _ = schedule.enqueue(p0, offset: Int64(offset), lane: "shop#0", payload: "t\(offset)") }
        #expect(schedule.startable().map(\.payload) == ["t0"])
        _ = schedule.drained(key(p0, 0), lane: "shop#0")
        #expect(schedule.startable().map(\.payload) == ["t1"])
        _ = schedule.drained(key(p0, 1), lane: "shop#0")
        #expect(schedule.finish(key(p0, 0), lane: "shop#0", handedBack: true) == nil)
        #expect(schedule.finish(key(p0, 1), lane: "shop#0", handedBack: true) == nil)
        #expect(schedule.counts == (4, 0))
        var order: [String] = []
        while let start = schedule.startable().first {
            order.append(start.payload)
            _ = schedule.finish(key(start.partition, start.offset), lane: start.lane, handedBack: false)
        }
        #expect(order == ["t0", "t1", "t2", "t3"])
    }
}

extension TaskSchedule {
    /// Entries of a partition this worker owns, from the first unfinished one on.
    func entries(of partition: TopicPartition) -> [Entry]? { partitions[partition].map { Array($0.live) } }
}
