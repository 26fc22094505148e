internal import CEpoll
import Foundation
import PushfanMessages
import PushfanSupport

/// One client connection on the server's loop: the bytes read and not yet used, the phase
/// of the request being served and when that phase began (its deadline), the answer being
/// written. Requests on a connection are served one after another; bytes of a pipelined
/// next request wait in `input` until the answer before it is written.
final class HTTPConnection {
    enum Phase {
        /// Kept alive (or just opened): no byte of a request yet.
        case waiting
        /// Some of a request's head is in.
        case head
        /// The head is in; a task decides (and, once the body is read, answers). Nothing is
        /// read meanwhile.
        case admitting
        /// Admitted: reading the body for the task waiting on it.
        case body
        /// Writing an answer.
        case writing
        /// Writing a streaming body as its bytes come.
        case streaming(EventStream)
        /// The last answer is written and the sending side shut: the client's remaining
        /// bytes are read and dropped, so that closing does not reset the answer away.
        case lingering
    }

    let id: UInt64
    let peer: String
    /// Counted against the limits (false: a refused connection, answered 503).
    let served: Bool
    private let refusal: APIError?
    private unowned let loop: ServerLoop
    private var fd: Int32

    private var phase = Phase.waiting
    private var phaseSince: Int64
    private var input: [UInt8] = []
    private var inputStart = 0
    private var scanFrom = 0
    private var head: RequestHead?
    private var request: HTTPRequest?
    private var body: [UInt8] = []
    private var bodyLeft = 0
    private var chunked: ChunkedBody?
    private var bodyWaiter: CheckedContinuation<[UInt8]?, Never>?
    private var output: [UInt8] = []
    private var outputSent = 0
    private var closeAfterAnswer = false
    private var readable = true
    private var writable = true
    private var peerClosed = false
    private var lastWriteProgress: Int64
    private var answeredRequests = 0
    private var emptyLines = 0

    var isClosed: Bool { fd < 0 }

    init(loop: ServerLoop, fd: Int32, id: UInt64, peer: String, verdict: ConnectionCounts.Verdict) {
        (self.loop, self.fd, self.id, self.peer) = (loop, fd, id, peer)
        phaseSince = loop.now
        lastWriteProgress = loop.now
        if case .refuse(let code, let message) = verdict {
            served = false
            refusal = APIError(503, code, message, headers: ["Retry-After": "1"])
        } else {
            served = true
            refusal = nil
        }
    }

    // MARK: Events

    func ready(events: UInt32) {
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { readable = true }
        if events & (EPOLLOUT.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { writable = true }
        advance()
    }

    /// Does whatever the phase allows with the bytes and room there are, until it must wait.
    func advance() {
        while fd >= 0 {
            switch phase {
            case .waiting, .head:
                guard readHead() else { return }
            case .admitting:
                return
            case .body:
                // A 100 Continue the socket had no room for goes out before more is read.
                if outputSent < output.count { _ = flush() }
                guard readBodyBytes() else { return }
            case .writing:
                guard flush() else { return }
                answered()
            case .streaming(let stream):
                guard flush() else { return }
                let (bytes, ended) = stream.take(limit: 16 * 1024)
                if !bytes.isEmpty { ResponseWriter.appendChunk(bytes, chunked: head?.version != .http10, to: &output) }
                if ended {
                    if head?.version != .http10 { output.append(contentsOf: Array("0\r\n\r\n".utf8)) }
                    closeAfterAnswer = true
                    stream.detach()
                    _ = loop.streams.withLock { $0.removeValue(forKey: id) }
                    phase = .writing
                } else if bytes.isEmpty {
                    return
                }
            case .lingering:
                while readMore(discard: true) {}
                if peerClosed { close() }
                return
            }
        }
    }

    /// Phase deadlines: a head, a body, an idle keep-alive, an unread answer, a linger.
    func checkDeadlines() {
        let age = loop.now - phaseSince
        switch phase {
        case .waiting:
            // Before its first request a connection has the head's deadline too: one opened
            // and left silent is a slot held for nothing.
            let limit = answeredRequests == 0 ? min(loop.policy.headTimeout, loop.policy.idleTimeout) : loop.policy.idleTimeout
            if age > limit.milliseconds { close() }
        case .head:
            if age > loop.policy.headTimeout.milliseconds { fail(HeadError(status: 408, code: "request_timeout", message: "the request's headers took longer than \(loop.policy.headTimeout.seconds) s")) }
        case .body:
            if age > loop.policy.bodyTimeout.milliseconds { fail(HeadError(status: 408, code: "request_timeout", message: "the request's body took longer than \(loop.policy.bodyTimeout.seconds) s")) }
        case .writing:
            // A whole answer within the idle timeout: a client reading a byte now and then
            // does not hold the connection.
            if age > loop.policy.idleTimeout.milliseconds { close() }
        case .streaming:
            // A stream runs as long as its client reads; one that stops is dropped (and a slow
            // one is ended by its stream once a megabyte waits for it).
            if outputSent < output.count, loop.now - lastWriteProgress > loop.policy.idleTimeout.milliseconds { close() }
        case .lingering:
            if age > 2_000 { close() }
        case .admitting:
            break
        }
    }

    // MARK: Reading

    /// One read into the loop's buffer, appended to `input` (or dropped): false when there
    /// was nothing (the socket drained, or the peer closed).
    private func readMore(discard: Bool = false) -> Bool {
        guard readable, fd >= 0 else { return false }
        let count = recv(fd, loop.readBuffer.baseAddress, loop.readBuffer.count, 0)
        if count > 0 {
            if !discard { input.append(contentsOf: UnsafeRawBufferPointer(rebasing: loop.readBuffer[..<count])) }
            return true
        }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            if errno != EINTR { readable = false }
            return errno == EINTR
        }
        // End of stream or an error.
        readable = false
        peerClosed = true
        return false
    }

    /// Reads and parses a head; true when the phase moved on (go round again).
    private func readHead() -> Bool {
        while true {
            if case .waiting = phase {
                // A few empty lines before a request are allowed (RFC 9112 §2.2); more are
                // a client feeding the buffer, not asking.
                while input.count - inputStart >= 2, input[inputStart] == 0x0D, input[inputStart + 1] == 0x0A {
                    inputStart += 2
                    emptyLines += 1
                    guard emptyLines <= 4 else {
                        fail(.malformed("more than 4 empty lines before a request"))
                        return true
                    }
                }
                compactInput()
                // A lone CR may be the first half of one more empty line.
                let pending = input.count - inputStart
                if pending > 1 || (pending == 1 && input[inputStart] != 0x0D) {
                    phase = .head
                    phaseSince = loop.now
                }
            }
            if case .head = phase {
                let scan: Result<RequestHeadParser.Scan, HeadError> = input.withUnsafeBytes { raw in
                    let bytes = UnsafeRawBufferPointer(rebasing: raw[inputStart...])
                    do throws(HeadError) {
                        return .success(try RequestHeadParser.scan(bytes, from: scanFrom, limit: loop.policy.maxHeadBytes))
                    } catch { return .failure(error) }
                }
                switch scan {
                case .failure(let error):
                    fail(error)
                    return true
                case .success(.complete(let end)):
                    let parsed: Result<RequestHead, HeadError> = input.withUnsafeBytes { raw in
                        do throws(HeadError) {
                            return .success(try RequestHeadParser.parse(UnsafeRawBufferPointer(rebasing: raw[inputStart..<(inputStart + end)])))
                        } catch { return .failure(error) }
                    }
                    inputStart += end
                    scanFrom = 0
                    switch parsed {
                    case .failure(let error): fail(error)
                    case .success(let head): start(head)
                    }
                    return true
                case .success(.incomplete(let resume)):
                    scanFrom = resume
                }
            }
            guard readMore() else {
                if peerClosed { close() }
                return false
            }
        }
    }

    private func start(_ head: RequestHead) {
        self.head = head
        var request = HTTPRequest(
            method: head.method, path: head.path, query: head.query, headers: head.headers,
            clientAddress: loop.policy.clientAddress(peer: peer, headers: head.headers))
        request.peerAddress = peer
        self.request = request
        if let refusal {
            closeAfterAnswer = true
            return answerByServer(refusal.response)
        }
        if case .length(let length) = head.framing, length > loop.policy.maxBodyBytes {
            return fail(ChunkedBody.tooLarge(loop.policy.maxBodyBytes))
        }
        if head.framing == .none, let immediate = loop.immediate, let response = immediate(request) {
            phase = .admitting
            return respond(response, bodyUnread: false)
        }
        if case .length(let length) = head.framing { bodyLeft = length }
        if head.framing == .chunked { chunked = ChunkedBody(limit: loop.policy.maxBodyBytes) }
        // Whatever of the body came with the head is taken now (it is read already);
        // nothing more is read until the request is admitted.
        let complete: Bool
        switch consumeBody() {
        case .failure(let error): return fail(error)
        case .success(let done): complete = done
        }
        phase = .admitting
        phaseSince = loop.now
        let (loop, id, admit) = (loop, id, loop.admit)
        let bare = request
        let early = complete ? takeBody() : nil
        loop.running.add(1, ordering: .acquiringAndReleasing)
        Task {
            defer { loop.running.subtract(1, ordering: .acquiringAndReleasing) }
            switch await admit(bare) {
            case .refuse(let response):
                loop.post(.respond(connection: id, response, bodyUnread: early == nil))
            case .accept(let run):
                var whole = bare
                if let early {
                    whole.body = early
                } else {
                    guard let body = await withCheckedContinuation({ loop.post(.wantBody(connection: id, $0)) }) else { return }
                    whole.body = body
                }
                loop.post(.respond(connection: id, await run(whole), bodyUnread: false))
            }
        }
    }

    /// The admitted request's task waits for its body.
    func readBody(then waiter: CheckedContinuation<[UInt8]?, Never>) {
        guard case .admitting = phase else { return waiter.resume(returning: nil) }
        bodyWaiter = waiter
        phase = .body
        phaseSince = loop.now
        if head?.expectsContinue == true {
            output.append(contentsOf: Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            _ = flush()
        }
        advance()
    }

    /// Reads body bytes; true when the phase moved on.
    private func readBodyBytes() -> Bool {
        while true {
            switch consumeBody() {
            case .failure(let error):
                fail(error)
                return true
            case .success(true):
                phase = .admitting
                let waiter = bodyWaiter
                bodyWaiter = nil
                waiter?.resume(returning: takeBody())
                return true
            case .success(false):
                guard readMore() else {
                    if peerClosed { close() }
                    return false
                }
            }
        }
    }

    /// Moves body bytes from `input` to `body`: true once the body is whole.
    private func consumeBody() -> Result<Bool, HeadError> {
        if var decoder = chunked {
            defer { chunked = decoder }
            let available = input.count - inputStart
            let progress: Result<ChunkedBody.Progress, HeadError> = input.withUnsafeBytes { raw in
                do throws(HeadError) {
                    return .success(try decoder.feed(UnsafeRawBufferPointer(rebasing: raw[inputStart...])))
                } catch { return .failure(error) }
            }
            switch progress {
            case .failure(let error): return .failure(error)
            case .success(.needMore):
                inputStart += available
                compactInput()
                return .success(false)
            case .success(.complete(let consumed)):
                inputStart += consumed
                body = decoder.body
                return .success(true)
            }
        }
        let count = min(bodyLeft, input.count - inputStart)
        if count > 0 {
            if body.isEmpty { body.reserveCapacity(bodyLeft) }
            body.append(contentsOf: input[inputStart..<(inputStart + count)])
            inputStart += count
            bodyLeft -= count
            compactInput()
        }
        return .success(bodyLeft == 0)
    }

    private func takeBody() -> [UInt8] {
        defer {
            body = []
            chunked = nil
        }
        return body
    }

    private func compactInput() {
        if inputStart == input.count {
            input.removeAll(keepingCapacity: input.capacity <= 64 * 1024)
            inputStart = 0
        } else if inputStart > 32 * 1024 {
            input.removeFirst(inputStart)
            inputStart = 0
        }
    }

    // MARK: Answering

    /// A request's task answered (or its admission refused it: `bodyUnread` when the client
    /// may still be sending a body nobody read, after which the connection cannot be reused).
    func taskAnswered(_ response: HTTPResponse, bodyUnread: Bool) {
        guard case .admitting = phase else { return }
        respond(response, bodyUnread: bodyUnread)
    }

    private func respond(_ response: HTTPResponse, bodyUnread: Bool) {
        guard fd >= 0 else { return }
        let waiter = bodyWaiter
        bodyWaiter = nil
        waiter?.resume(returning: nil)
        if response.stream != nil && head?.version == .http10 { closeAfterAnswer = true }
        if bodyUnread || peerClosed || loop.stopping || head?.keepAlive != true { closeAfterAnswer = true }
        let isHead = head?.method == "HEAD"
        output.reserveCapacity(output.count + response.body.count + 256)
        ResponseWriter.appendHead(
            response, version: head?.version ?? .http11, close: closeAfterAnswer, date: loop.dateHeader.value,
            streaming: response.stream != nil && !isHead, to: &output)
        if let stream = response.stream, !isHead {
            let (loop, id) = (loop, id)
            loop.streams.withLock { $0[id] = stream }
            stream.attach { loop.post(.streamReady(connection: id)) }
            phase = .streaming(stream)
        } else {
            if !isHead { output.append(contentsOf: response.body) }
            phase = .writing
        }
        phaseSince = loop.now
        lastWriteProgress = loop.now
        advance()
    }

    /// An answer the server gives by itself: counted through `refused`, then the
    /// connection closes (its framing cannot be trusted any more).
    private func answerByServer(_ response: HTTPResponse) {
        loop.refused(request ?? HTTPRequest(method: "", path: "", clientAddress: peer), response)
        closeAfterAnswer = true
        respond(response, bodyUnread: true)
    }

    private func fail(_ error: HeadError) {
        answerByServer(APIError(error.status, error.code, error.message).response)
    }

    /// Writes what `output` holds: true once all of it is sent.
    private func flush() -> Bool {
        while outputSent < output.count {
            guard writable, fd >= 0 else { return false }
            let sent = output.withUnsafeBytes { raw in send(fd, raw.baseAddress! + outputSent, raw.count - outputSent, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                outputSent += sent
                lastWriteProgress = loop.now
            } else if sent < 0 && errno == EINTR {
                continue
            } else if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                writable = false
                return false
            } else {
                close()
                return false
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 64 * 1024)
        outputSent = 0
        return true
    }

    /// The answer is written: linger and close, or wait for the next request.
    private func answered() {
        if closeAfterAnswer {
            guard fd >= 0 else { return }
            shutdown(fd, Int32(SHUT_WR))
            phase = .lingering
            phaseSince = loop.now
            return
        }
        head = nil
        request = nil
        body = []
        bodyLeft = 0
        chunked = nil
        answeredRequests += 1
        emptyLines = 0
        compactInput()
        // A pipelined request may be in `input` already: `advance` goes on with it.
        phase = .waiting
        phaseSince = loop.now
    }

    /// The server stops: a connection between requests closes now; one mid-request closes
    /// after its answer.
    func stopWhenIdle() {
        switch phase {
        case .waiting, .head: close()
        default: closeAfterAnswer = true
        }
    }

    func close() {
        guard fd >= 0 else { return }
        if case .streaming(let stream) = phase {
            stream.detach()
            _ = loop.streams.withLock { $0.removeValue(forKey: id) }
        }
        let waiter = bodyWaiter
        bodyWaiter = nil
        waiter?.resume(returning: nil)
        Glibc.close(fd)
        fd = -1
    }
}
