import Foundation
import PushfanCore
import PushfanCrypto
internal import CNghttp2

/// The default transport (`transport: nghttp2`): HTTP/2 client sessions of
/// libnghttp2 over Pushfan's own non-blocking sockets, TLS from OpenSSL,
/// driven by `poll` on the pool's thread.
///
/// Why not only libcurl: APNs lowers a connection's stream limit to 1 after
/// every rejection and refuses the streams that reach it meanwhile; libcurl
/// 7.88 answers each refused stream by closing the connection and resending on
/// a fresh one. Here a refused stream is simply sent again when the connection
/// has room, on the same connection, and a connection carries requests only
/// once the server's SETTINGS arrived (APNs starts token-auth connections at
/// one stream). GOAWAY's last-stream-id tells exactly which streams were not
/// processed.
final class HTTP2TransferEngine: TransferEngine {
    private let tls: TLSClientContext?
    private let host: String
    private let port: Int
    private let scheme: [UInt8]
    private let authority: [UInt8]
    private var connections: [HTTP2Connection] = []
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let pacer: ConnectionPacer
    private var lastHousekeeping = ContinuousClock.now
    /// `authorization` value bytes for the current provider token.
    private var authorization: (jwt: String, value: [UInt8]) = ("", [])
    /// Scratch for one request's header names and values, and its nghttp2_nv array.
    private let headerScratch = UnsafeMutablePointer<UInt8>.allocate(capacity: 16 * 1024)
    private let nvScratch = UnsafeMutablePointer<nghttp2_nv>.allocate(capacity: 16)
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    /// Most times a request the server did not process is sent again before it
    /// is reported as `refusedStream` / `goAwayUnprocessed`.
    static let maxUnprocessedResends = 100

    init(_ context: Context) throws(APNsSenderError) {
        let endpoint = context.endpoint
        guard let schemeEnd = endpoint.baseURL.range(of: "://") else { throw .invalidEndpoint("no scheme in \(endpoint.baseURL)") }
        let hostPort = String(endpoint.baseURL[schemeEnd.upperBound...])
        guard let colon = hostPort.lastIndex(of: ":"), let port = Int(hostPort[hostPort.index(after: colon)...]) else {
            throw .invalidEndpoint("no port in \(endpoint.baseURL)")
        }
        var host = String(hostPort[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.host = host
        self.port = port
        scheme = Array((endpoint.isCleartext ? "http" : "https").utf8)
        authority = Array(hostPort.utf8)
        if endpoint.isCleartext {
            tls = nil
        } else {
            var certificate: TLSClientContext.ClientCertificate?
            if case .certificate(let client) = context.credentials {
                switch client.format {
                case .pem: certificate = .pem(certificateFile: client.certificateFile, keyFile: client.keyFile ?? "", password: client.password)
                case .pkcs12: certificate = .pkcs12(file: client.certificateFile, password: client.password)
                }
            }
            do {
                tls = try TLSClientContext(caFile: endpoint.caFile, verifyPeer: endpoint.verifyPeer, certificate: certificate)
            } catch {
                throw certificate == nil ? .invalidEndpoint(error.description) : .invalidCredentials(error.description)
            }
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .invalidConfiguration("cannot create the pool's wake-up pipe: errno \(errno)") }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        pacer = ConnectionPacer(burst: 2 * context.configuration.connections, interval: .milliseconds(200))
        super.init(context: context)
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
        headerScratch.deallocate()
        nvScratch.deallocate()
        readBuffer.deallocate()
    }

    override var waker: Waker {
        let fd = wakeWrite
        return Waker {
            var byte: UInt8 = 1
            _ = write(fd, &byte, 1)
        }
    }

    // MARK: starting requests

    override func start(_ request: PendingRequest, token: ProviderToken?) -> Bool {
        var best: HTTP2Connection?
        var bestRoom = 0
        for connection in connections where connection.state == .ready {
            let room = connection.room(configured: configuration.streamsPerConnection)
            if room > bestRoom {
                best = connection
                bestRoom = room
            }
        }
        guard let connection = best else {
            openConnectionIfNeeded()
            return false
        }
        guard submit(request, token: token, on: connection) else { return true }
        active += 1
        // More connections carry more when this one fills up.
        if bestRoom == 1 { openConnectionIfNeeded() }
        return true
    }

    /// Submits the request's HEADERS and DATA to the session; false (and the
    /// request failed) if nghttp2 refused it.
    private func submit(_ request: PendingRequest, token: ProviderToken?, on connection: HTTP2Connection) -> Bool {
        guard let session = connection.session else { return false }
        let notification = request.notification
        var frame = HeaderBlock(scratch: headerScratch, capacity: 16 * 1024, entries: nvScratch)
        frame.header(":method", "POST")
        scheme.withUnsafeBytes { frame.header(":scheme", $0) }
        authority.withUnsafeBytes { frame.header(":authority", $0) }
        frame.header(":path", notification.path)
        notification.writeHeaders(to: &frame)
        if let token {
            if token.jwt != authorization.jwt { authorization = (token.jwt, Array(token.authorization.utf8)) }
            authorization.value.withUnsafeBytes { frame.header("authorization", $0) }
        }
        frame.header("content-type", "application/json")
        frame.header("content-length", String(notification.payload.count))
        let count = frame.count

        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) { _, streamID, buffer, length, flags, _, userData in
            guard let buffer, let flags, let userData,
                  let stream = HTTP2Connection.from(userData).streams[streamID]
            else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
            let payload = stream.request.notification.payload
            let count = min(length, payload.count - stream.offset)
            if count > 0 {
                payload.copyBytes(
                    to: UnsafeMutableRawBufferPointer(start: buffer, count: count),
                    from: (payload.startIndex + stream.offset)..<(payload.startIndex + stream.offset + count))
            }
            stream.offset += count
            if stream.offset == payload.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
            return count
        }
        let streamID = nghttp2_submit_request(session, nil, nvScratch, count, &provider, nil)
        guard streamID > 0 else {
            finish(request, .failed(APNsTransportFailure(.connectionLost, detail: "nghttp2 refused the request: \(Self.errorText(streamID))")), token: token)
            return false
        }
        connection.streams[streamID] = HTTP2Connection.Stream(
            request: request, token: token, deadline: .now + configuration.requestTimeout)
        connection.lastUsed = .now
        connection.flush()
        return true
    }

    /// Opens one more connection when the pool has fewer than `connections`
    /// usable ones, none is already opening, and neither the reconnect backoff
    /// nor the pacer says wait.
    private func openConnectionIfNeeded() {
        let usable = connections.filter { $0.state != .draining && $0.state != .closed }
        guard usable.count < configuration.connections, !usable.contains(where: { $0.isOpening }) else { return }
        guard ContinuousClock.now >= blockedUntil, pacer.tryAcquire() else { return }
        do {
            let connection = try HTTP2Connection(engine: self, host: host, port: port, tls: tls)
            connections.append(connection)
        } catch {
            connectFailed(error)
        }
    }

    /// A connection attempt failed: back off, and if no connection is ready,
    /// the requests waiting for one fail as not processed (the caller's retry
    /// policy decides when to try again).
    func connectFailed(_ failure: APNsTransportFailure) {
        noteConnectFailure(failure)
        if !connections.contains(where: { $0.state == .ready }) { failWaiting(failure) }
    }

    // MARK: stream results

    /// A stream ended (answered, reset, or its connection closed).
    func streamEnded(_ stream: HTTP2Connection.Stream, streamID: Int32, errorCode: UInt32, on connection: HTTP2Connection) {
        guard !stream.timedOut else { return }
        active -= 1
        if stream.status > 0 {
            let outcome = Self.outcome(
                status: stream.status, apnsID: stream.apnsID, uniqueID: stream.uniqueID, body: stream.body, request: stream.request)
            connection.noteResponse()
            finish(stream.request, .response(outcome), token: stream.token)
            return
        }
        if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            resendUnprocessed(stream, APNsTransportFailure(.refusedStream, detail: "the server refused the stream (REFUSED_STREAM)"))
        } else if let last = connection.goAwayLastStreamID, streamID > last {
            resendUnprocessed(stream, .goAway(streamID: UInt32(streamID), lastStreamID: UInt32(last), detail: connection.goAwayDetail))
        } else if !stream.sent {
            resendUnprocessed(stream, APNsTransportFailure(.connectionLost, detail: connection.closeReason ?? "closed before it was sent"))
        } else if let last = connection.goAwayLastStreamID {
            finish(stream.request, .failed(.goAway(streamID: UInt32(streamID), lastStreamID: UInt32(last), detail: connection.goAwayDetail)), token: stream.token)
        } else if errorCode != 0 {
            finish(stream.request, .failed(APNsTransportFailure(.streamReset, detail: "the server reset the stream: \(Self.errorCodeName(errorCode))")), token: stream.token)
        } else {
            finish(stream.request, .failed(APNsTransportFailure(.connectionLost, detail: connection.closeReason ?? "the connection closed")), token: stream.token)
        }
    }

    /// Sends again something the server certainly did not process, unless it
    /// was refused too often; then the caller hears it (still "not processed").
    private func resendUnprocessed(_ stream: HTTP2Connection.Stream, _ failure: APNsTransportFailure) {
        var request = stream.request
        request.unprocessedResends += 1
        if request.unprocessedResends > Self.maxUnprocessedResends {
            finish(request, .failed(failure), token: stream.token)
        } else {
            requeue(request)
        }
    }

    // MARK: I/O

    override func performIO(timeout: Int32) {
        var descriptors = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        for connection in connections { descriptors.append(pollfd(fd: connection.fd, events: connection.pollEvents, revents: 0)) }
        let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
        guard ready > 0 else { return }
        if descriptors[0].revents != 0 {
            var sink = [UInt8](repeating: 0, count: 256)
            while read(wakeRead, &sink, sink.count) > 0 {}
        }
        // Connections may be added or removed while handling events: index by the snapshot.
        let snapshot = connections
        for (index, connection) in snapshot.enumerated() where descriptors[index + 1].revents != 0 {
            connection.handle(events: descriptors[index + 1].revents)
        }
        connections.removeAll { $0.state == .closed }
    }

    override func housekeeping() {
        let now = ContinuousClock.now
        guard now - lastHousekeeping >= .milliseconds(50) else { return }
        lastHousekeeping = now
        for connection in connections {
            connection.expireRequests(now: now)
            connection.keepAlive(now: now, configuration: configuration)
        }
        connections.removeAll { $0.state == .closed }
    }

    override func reconnectForNewToken() {
        for connection in connections where connection.state == .ready { connection.drain() }
    }

    override func abortActive(_ failure: APNsTransportFailure) {
        for connection in connections {
            for (_, stream) in connection.streams where !stream.timedOut {
                stream.timedOut = true
                active -= 1
                stream.request.deliver(.failed(failure))
            }
            connection.close(reason: "the sender shut down")
        }
        connections.removeAll()
    }

    override func closeTransport() {
        for connection in connections { connection.close(reason: "the sender shut down") }
        connections.removeAll()
    }

    /// A timed-out request: reported now; its stream is cancelled.
    func timedOut(_ stream: HTTP2Connection.Stream) {
        active -= 1
        finish(stream.request, .failed(APNsTransportFailure(.timedOut, detail: "no answer within \(configuration.requestTimeout)")), token: stream.token)
    }

    static func errorText(_ code: Int32) -> String { String(cString: nghttp2_strerror(code)) }

    static func errorCodeName(_ code: UInt32) -> String {
        guard let name = nghttp2_http2_strerror(code) else { return "error \(code)" }
        return String(cString: name)
    }
}

/// One HTTP/2 connection: a non-blocking TCP socket, TLS unless h2c, and an
/// nghttp2 client session. Owned by the engine's `connections`; nghttp2 gets an
/// unretained pointer to it as user data, and `close()` deletes the session
/// before the engine can drop the connection.
final class HTTP2Connection {
    enum State {
        case connecting, handshaking, awaitingSettings, ready, draining, closed
    }

    /// One request on this connection.
    final class Stream {
        let request: PendingRequest
        let token: ProviderToken?
        let deadline: ContinuousClock.Instant
        var status = 0
        var apnsID: String?
        var uniqueID: String?
        var body: [UInt8] = []
        /// Payload bytes handed to nghttp2 so far.
        var offset = 0
        /// HEADERS went out: the server may have seen it.
        var sent = false
        /// Reported as timed out; whatever comes later is ignored.
        var timedOut = false

        init(request: PendingRequest, token: ProviderToken?, deadline: ContinuousClock.Instant) {
            self.request = request
            self.token = token
            self.deadline = deadline
        }
    }

    unowned let engine: HTTP2TransferEngine
    let fd: Int32
    private let hostname: String
    private let tlsContext: TLSClientContext?
    private var tls: TLSConnection?
    private(set) var session: OpaquePointer?
    private(set) var state = State.connecting
    var streams: [Int32: Stream] = [:]
    private(set) var goAwayLastStreamID: Int32?
    private(set) var goAwayDetail = ""
    private(set) var closeReason: String?
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var wantsWrite = false
    private let openedAt = ContinuousClock.now
    var lastUsed = ContinuousClock.now
    private var lastRead = ContinuousClock.now
    private var pingSentAt: ContinuousClock.Instant?

    /// Starts a non-blocking connect to the first address of `host`.
    init(engine: HTTP2TransferEngine, host: String, port: Int, tls: TLSClientContext?) throws(APNsTransportFailure) {
        self.engine = engine
        self.hostname = host
        self.tlsContext = tls
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let address = list else {
            throw APNsTransportFailure(.connectFailed, detail: "cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        let fd = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw APNsTransportFailure(.connectFailed, detail: "socket: errno \(errno)") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var on: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        if connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) != 0 && errno != EINPROGRESS {
            let error = errno
            Glibc.close(fd)
            throw APNsTransportFailure(.connectFailed, detail: "connect to \(host):\(port): \(String(cString: strerror(error)))")
        }
        self.fd = fd
    }

    static func from(_ pointer: UnsafeMutableRawPointer) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(pointer).takeUnretainedValue()
    }

    var isOpening: Bool { state == .connecting || state == .handshaking || state == .awaitingSettings }

    /// Streams this connection can take now: the smaller of Pushfan's limit and
    /// the server's current SETTINGS_MAX_CONCURRENT_STREAMS, less those open.
    func room(configured: Int) -> Int {
        guard let session else { return 0 }
        let remote = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        return min(configured, remote) - streams.count
    }

    var pollEvents: Int16 {
        if state == .connecting { return Int16(POLLOUT) }
        return Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0)
    }

    // MARK: events

    func handle(events: Int16) {
        switch state {
        case .connecting:
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 || events & Int16(POLLERR | POLLHUP) != 0 {
                failConnect("connect to \(hostname): \(String(cString: strerror(error == 0 ? ECONNREFUSED : error)))")
                return
            }
            if let tlsContext {
                do {
                    tls = try tlsContext.makeConnection(socket: fd, hostname: hostname)
                } catch {
                    failConnect(error.description)
                    return
                }
                state = .handshaking
                handshake()
            } else {
                startSession()
            }
        case .handshaking:
            handshake()
        case .awaitingSettings, .ready, .draining:
            if events & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readAvailable() }
            if state != .closed, events & Int16(POLLOUT) != 0 { flush() }
        case .closed:
            break
        }
    }

    private func handshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            guard tls.negotiatedProtocol == "h2" else {
                failConnect("the server at \(hostname) did not agree to HTTP/2 (ALPN)")
                return
            }
            startSession()
        case .wantRead: wantsWrite = false
        case .wantWrite: wantsWrite = true
        case .closed: failConnect("the server closed the TLS handshake")
        case .failed(let reason): failConnect(reason)
        }
    }

    private func failConnect(_ reason: String) {
        close(reason: reason)
    }

    private func startSession() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, let name, let value, let userData,
                  let stream = HTTP2Connection.from(userData).streams[frame.pointee.hd.stream_id]
            else { return 0 }
            let nameBytes = UnsafeBufferPointer(start: name, count: nameLength)
            let valueBytes = UnsafeBufferPointer(start: value, count: valueLength)
            if nameBytes.elementsEqual(":status".utf8) {
                stream.status = Int(String(decoding: valueBytes, as: UTF8.self)) ?? 0
            } else if nameBytes.elementsEqual("apns-id".utf8) {
                stream.apnsID = String(decoding: valueBytes, as: UTF8.self)
            } else if nameBytes.elementsEqual("apns-unique-id".utf8) {
                stream.uniqueID = String(decoding: valueBytes, as: UTF8.self)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            guard let data, let userData, let stream = HTTP2Connection.from(userData).streams[streamID] else { return 0 }
            let room = 16 * 1024 - stream.body.count
            stream.body.append(contentsOf: UnsafeBufferPointer(start: data, count: min(length, max(room, 0))))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let frame, let userData else { return 0 }
            let connection = HTTP2Connection.from(userData)
            switch UInt32(frame.pointee.hd.type) {
            case NGHTTP2_SETTINGS.rawValue where frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
                if connection.state == .awaitingSettings { connection.state = .ready }
            case NGHTTP2_GOAWAY.rawValue:
                let goAway = frame.pointee.goaway
                var detail = HTTP2TransferEngine.errorCodeName(goAway.error_code)
                if let data = goAway.opaque_data, goAway.opaque_data_len > 0 {
                    detail += ": " + String(decoding: UnsafeBufferPointer(start: data, count: min(goAway.opaque_data_len, 256)), as: UTF8.self)
                }
                connection.goAwayReceived(lastStreamID: goAway.last_stream_id, detail: detail)
            case NGHTTP2_PING.rawValue where frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
                connection.pingSentAt = nil
            default:
                break
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            guard let frame, let userData, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue,
                  let stream = HTTP2Connection.from(userData).streams[frame.pointee.hd.stream_id]
            else { return 0 }
            stream.sent = true
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            guard let userData else { return 0 }
            HTTP2Connection.from(userData).streamClosed(streamID, errorCode: errorCode)
            return 0
        }
        var session: OpaquePointer?
        // Unretained: see the type's documentation.
        guard nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque()) == 0, let session else {
            failConnect("nghttp2 could not create a session")
            return
        }
        self.session = session
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        state = .awaitingSettings
        lastRead = .now
        flush()
    }

    private func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        // Called from inside nghttp2: the session must not be closed here
        // (`flush` closes a drained connection afterwards).
        engine.streamEnded(stream, streamID: streamID, errorCode: errorCode, on: self)
    }

    private func goAwayReceived(lastStreamID: Int32, detail: String) {
        goAwayLastStreamID = lastStreamID
        goAwayDetail = detail
        if state != .closed { state = .draining }
    }

    /// An answer came back: the connection works.
    func noteResponse() { lastRead = .now }

    // MARK: bytes

    private func readAvailable() {
        guard let session else { return }
        let buffer = engine.readBuffer
        while state != .closed {
            var got = 0
            if let tls {
                switch tls.read(into: buffer) {
                case .done(let count): got = count
                case .wantRead, .wantWrite: return flush()
                case .closed: return close(reason: "the server closed the connection")
                case .failed(let reason): return close(reason: reason)
                }
            } else {
                let count = read(fd, buffer.baseAddress, buffer.count)
                if count > 0 {
                    got = count
                } else if count < 0 && errno == EINTR {
                    continue
                } else if count < 0 && errno == EAGAIN {
                    return flush()
                } else {
                    return close(reason: count == 0 ? "the server closed the connection" : "read: \(String(cString: strerror(errno)))")
                }
            }
            lastRead = .now
            let consumed = nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), got)
            if consumed < 0 {
                flush()
                return close(reason: "HTTP/2 protocol error: \(HTTP2TransferEngine.errorText(Int32(consumed)))")
            }
        }
    }

    /// Moves nghttp2's pending frames to the socket.
    func flush() {
        guard let session, state != .closed else { return }
        while true {
            while output.count - outputOffset < 64 * 1024 {
                var data: UnsafePointer<UInt8>?
                let count = nghttp2_session_mem_send(session, &data)
                if count < 0 { return close(reason: "HTTP/2 error: \(HTTP2TransferEngine.errorText(Int32(count)))") }
                if count == 0 { break }
                output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
            }
            if outputOffset == output.count {
                output.removeAll(keepingCapacity: true)
                outputOffset = 0
                wantsWrite = false
                break
            }
            let progress: TLSConnection.Progress = output.withUnsafeBytes { raw in
                let pending = UnsafeRawBufferPointer(rebasing: raw[outputOffset...])
                if let tls { return tls.write(pending) }
                let written = send(fd, pending.baseAddress, pending.count, Int32(MSG_NOSIGNAL))
                if written >= 0 { return .done(written) }
                return errno == EAGAIN || errno == EINTR ? .wantWrite : .failed("write: \(String(cString: strerror(errno)))")
            }
            switch progress {
            case .done(let count): outputOffset += count
            case .wantRead, .wantWrite:
                wantsWrite = true
                return
            case .closed: return close(reason: "the server closed the connection")
            case .failed(let reason): return close(reason: reason)
            }
        }
        if state == .draining && streams.isEmpty {
            close(reason: goAwayLastStreamID != nil ? "GOAWAY: \(goAwayDetail)" : "drained")
        } else if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            close(reason: goAwayLastStreamID != nil ? "GOAWAY: \(goAwayDetail)" : "the session ended")
        }
    }

    // MARK: lifecycle

    /// Takes no new requests; closes when the last one is answered (in
    /// `flush` or `keepAlive`: this may run inside one of nghttp2's callbacks,
    /// where the session must stay alive).
    func drain() {
        guard state == .ready || state == .awaitingSettings else { return }
        state = .draining
    }

    /// Cancels requests past their deadline; fails a connection stuck opening.
    func expireRequests(now: ContinuousClock.Instant) {
        if isOpening, now - openedAt > engine.configuration.connectTimeout {
            failConnect("no HTTP/2 session within \(engine.configuration.connectTimeout)")
            return
        }
        guard let session else { return }
        var cancelled = false
        for (streamID, stream) in streams where !stream.timedOut && now > stream.deadline {
            stream.timedOut = true
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
            engine.timedOut(stream)
            cancelled = true
        }
        if cancelled { flush() }
    }

    /// PING after `pingInterval` without traffic; a PING unanswered for as long
    /// means the peer is gone. Closes connections idle for `idleTimeout`.
    func keepAlive(now: ContinuousClock.Instant, configuration: APNsClientConfiguration) {
        guard state == .ready || state == .draining, let session else { return }
        if state == .draining && streams.isEmpty {
            nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            flush()
            return
        }
        if let pingSentAt {
            if now - pingSentAt > configuration.pingInterval { close(reason: "no answer to PING within \(configuration.pingInterval)") }
            return
        }
        if streams.isEmpty && now - lastUsed > configuration.idleTimeout {
            nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            flush()
            close(reason: "idle for \(configuration.idleTimeout)")
            return
        }
        if now - lastRead > configuration.pingInterval {
            nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
            pingSentAt = now
            flush()
        }
    }

    /// Closes the socket; every request still on it ends (`streamEnded` sorts
    /// out which were processed).
    ///
    /// A connection that closes before its session was ready (TCP, TLS, or the server
    /// hanging up before its SETTINGS, as a server that rejects a client certificate
    /// after a TLS 1.3 handshake does) is a failed connection attempt.
    func close(reason: String) {
        guard state != .closed else { return }
        let wasOpening = isOpening
        state = .closed
        closeReason = reason
        let remaining = streams
        streams.removeAll()
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
        tls?.shutdown()
        tls = nil
        Glibc.close(fd)
        for (streamID, stream) in remaining.sorted(by: { $0.key < $1.key }) {
            engine.streamEnded(stream, streamID: streamID, errorCode: 0, on: self)
        }
        if wasOpening { engine.connectFailed(APNsTransportFailure(.connectFailed, detail: reason)) }
    }
}

/// One request's header block for `nghttp2_submit_request`: name-value entries pointing
/// into a scratch buffer the engine reuses, filled by `APNsNotification.writeHeaders`
/// and the pseudo-headers around it.
private struct HeaderBlock: APNsHeaderSink {
    let scratch: UnsafeMutablePointer<UInt8>
    let capacity: Int
    let entries: UnsafeMutablePointer<nghttp2_nv>
    private(set) var count = 0
    private var used = 0

    init(scratch: UnsafeMutablePointer<UInt8>, capacity: Int, entries: UnsafeMutablePointer<nghttp2_nv>) {
        self.scratch = scratch
        self.capacity = capacity
        self.entries = entries
    }

    mutating func header(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        let nameStart = scratch + used
        nameStart.update(from: name.utf8Start, count: name.utf8CodeUnitCount)
        used += name.utf8CodeUnitCount
        let valueStart = scratch + used
        let valueCount = min(value.count, capacity - used)
        if valueCount > 0 { valueStart.update(from: value.baseAddress!.assumingMemoryBound(to: UInt8.self), count: valueCount) }
        used += valueCount
        entries[count] = nghttp2_nv(
            name: nameStart, value: valueStart, namelen: name.utf8CodeUnitCount, valuelen: valueCount,
            flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        count += 1
    }

    mutating func header(_ name: StaticString, _ value: String) {
        var value = value
        value.withUTF8 { header(name, UnsafeRawBufferPointer($0)) }
    }
}
