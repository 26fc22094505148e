internal import CEpoll
import Foundation
import PushfanMessages
import PushfanSupport
import Synchronization

/// What the server does with a request once its head is in, decided before its body is
/// read: refused (a failed authentication, no such route) costs the client no upload and
/// the server no memory; accepted, the body is read and `run` answers the whole request.
package enum Admission: Sendable {
    case refuse(HTTPResponse)
    case accept(@Sendable (HTTPRequest) async -> HTTPResponse)
}

/// An HTTP/1.1 server on one epoll thread of its own, written for the open internet: heads
/// are read strictly (``RequestHeadParser``), each phase of a request has a deadline that
/// bytes trickling in do not reset (head, body, idle), connections are bounded in total and
/// per address (503 with Retry-After past either), and a request is admitted (routed and
/// authenticated) before its body is read. Handlers run as Swift tasks, never on the loop's
/// thread, so a slow store call holds up only its own connection. docs/api.md says why this
/// replaced libmicrohttpd.
package final class HTTPServer: Sendable {
    package typealias Admit = @Sendable (HTTPRequest) async -> Admission
    package typealias Handler = @Sendable (HTTPRequest) async -> HTTPResponse
    /// Told of each answer the server gives by itself, before any handler (400, 408, 413,
    /// 431, 503...), so that it is counted like the others.
    package typealias Refusals = @Sendable (HTTPRequest, HTTPResponse) -> Void
    /// Answers a request on the loop's own thread, without a task, when it returns a
    /// response (nil: the handler answers). For answers that only read memory, such as a
    /// metrics page, which must come back even while every task thread is busy.
    package typealias Immediate = @Sendable (HTTPRequest) -> HTTPResponse?

    private let loop: ServerLoop
    private let done = DispatchSemaphore(value: 0)
    /// The port it listens on.
    package let port: Int

    /// Starts listening on `port` (0: a free one) of the loopback interface, or of every
    /// interface when `loopbackOnly` is false.
    package init(
        port: Int, loopbackOnly: Bool, policy: ConnectionPolicy = ConnectionPolicy(), refused: @escaping Refusals = { _, _ in },
        immediate: Immediate? = nil, admit: @escaping Admit
    ) throws {
        let listener: (fd: Int32, port: Int)
        switch TCPListener.open(host: loopbackOnly ? "127.0.0.1" : "0.0.0.0", port: port) {
        case .success(let opened): listener = opened
        case .failure(let error): throw APIError(500, "listen_failed", error.description)
        }
        loop = try ServerLoop(listener: listener.fd, policy: policy, admit: admit, refused: refused, immediate: immediate)
        self.port = listener.port
        let loop = loop
        LoopThread.start(name: "pushfan.http", done: done) { loop.run() }
    }

    /// A server whose every request is accepted and answered by `handler`.
    package convenience init(
        port: Int, loopbackOnly: Bool, policy: ConnectionPolicy = ConnectionPolicy(), refused: @escaping Refusals = { _, _ in },
        immediate: Immediate? = nil, handler: @escaping Handler
    ) throws {
        try self.init(port: port, loopbackOnly: loopbackOnly, policy: policy, refused: refused, immediate: immediate, admit: { _ in .accept(handler) })
    }

    /// Stops accepting, closes idle connections, lets the requests running finish (at most
    /// `timeout`), ends streaming bodies, then closes every connection.
    package func stop(timeout: Duration = .seconds(5)) async {
        loop.post(.stopAccepting)
        // On the machine's time, like the loop's own deadlines: connections drain in real time.
        let clock = SystemClock()
        let deadline = clock.now + timeout
        for stream in loop.streams.withLock({ Array($0.values) }) { stream.close() }
        while loop.busy && clock.now < deadline {
            try? await clock.sleep(for: .milliseconds(20))
        }
        loop.post(.exit)
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                self.done.wait()
                continuation.resume()
            }
        }
    }
}

/// What other threads tell the loop; delivered through the inbox and an eventfd.
enum LoopMessage: Sendable {
    /// A request's answer.
    case respond(connection: UInt64, HTTPResponse, bodyUnread: Bool)
    /// An admitted request wants its body: resumed with it, or nil if the connection is gone.
    case wantBody(connection: UInt64, CheckedContinuation<[UInt8]?, Never>)
    /// A streaming body has bytes (or ended).
    case streamReady(connection: UInt64)
    case stopAccepting
    case exit
}

/// The server's loop: the epoll instance, the listener, the connections and their counts.
/// `@unchecked Sendable`: after `init`, only `run()`'s thread touches the loop's state,
/// except the inbox, `streams` (each `Locked`) and the atomics.
final class ServerLoop: @unchecked Sendable {
    let policy: ConnectionPolicy
    let admit: HTTPServer.Admit
    let refused: HTTPServer.Refusals
    let immediate: HTTPServer.Immediate?
    /// Streaming bodies being sent now, so that stopping can end them.
    let streams = Locked<[UInt64: EventStream]>([:])
    /// Requests whose task has not answered yet.
    let running = Atomic<Int>(0)

    private let epoll: Int32
    private let wakeFD: Int32
    private var listenFD: Int32
    /// Messages for the loop; nil once it has exited (a body wanted then is answered nil).
    private let inbox = Locked<[LoopMessage]?>([])

    // Loop-thread state.
    private var connections: [UInt64: HTTPConnection] = [:]
    private(set) var counts = ConnectionCounts()
    private var nextID: UInt64 = 2
    private var exiting = false
    /// Taken out of epoll after an accept ran out of descriptors.
    private var listenerResting = false
    private(set) var stopping = false
    /// Monotonic milliseconds, read once per turn of the loop.
    private(set) var now: Int64 = 0
    private var nextSweep: Int64 = 0
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    private(set) var dateHeader = HTTPDate()

    private static let listenerID: UInt64 = 0
    private static let wakeID: UInt64 = 1

    init(listener: Int32, policy: ConnectionPolicy, admit: @escaping HTTPServer.Admit, refused: @escaping HTTPServer.Refusals, immediate: HTTPServer.Immediate?) throws {
        (self.policy, self.admit, self.refused, self.immediate) = (policy, admit, refused, immediate)
        listenFD = listener
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard epoll >= 0, wakeFD >= 0 else {
            close(listener)
            throw APIError(500, "listen_failed", "epoll/eventfd setup failed (errno \(errno))")
        }
        dateHeader.refresh()
        register(wakeFD, id: Self.wakeID, events: EPOLLIN.rawValue)
        register(listener, id: Self.listenerID, events: EPOLLIN.rawValue)
    }

    /// The descriptors the tasks post through close only when the last task is done with the
    /// loop (each holds it), so a late post never writes to a reused descriptor.
    deinit {
        close(wakeFD)
        close(epoll)
        readBuffer.deallocate()
    }

    /// Requests still running or streams still open (what stopping waits for).
    var busy: Bool { running.load(ordering: .acquiring) > 0 || !streams.withLock(\.isEmpty) }

    func post(_ message: LoopMessage) {
        let taken = inbox.withLock { inbox -> Bool in
            guard inbox != nil else { return false }
            inbox!.append(message)
            return true
        }
        guard taken else {
            if case .wantBody(_, let continuation) = message { continuation.resume(returning: nil) }
            return
        }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    func run() {
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        now = SystemClock.monotonicMillis()
        while !exiting {
            let count = epoll_wait(epoll, events, Int32(capacity), Int32(max(1, nextSweep - now)))
            if count < 0 && errno != EINTR { break }
            now = SystemClock.monotonicMillis()
            for slot in 0..<max(0, Int(count)) {
                let event = events[slot]
                switch event.data.u64 {
                case Self.listenerID: acceptConnections()
                case Self.wakeID:
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    for message in inbox.withLock({ messages -> [LoopMessage] in defer { messages = [] }; return messages ?? [] }) { deliver(message) }
                case let id:
                    guard let connection = connections[id] else { continue }
                    connection.ready(events: event.events)
                    if connection.isClosed { remove(connection) }
                }
            }
            if now >= nextSweep { sweep() }
        }
        for connection in Array(connections.values) { connection.close() }
        connections.removeAll()
        for message in inbox.withLock({ messages -> [LoopMessage] in defer { messages = nil }; return messages ?? [] }) {
            if case .wantBody(_, let continuation) = message { continuation.resume(returning: nil) }
        }
        if listenFD >= 0 { close(listenFD) }
    }

    private func deliver(_ message: LoopMessage) {
        switch message {
        case .respond(let id, let response, let bodyUnread):
            guard let connection = connections[id] else { return }
            connection.taskAnswered(response, bodyUnread: bodyUnread)
            if connection.isClosed { remove(connection) }
        case .wantBody(let id, let continuation):
            guard let connection = connections[id] else { return continuation.resume(returning: nil) }
            connection.readBody(then: continuation)
            if connection.isClosed { remove(connection) }
        case .streamReady(let id):
            guard let connection = connections[id] else { return }
            connection.advance()
            if connection.isClosed { remove(connection) }
        case .stopAccepting:
            stopping = true
            if listenFD >= 0 {
                epoll_ctl(epoll, EPOLL_CTL_DEL, listenFD, nil)
                close(listenFD)
                listenFD = -1
            }
            for connection in Array(connections.values) {
                connection.stopWhenIdle()
                if connection.isClosed { remove(connection) }
            }
        case .exit:
            exiting = true
        }
    }

    private func acceptConnections() {
        while listenFD >= 0 {
            let fd = pushfan_accept_nonblocking(listenFD)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS {
                    // Out of descriptors or memory: the listener would wake the loop at once
                    // and forever; it rests until the next sweep.
                    epoll_ctl(epoll, EPOLL_CTL_DEL, listenFD, nil)
                    listenerResting = true
                }
                return
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let peer = TCPListener.peerAddress(fd)
            let verdict = counts.opened(peer: peer, policy: policy)
            if verdict == .drop {
                close(fd)
                continue
            }
            let id = nextID
            nextID += 1
            let connection = HTTPConnection(loop: self, fd: fd, id: id, peer: peer, verdict: verdict)
            connections[id] = connection
            register(fd, id: id, events: EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue)
            connection.advance()
            if connection.isClosed { remove(connection) }
        }
    }

    private func remove(_ connection: HTTPConnection) {
        guard connections.removeValue(forKey: connection.id) != nil else { return }
        counts.closed(peer: connection.peer, wasServed: connection.served)
    }

    /// Deadlines, every 200 ms (a connection's deadline is at most that late).
    private func sweep() {
        nextSweep = now + 200
        dateHeader.refresh()
        if listenerResting, listenFD >= 0 {
            listenerResting = false
            register(listenFD, id: Self.listenerID, events: EPOLLIN.rawValue)
        }
        for connection in Array(connections.values) {
            connection.checkDeadlines()
            if connection.isClosed { remove(connection) }
        }
    }

    private func register(_ fd: Int32, id: UInt64, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = id
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

}

/// The `Date` header's value, formatted once a second.
struct HTTPDate {
    private(set) var value = ""
    private var second = -1

    mutating func refresh() {
        var now = SystemClock.machineTime().tv_sec
        guard Int(now) != second else { return }
        second = Int(now)
        var parts = tm()
        gmtime_r(&now, &parts)
        var text = [CChar](repeating: 0, count: 40)
        let length = strftime(&text, text.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        value = String(decoding: text.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
