internal import CEpoll
import Foundation
import PushfanCrypto
import PushfanHTTP2
import PushfanSupport
import Synchronization

/// One event-loop thread: an epoll instance, the connections it owns, and everything it
/// needs per request without locks (token cache, fault settings copy, random numbers, log
/// buffer, delayed responses).
///
/// `@unchecked Sendable`: after `init`, only `run()`'s thread touches the loop's state,
/// except `stats` and `inbox` (each `Locked`) and `wake()`/`requestStop()` (an eventfd
/// write and an atomic).
final class EventLoop: @unchecked Sendable {
    let index: Int
    /// Set by the simulator right after init, before the thread starts; the simulator
    /// outlives its loops (it joins their threads in `stop`).
    unowned(unsafe) var simulator: APNsSimulator!
    let stats = Locked(ThreadStats())

    private let epoll: Int32
    private let wakeFD: Int32
    private let listenFD: Int32
    private let inbox = Locked<[Int32]>([])
    private let stopRequested = Atomic<Bool>(false)

    // Loop-thread state.
    private var connections: [UInt64: Connection] = [:]
    private var nextConnectionID: UInt64 = 2
    private(set) var faults = FaultSettings()
    private var faultsVersion = -1
    var tokenCache = TokenCache()
    var random: FastRandom
    var logBuffer: [UInt8] = []
    private var timers = TimerHeap()
    /// Allowed bundle ids per key index (nil entry: any), refreshed when a new key appears.
    private var keyTopics: [Set<String>?] = []
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    /// Response headers, reused: nghttp2 copies them when a response is submitted.
    let responseHeaders = HTTP2Headers(bytes: 1024, entries: 8)
    // The simulator's fixed configuration, read once (not through the simulator per request).
    private(set) var authority: ProviderAuthority?
    private(set) var rules: DeviceRules?
    private(set) var sandbox = true
    private(set) var logging = false
    private(set) var logPayloads = false
    /// What `RequestJudge` reads: this loop's token table and key topics and the
    /// configuration, made once the configuration is read (the caller sets the faults in
    /// force, which change at runtime).
    private(set) lazy var judgeContext: JudgeContext = {
        JudgeContext(
            authority: authority,
            verify: { [unowned self] authorization, authority, now in self.tokenCache.verify(authorization: authorization, authority: authority, now: now) },
            allowedTopics: { [unowned self] keyIndex, authority in self.allowedTopics(keyIndex: keyIndex, authority: authority) },
            faults: faults, deviceRules: rules, channels: simulator.channels)
    }()

    private static let listenerID: UInt64 = 0
    private static let wakeID: UInt64 = 1

    init(index: Int, listener: Int32) throws(SimConfigurationError) {
        self.index = index
        listenFD = listener
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard epoll >= 0, wakeFD >= 0 else { throw SimConfigurationError("epoll/eventfd setup failed (errno \(errno))") }
        random = FastRandom(seed: Crypto.randomBytes(8).reduce(0) { $0 << 8 | UInt64($1) })
        register(wakeFD, id: Self.wakeID, events: EPOLLIN.rawValue)
        if listener >= 0 { register(listener, id: Self.listenerID, events: EPOLLIN.rawValue) }
    }

    deinit {
        readBuffer.deallocate()
    }

    // MARK: - Cross-thread entry points

    /// Takes over an accepted socket (from the listening loop's thread).
    func adopt(_ fd: Int32) {
        inbox.withLock { $0.append(fd) }
        wake()
    }

    func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    func requestStop() {
        stopRequested.store(true, ordering: .releasing)
        wake()
    }

    // MARK: - The loop

    func run() {
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        if case .token(let authority) = simulator.configuration.auth { self.authority = authority }
        rules = simulator.configuration.rules.isEmpty ? nil : simulator.configuration.rules
        sandbox = simulator.configuration.sandbox
        logging = simulator.logDescriptor >= 0
        logPayloads = logging && simulator.configuration.logPayloads
        refreshFaults()
        while !stopRequested.load(ordering: .acquiring) {
            let timeout = timers.millisecondsUntilNext(now: SystemClock.monotonicMillis())
            let count = epoll_wait(epoll, events, Int32(capacity), timeout)
            if count < 0 && errno != EINTR { break }
            refreshFaults()
            for slot in 0..<max(0, Int(count)) {
                let event = events[slot]
                let id = event.data.u64
                switch id {
                case Self.listenerID: acceptConnections()
                case Self.wakeID:
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    for fd in inbox.withLock({ fds -> [Int32] in defer { fds.removeAll() }; return fds }) { addConnection(fd) }
                default:
                    guard let connection = connections[id] else { continue }
                    connection.handle(events: event.events)
                    if connection.isClosed { remove(connection) }
                }
            }
            fireTimers()
        }
        for connection in connections.values { connection.close(); }
        connections.removeAll()
        for fd in inbox.withLock({ $0 }) { close(fd) }
        if listenFD >= 0 { close(listenFD) }
        close(wakeFD)
        close(epoll)
    }

    private func refreshFaults() {
        let version = simulator.faultsVersion.load(ordering: .acquiring)
        guard version != faultsVersion else { return }
        faultsVersion = version
        faults = simulator.faultSettings
        for connection in connections.values {
            connection.updateAdvertisedStreams()
            connection.flush()
            if connection.isClosed { remove(connection) }
        }
    }

    private func acceptConnections() {
        while true {
            let fd = pushfan_accept_nonblocking(listenFD)
            if fd < 0 {
                if errno == EINTR { continue }
                return  // EAGAIN, or a transient error (EMFILE...): try on the next readiness
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            simulator.assign(fd)
        }
    }

    private func addConnection(_ fd: Int32) {
        let id = nextConnectionID
        nextConnectionID += 1
        // The connection id in logs is unique across loops: loop index in the low byte.
        let connection: Connection
        do {
            connection = try Connection(loop: self, fd: fd, id: id, logID: id << 8 | UInt64(index))
        } catch {
            close(fd)
            return
        }
        connections[id] = connection
        stats.withLock { $0.connectionsAccepted += 1 }
        register(fd, id: id, events: EPOLLIN.rawValue)
        connection.start()
        if connection.isClosed { remove(connection) }
    }

    private func remove(_ connection: Connection) {
        if connections.removeValue(forKey: connection.id) != nil {
            stats.withLock { $0.connectionsClosed += 1 }
        }
    }

    func register(_ fd: Int32, id: UInt64, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = id
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    func modify(_ fd: Int32, id: UInt64, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = id
        epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event)
    }

    func unregister(_ fd: Int32) {
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
    }

    // MARK: - Time, timers, log

    /// The simulator's clock (wall clock plus the control offset), ms since the epoch.
    func nowMillis() -> Int64 {
        let spec = SystemClock.machineTime()
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000 + Int64(faults.clockOffsetSeconds * 1000)
    }

    func schedule(after milliseconds: Double, connection: Connection, streamID: Int32, response: Response) {
        let due = SystemClock.monotonicMillis() + Int64(milliseconds.rounded(.up))
        timers.push(TimerHeap.Entry(due: due, connectionID: connection.id, streamID: streamID, response: response))
    }

    private func fireTimers() {
        guard !timers.isEmpty else { return }
        let now = SystemClock.monotonicMillis()
        var touched: [UInt64: Connection] = [:]
        while let entry = timers.popDue(now: now) {
            guard let connection = connections[entry.connectionID] else { continue }
            connection.send(entry.response, streamID: entry.streamID)
            touched[entry.connectionID] = connection
        }
        for connection in touched.values {
            connection.flush()
            if connection.isClosed { remove(connection) }
        }
    }

    /// Writes buffered log lines (before responses go out, so a client that saw its 200
    /// finds the line).
    func flushLog() {
        guard !logBuffer.isEmpty else { return }
        let fd = simulator.logDescriptor
        logBuffer.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 { if errno == EINTR { continue } else { break } }
                offset += written
            }
        }
        logBuffer.removeAll(keepingCapacity: true)
    }

    /// Allowed bundle ids for a key (nil: any).
    func allowedTopics(keyIndex: Int, authority: ProviderAuthority) -> Set<String>? {
        guard keyIndex >= 0 else { return nil }
        if keyIndex >= keyTopics.count {
            while keyTopics.count <= keyIndex { keyTopics.append(authority.key(at: keyTopics.count).topics) }
        }
        return keyTopics[keyIndex]
    }
}

/// A response waiting to be sent.
enum Response {
    case accepted(apnsID: [UInt8], uniqueID: [UInt8]?)
    case rejected(SimRejection, apnsID: [UInt8])
    case refused
    case json(status: Int, body: [UInt8])
    /// A channel management request's answer, with its `apns-request-id`.
    case channel(ChannelRules.Answer, requestID: [UInt8])
}

/// Delayed responses by due time (a binary min-heap).
struct TimerHeap {
    struct Entry {
        let due: Int64
        let connectionID: UInt64
        let streamID: Int32
        let response: Response
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }

    func millisecondsUntilNext(now: Int64) -> Int32 {
        guard let first = entries.first else { return -1 }
        return Int32(clamping: max(0, first.due - now))
    }

    mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].due < entries[parent].due else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popDue(now: Int64) -> Entry? {
        guard let first = entries.first, first.due <= now else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < entries.count, entries[left].due < entries[smallest].due { smallest = left }
                if right < entries.count, entries[right].due < entries[smallest].due { smallest = right }
                if smallest == parent { break }
                entries.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return first
    }
}
