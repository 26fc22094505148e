import Dispatch
import PushfanMessages
import PushfanSupport
import Synchronization

/// The store's connections and the backend that speaks their dialect. A few connections,
/// each with the serial queue every call on it runs on. A call goes to the connection with
/// the fewest calls queued (in turn among equals), so independent work (two shards of one
/// audience, a claim while the next page is read) runs in parallel and a long scan on one
/// connection does not hold up the short calls behind it; each call is complete on one connection (its own statement or
/// transaction), and both databases show every connection what another committed.
final class StoreExecutor: @unchecked Sendable {
    /// One connection, only touched on its queue, which is what makes this type sendable.
    private final class Lane: Sendable {
        let queue: DispatchQueue
        nonisolated(unsafe) let connection: any SQLConnection
        /// Calls queued or running on this connection.
        let load = Atomic<Int>(0)

        init(queue: DispatchQueue, connection: any SQLConnection) {
            self.queue = queue
            self.connection = connection
        }
    }

    /// Connections per store: enough for a scan to overlap with other work on a 2-core
    /// machine without multiplying the database's per-connection memory.
    static let connections = 2

    private let lanes: [Lane]
    private let next = Atomic<Int>(0)
    /// Device rows the audience reads have returned, for tests and diagnostics.
    let audienceRowsRead = Atomic<Int>(0)
    /// Every difference between SQLite and PostgreSQL the concerns need.
    let backend: any SQLBackend
    /// Durations and errors of calls, once `DeviceStore.exportMetrics` asked for them.
    let metrics = Locked<StoreCallMetrics?>(nil)
    /// The store's time: what rows are stamped with, how long a cached read counts.
    let clock: any ServiceClock

    private init(connections: [any SQLConnection], backend: any SQLBackend, clock: any ServiceClock) {
        lanes = connections.enumerated().map { Lane(queue: DispatchQueue(label: "pushfan.store.\($0.offset)"), connection: $0.element) }
        self.backend = backend
        self.clock = clock
    }

    static func make(backend: any SQLBackend, clock: any ServiceClock) async throws(StoreError) -> StoreExecutor {
        let made = await BlockingWork.run { () -> Result<UncheckedBox<[any SQLConnection]>, StoreError> in
            do throws(StoreError) {
                var connections: [any SQLConnection] = []
                for _ in 0..<Self.connections { connections.append(try backend.connect()) }
                return .success(UncheckedBox(connections))
            } catch {
                return .failure(error)
            }
        }
        return StoreExecutor(connections: try made.get().value, backend: backend, clock: clock)
    }

    /// Runs `body` on the least loaded connection, or on connection `lane` when given.
    /// `function` and `file` name the call in the metrics (the concern's method calling).
    func run<T: Sendable>(
        lane index: Int? = nil, function: StaticString = #function, file: StaticString = #fileID,
        _ body: @escaping @Sendable (any SQLConnection) throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        let lane = index.map { lanes[$0 % lanes.count] } ?? leastLoaded()
        lane.load.add(1, ordering: .relaxed)
        let box = UncheckedBox(lane.connection)
        let started = clock.now
        let result: Result<T, StoreError> = await withCheckedContinuation { continuation in
            lane.queue.async {
                let result: Result<T, StoreError>
                do throws(StoreError) { result = .success(try body(box.value)) } catch { result = .failure(error) }
                // Free before the caller resumes: its next call must not see this lane as
                // busy and queue behind a call blocked on the other (a write waiting for a lock).
                lane.load.subtract(1, ordering: .relaxed)
                continuation.resume(returning: result)
            }
        }
        observe(result, since: started, function: function, file: file)
        return try result.get()
    }

    private func observe<T>(_ result: Result<T, StoreError>, since started: ContinuousClock.Instant, function: StaticString, file: StaticString) {
        guard let metrics = metrics.withLock({ $0 }) else { return }
        let call = StoreCallMetrics.cachedName(function: function, file: file)
        metrics.durations.observe((clock.now - started).seconds, [call])
        if case .failure(let error) = result { metrics.errors.add(1, [call, error.code.rawValue]) }
    }

    /// The connection with the fewest calls queued; among equals, the next in turn.
    private func leastLoaded() -> Lane {
        let start = next.wrappingAdd(1, ordering: .relaxed).oldValue
        var best = lanes[start % lanes.count]
        for offset in 1..<lanes.count {
            let lane = lanes[(start + offset) % lanes.count]
            if lane.load.load(ordering: .relaxed) < best.load.load(ordering: .relaxed) { best = lane }
        }
        return best
    }

    /// `run` for callers on a thread of their own (never Swift's cooperative pool): waits on
    /// the lane's queue.
    func runBlocking<T>(
        function: StaticString = #function, file: StaticString = #fileID, _ body: (any SQLConnection) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let lane = leastLoaded()
        lane.load.add(1, ordering: .relaxed)
        defer { lane.load.subtract(1, ordering: .relaxed) }
        let started = clock.now
        let result: Result<T, StoreError> = lane.queue.sync {
            do throws(StoreError) { return .success(try body(lane.connection)) } catch { return .failure(error) }
        }
        observe(result, since: started, function: function, file: file)
        return try result.get()
    }

    /// Rows per multi-row statement: far below SQLite's and PostgreSQL's parameter limits.
    static let bulkChunk = 400

    /// `items` in slices of `bulkChunk`.
    static func chunks<C: RandomAccessCollection>(_ items: C) -> [C.SubSequence] where C.Index == Int {
        stride(from: items.startIndex, to: items.endIndex, by: bulkChunk).map { items[$0..<min($0 + bulkChunk, items.endIndex)] }
    }

    static func requireApp(_ connection: any SQLConnection, _ app: String) throws(StoreError) {
        guard try connection.queryOne("SELECT 1 FROM apps WHERE app = \(app)", { $0.int(0) }) != nil else {
            throw StoreError.notFound("unknown app '\(app)'; add it with `pushfan apps add`")
        }
    }
}

/// Carries a value confined by other means (here: the store's serial queue) across isolation.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// `pushfan_store_call_duration_seconds` and `pushfan_store_errors_total`, by call: the
/// concern and its method (`DeliveryLedger.claim`), a bounded set.
struct StoreCallMetrics: Sendable {
    let durations: Histogram
    let errors: Counter

    /// Names already built, by the addresses of their two literals: a store call happens
    /// thousands of times a second, and splitting its strings each time showed in profiles.
    private static let known = Locked<[NameKey: String]>([:])

    private struct NameKey: Hashable {
        let function: UInt
        let file: UInt
    }

    /// `name(function:file:)`, built once per call site.
    static func cachedName(function: StaticString, file: StaticString) -> String {
        guard function.hasPointerRepresentation, file.hasPointerRepresentation else { return name(function: function, file: file) }
        let key = NameKey(function: UInt(bitPattern: function.utf8Start), file: UInt(bitPattern: file.utf8Start))
        if let name = known.withLock({ $0[key] }) { return name }
        let name = name(function: function, file: file)
        known.withLock { $0[key] = name }
        return name
    }

    /// `PushfanStore/DeliveryLedger.swift` and `claim(campaign:targets:)` → `DeliveryLedger.claim`.
    static func name(function: StaticString, file: StaticString) -> String {
        let path = file.description
        let concern = path.split(separator: "/").last.map { $0.hasSuffix(".swift") ? $0.dropLast(6) : $0 } ?? ""
        let method = function.description.split(separator: "(", maxSplits: 1).first ?? ""
        return "\(concern).\(method)"
    }
}
