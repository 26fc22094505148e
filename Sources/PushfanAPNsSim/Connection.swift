import Foundation
import PushfanCore
import PushfanCrypto
internal import CEpoll
internal import CNghttp2

/// One client connection: a socket (with TLS unless h2c), an nghttp2 server session, the
/// requests in progress, and APNs' per-connection state (the key of its first push, the
/// advertised stream limit, request counts for GOAWAY and drop faults).
///
/// Lifetime: owned by its loop's table. The nghttp2 session's user data is this object,
/// unretained (`passUnretained`): the session is deleted in `close()`, before the loop
/// drops the connection, so the pointer never outlives the object. Nothing is
/// `passRetained`.
final class Connection {
    /// One request stream.
    final class Stream {
        var request = SimRequest()
        var responseBody: [UInt8] = []
        var responseOffset = 0
        /// Refused or answered: later frames are ignored.
        var finished = false
    }

    let id: UInt64
    let logID: UInt64
    /// The loop owns this connection and outlives it.
    private unowned(unsafe) let loop: EventLoop
    private let fd: Int32
    private var tls: TLSConnection?
    private var handshaking: Bool
    private var session: OpaquePointer?
    private var streams: [Int32: Stream] = [:]
    /// The stream of the last lookup: header callbacks for one stream come in a row.
    private var cachedStreamID: Int32 = 0
    private var cachedStream: Stream?
    /// The last authorization header verified on this connection (clients send the same
    /// token for long stretches), so most requests skip even the token table.
    private var lastAuthorization: String?
    private var lastVerified = VerifiedToken(keyIndex: -1, issuedAt: 0)
    /// The 20-minute rule on this connection (when the authority's scope is `.connection`).
    private var tokenClock = ConnectionTokenClock()
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var wantsWritable = false
    private(set) var isClosed = false
    private var dropNow = false

    /// APNs: one signing key per connection, fixed by its first authenticated push.
    private var keyIndex: Int?
    /// Certificate auth: the verified client certificate's topic (bundle id).
    private var certificateTopic: String?
    private var hadAccepted = false
    private var lastWasRejection = false
    private var advertisedStreams: UInt32 = 0
    private var requestCount = 0
    private var goawayLastStreamID: Int32?
    private var highestAnswered: Int32 = 0

    init(loop: EventLoop, fd: Int32, id: UInt64, logID: UInt64) throws {
        self.loop = loop
        self.fd = fd
        self.id = id
        self.logID = logID
        if let context = loop.simulator.tls {
            tls = try context.makeConnection(socket: fd)
            handshaking = true
        } else {
            handshaking = false
        }
    }

    /// Starts the session (h2c) or the handshake (TLS).
    func start() {
        if handshaking { continueHandshake() } else { startSession() }
    }

    func handle(events: UInt32) {
        if handshaking {
            continueHandshake()
            return
        }
        if events & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { readAvailable() }
        if !isClosed { flush() }
    }

    private func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            handshaking = false
            // ALPN offered without h2 already failed the handshake. A client that offers no
            // ALPN at all (aioapns, for one) speaks HTTP/2 regardless, and APNs serves it.
            guard tls.negotiatedProtocol == nil || tls.negotiatedProtocol == "h2" else {
                close()
                return
            }
            certificateTopic = tls.peerCertificateTopic
            startSession()
            readAvailable()
            if !isClosed { flush() }
        case .wantRead: setWritable(false)
        case .wantWrite: setWritable(true)
        case .closed, .failed: close()
        }
    }

    // MARK: - nghttp2 session

    private func startSession() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            guard let frame, let userData else { return 0 }
            if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                Connection.from(userData).addStream(frame.pointee.hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, let name, let value, let userData else { return 0 }
            let connection = Connection.from(userData)
            guard let stream = connection.stream(frame.pointee.hd.stream_id) else { return 0 }
            Connection.store(header: UnsafeBufferPointer(start: name, count: nameLength),
                             value: UnsafeBufferPointer(start: value, count: valueLength), in: &stream.request)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            guard let data, let userData, let stream = Connection.from(userData).stream(streamID) else { return 0 }
            let room = SimRequest.maxBodyBytes - stream.request.body.count
            if length <= room {
                stream.request.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            } else {
                stream.request.body.append(contentsOf: UnsafeBufferPointer(start: data, count: room))
                stream.request.bodyOverflow += length - room
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let frame, let userData else { return 0 }
            let type = frame.pointee.hd.type
            guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
                  frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            else { return 0 }
            let connection = Connection.from(userData)
            let streamID = frame.pointee.hd.stream_id
            guard let stream = connection.stream(streamID), !stream.finished else { return 0 }
            connection.requestComplete(stream, streamID: streamID)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, userData in
            guard let userData else { return 0 }
            Connection.from(userData).removeStream(streamID)
            return 0
        }
        var options: OpaquePointer?
        nghttp2_option_new(&options)
        defer { nghttp2_option_del(options) }
        // nghttp2's rapid-reset protection closes a connection (GOAWAY INTERNAL_ERROR) once a
        // client has reset 1,000 streams faster than 33 a second. libcurl 7.88 sends
        // RST_STREAM(STREAM_CLOSED) after every answer it reads, so a busy sender would lose
        // its connection every thousand requests. Apple documents no such limit; the
        // simulator, a test target, lifts it.
        nghttp2_option_set_stream_reset_rate_limit(options, UInt64.max, UInt64.max)
        var session: OpaquePointer?
        // Unretained: see the type's documentation.
        let rc = nghttp2_session_server_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), options)
        guard rc == 0, let session else {
            close()
            return
        }
        self.session = session
        updateAdvertisedStreams()
    }

    private static func from(_ pointer: UnsafeMutableRawPointer) -> Connection {
        Unmanaged<Connection>.fromOpaque(pointer).takeUnretainedValue()
    }

    private func stream(_ id: Int32) -> Stream? {
        if id == cachedStreamID, let cachedStream { return cachedStream }
        guard let found = streams[id] else { return nil }
        cachedStreamID = id
        cachedStream = found
        return found
    }

    private func addStream(_ id: Int32) {
        let stream = Stream()
        streams[id] = stream
        cachedStreamID = id
        cachedStream = stream
    }

    private func removeStream(_ id: Int32) {
        streams.removeValue(forKey: id)
        if id == cachedStreamID { cachedStream = nil; cachedStreamID = 0 }
    }

    /// Keeps the known APNs headers; a repeated one marks the request DuplicateHeaders.
    private static func store(header name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, in request: inout SimRequest) {
        func set(_ slot: inout String?, _ label: String) {
            if slot != nil {
                if request.duplicateHeader == nil { request.duplicateHeader = label }
                return
            }
            slot = String(decoding: value, as: UTF8.self)
        }
        func named(_ expected: StaticString) -> Bool {
            memcmp(name.baseAddress!, expected.utf8Start, expected.utf8CodeUnitCount) == 0
        }
        switch name.count {
        case 5 where named(":path"): set(&request.path, ":path")
        case 7 where named(":method"): set(&request.method, ":method")
        case 7 where named("apns-id"): set(&request.apnsID, "apns-id")
        case 10 where named("apns-topic"): set(&request.topic, "apns-topic")
        case 13 where named("authorization"): set(&request.authorization, "authorization")
        case 13 where named("apns-priority"): set(&request.priority, "apns-priority")
        case 14 where named("apns-push-type"): set(&request.pushType, "apns-push-type")
        case 15 where named("apns-expiration"): set(&request.expiration, "apns-expiration")
        case 16 where named("apns-collapse-id"): set(&request.collapseID, "apns-collapse-id")
        default: break
        }
    }

    // MARK: - I/O

    private func readAvailable() {
        guard let session else { return }
        while !isClosed {
            let buffer = loop.readBuffer
            let got: Int
            if let tls {
                switch tls.read(into: buffer) {
                case .done(let count): got = count
                case .wantRead: return finishRead()
                case .wantWrite: setWritable(true); return finishRead()
                case .closed, .failed: close(); return
                }
            } else {
                let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
                if count > 0 {
                    got = count
                } else if count < 0 && (errno == EAGAIN || errno == EINTR) {
                    if errno == EINTR { continue }
                    return finishRead()
                } else {
                    close()
                    return
                }
            }
            let consumed = nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), got)
            if consumed < 0 {
                // A protocol error: nghttp2 has queued GOAWAY; send it, then close.
                flush()
                close()
                return
            }
            if dropNow {
                loop.stats.withLock { $0.droppedConnections += 1 }
                close()
                return
            }
        }
    }

    private func finishRead() {
        loop.flushLog()
    }

    /// Moves nghttp2's pending frames to the socket; closes when the session is done.
    func flush() {
        guard let session, !isClosed, !handshaking else { return }
        loop.flushLog()
        while true {
            while output.count - outputOffset < 64 * 1024 {
                var data: UnsafePointer<UInt8>?
                let count = nghttp2_session_mem_send(session, &data)
                if count < 0 { close(); return }
                if count == 0 { break }
                output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
            }
            if outputOffset == output.count {
                output.removeAll(keepingCapacity: true)
                outputOffset = 0
                setWritable(false)
                break
            }
            let progress: TLSConnection.Progress = output.withUnsafeBytes { raw in
                let pending = UnsafeRawBufferPointer(rebasing: raw[outputOffset...])
                if let tls { return tls.write(pending) }
                let written = Glibc.send(fd, pending.baseAddress, pending.count, Int32(MSG_NOSIGNAL))
                if written >= 0 { return .done(written) }
                return errno == EAGAIN || errno == EINTR ? .wantWrite : .failed("write: errno \(errno)")
            }
            switch progress {
            case .done(let count): outputOffset += count
            case .wantRead, .wantWrite:
                setWritable(true)
                return
            case .closed, .failed:
                close()
                return
            }
        }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 { close() }
    }

    private func setWritable(_ on: Bool) {
        guard on != wantsWritable, !isClosed else { return }
        wantsWritable = on
        loop.modify(fd, id: id, events: EPOLLIN.rawValue | (on ? EPOLLOUT.rawValue : 0))
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        loop.unregister(fd)
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
        if !dropNow, !handshaking { tls?.shutdown() }
        tls = nil
        streams.removeAll()
        cachedStream = nil
        Glibc.close(fd)
    }

    // MARK: - Requests

    /// The request's last frame arrived: judge it.
    private func requestComplete(_ stream: Stream, streamID: Int32) {
        stream.finished = true
        if let path = stream.request.path, path.hasPrefix("/_sim/") {
            let (status, body) = ControlEndpoints.handle(stream.request, simulator: loop.simulator)
            send(.json(status: status, body: body), streamID: streamID)
            return
        }
        let faults = loop.faults
        requestCount += 1
        if faults.dropAfter > 0, requestCount >= faults.dropAfter {
            // Leave it (and everything else in flight) unanswered: the client cannot know
            // whether these reached APNs.
            dropNow = true
            return
        }
        if let last = goawayLastStreamID, streamID > last {
            refuse(streamID)
            return
        }
        let response = judge(stream.request, faults: faults)
        if case .refused = response {
            refuse(streamID)
        } else {
            let delay = faults.latency.sample(unit: loop.random.unit())
            if delay > 0 {
                loop.schedule(after: delay, connection: self, streamID: streamID, response: response)
            } else {
                send(response, streamID: streamID)
            }
        }
        if faults.goawayAfter > 0, requestCount == faults.goawayAfter, goawayLastStreamID == nil {
            sendGoaway(lastStreamID: streamID)
        }
        updateAdvertisedStreams()
    }

    private func refuse(_ streamID: Int32) {
        loop.stats.withLock { $0.recordRefused() }
        if let session { nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_REFUSED_STREAM.rawValue) }
    }

    private func sendGoaway(lastStreamID: Int32) {
        guard let session else { return }
        goawayLastStreamID = lastStreamID
        let reason = Array("{\"reason\":\"Shutdown\"}".utf8)
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, NGHTTP2_NO_ERROR.rawValue, reason, reason.count)
        loop.stats.withLock { $0.goawaysSent += 1 }
        // Streams above the last-stream-id that are already open will not be processed.
        for (id, stream) in streams where id > lastStreamID && !stream.finished {
            stream.finished = true
            refuse(id)
        }
    }

    /// APNs' rules for one request, in `RequestRules`' order, with credentials, faults and
    /// device rules. Records stats and the log line.
    private func judge(_ received: SimRequest, faults: FaultSettings) -> Response {
        var request = received
        // Echo a well-formed apns-id, else make one (as APNs does).
        let apnsID: [UInt8] = request.apnsID.flatMap { RequestRules.isUUID($0) ? Array($0.lowercased().utf8) : nil } ?? loop.random.uuid()
        func reject(_ rejection: SimRejection) -> Response {
            loop.stats.withLock { $0.recordRejected(rejection) }
            lastWasRejection = true
            return .rejected(rejection, apnsID: apnsID)
        }
        let token: String
        switch RequestRules.checkTarget(request) {
        case .failure(let rejection): return reject(rejection)
        case .success(let value): token = value
        }
        var allowedTopics: Set<String>?
        var now = loop.nowMillis()
        if let certificateTopic {
            // Certificate auth: no JWT; the topic defaults to the certificate's.
            allowedTopics = [certificateTopic]
            if request.topic == nil { request.topic = certificateTopic }
        } else if let authority = loop.authority {
            let verified: VerifiedToken
            if let authorization = request.authorization, authorization == lastAuthorization {
                if let expired = ProviderAuthority.checkAge(lastVerified, now: now / 1000) { return reject(expired) }
                verified = lastVerified
            } else {
                switch loop.tokenCache.verify(authorization: request.authorization, authority: authority, now: now / 1000) {
                case .failure(let rejection): return reject(rejection)
                case .success(let value): verified = value
                }
                if let first = keyIndex, first != verified.keyIndex { return reject(SimRejection(.unrelatedKeyIdInToken)) }
                if authority.updateScope == .connection, let tooSoon = tokenClock.use(verified, now: now / 1000) { return reject(tooSoon) }
                lastAuthorization = request.authorization
                lastVerified = verified
            }
            keyIndex = verified.keyIndex
            allowedTopics = loop.allowedTopics(keyIndex: verified.keyIndex, authority: authority)
        }
        let checked: CheckedRequest
        switch RequestRules.checkHeadersAndPayload(request, token: token) {
        case .failure(let rejection): return reject(rejection)
        case .success(let value): checked = value
        }
        if let allowedTopics, !allowedTopics.contains(checked.bundleID) { return reject(SimRejection(.topicDisallowed)) }
        var random = loop.random
        let decision = FaultDecision.decide(faults, token: token, draws: (random.unit(), random.unit(), random.unit()))
        loop.random = random
        switch decision {
        case .refuse: return .refused
        case .reject(let rejection): return reject(rejection)
        case .proceed: break
        }
        if let rules = loop.rules {
            now = loop.nowMillis()
            if let rejection = rules.outcome(token: token, bundleID: checked.bundleID, nowMillis: now) { return reject(rejection) }
        }
        hadAccepted = true
        lastWasRejection = false
        loop.stats.withLock {
            $0.recordAccepted(token: token, topic: checked.topic, pushType: checked.pushType, collapseID: checked.collapseID)
        }
        if loop.logging {
            LogLine.append(
                into: &loop.logBuffer, timeMillis: now, connection: logID, token: token, apnsID: apnsID,
                collapseID: checked.collapseID, topic: checked.topic, pushType: checked.pushType.rawValue,
                priority: checked.priority, expiration: request.expiration, payloadBytes: request.bodyBytes)
        }
        return .accepted(apnsID: apnsID, uniqueID: loop.sandbox ? loop.random.uuid() : nil)
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS as APNs advertises it: 1 for a token-auth connection
    /// before its first accepted push (if `startAtOne`), 1 after a rejection (if
    /// `dropToOneAfterRejection`) until the next acceptance, else the configured value.
    func updateAdvertisedStreams() {
        guard let session else { return }
        let faults = loop.faults
        var target = UInt32(clamping: faults.maxConcurrentStreams)
        if loop.authority != nil, certificateTopic == nil, faults.startAtOne, !hadAccepted { target = 1 }
        if faults.dropToOneAfterRejection, lastWasRejection { target = 1 }
        guard target != advertisedStreams else { return }
        advertisedStreams = target
        pushfan_nghttp2_submit_max_streams(session, target)
    }

    // MARK: - Responses

    func send(_ response: Response, streamID: Int32) {
        guard let session, !isClosed, let stream = stream(streamID) else { return }
        switch response {
        case .refused:
            refuse(streamID)
        case .accepted(let apnsID, let uniqueID):
            submit(session, streamID: streamID, status: 200, apnsID: apnsID, uniqueID: uniqueID, body: nil, stream: stream)
        case .rejected(let rejection, let apnsID):
            submit(session, streamID: streamID, status: rejection.status, apnsID: apnsID, uniqueID: nil, body: rejection.body, stream: stream)
        case .json(let status, let body):
            submit(session, streamID: streamID, status: status, apnsID: nil, uniqueID: nil, body: body, stream: stream)
        }
    }

    /// Builds the header list in the loop's scratch buffer and submits it (nghttp2 copies
    /// names and values, so the scratch is free again when this returns).
    private func submit(
        _ session: OpaquePointer, streamID: Int32, status: Int, apnsID: [UInt8]?, uniqueID: [UInt8]?, body: [UInt8]?, stream: Stream
    ) {
        let scratch = loop.headerScratch
        var used = 0
        var count = 0
        let nva = loop.nvScratch
        func add(_ name: StaticString, _ value: UnsafeBufferPointer<UInt8>) {
            let nameStart = scratch + used
            nameStart.update(from: name.utf8Start, count: name.utf8CodeUnitCount)
            used += name.utf8CodeUnitCount
            let valueStart = scratch + used
            let valueCount = min(value.count, 256)
            if valueCount > 0 { valueStart.update(from: value.baseAddress!, count: valueCount) }
            used += valueCount
            nva[count] = nghttp2_nv(name: nameStart, value: valueStart, namelen: name.utf8CodeUnitCount, valuelen: valueCount,
                                    flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            count += 1
        }
        var digits: (UInt8, UInt8, UInt8) = (UInt8(ascii: "0") + UInt8(status / 100 % 10), UInt8(ascii: "0") + UInt8(status / 10 % 10), UInt8(ascii: "0") + UInt8(status % 10))
        withUnsafeBytes(of: &digits) { add(":status", $0.assumingMemoryBound(to: UInt8.self)) }
        if body != nil { Self.jsonType.withUnsafeBufferPointer { add("content-type", $0) } }
        apnsID?.withUnsafeBufferPointer { add("apns-id", $0) }
        uniqueID?.withUnsafeBufferPointer { add("apns-unique-id", $0) }
        if let body {
            stream.responseBody = body
            stream.responseOffset = 0
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) { _, streamID, buffer, length, flags, _, userData in
                guard let buffer, let flags, let userData,
                      let stream = Connection.from(userData).stream(streamID)
                else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                let count = min(length, stream.responseBody.count - stream.responseOffset)
                stream.responseBody.withUnsafeBufferPointer { body in
                    buffer.update(from: body.baseAddress! + stream.responseOffset, count: count)
                }
                stream.responseOffset += count
                if stream.responseOffset == stream.responseBody.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
                return count
            }
            nghttp2_submit_response(session, streamID, nva, count, &provider)
        } else {
            nghttp2_submit_response(session, streamID, nva, count, nil)
        }
    }

    private static let jsonType = Array("application/json".utf8)
}

extension FastRandom {
    /// A random (version 4) UUID, lowercase, as header bytes.
    mutating func uuid() -> [UInt8] {
        let high = next() & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000  // version 4
        let low = next() & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000  // variant 10
        return [UInt8](unsafeUninitializedCapacity: 36) { buffer, initialized in
            var position = 0
            func put(_ value: UInt64, digits: Int) {
                for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                    let nibble = UInt8(truncatingIfNeeded: value >> UInt64(shift)) & 0x0F
                    buffer[position] = nibble < 10 ? 0x30 + nibble : 0x57 + nibble
                    position += 1
                }
            }
            func dash() { buffer[position] = UInt8(ascii: "-"); position += 1 }
            put(high >> 32, digits: 8); dash()
            put(high >> 16, digits: 4); dash()
            put(high, digits: 4); dash()
            put(low >> 48, digits: 4); dash()
            put(low, digits: 12)
            initialized = 36
        }
    }
}

/// One NDJSON line per accepted notification:
/// `{"time_ms":…,"connection":…,"token":…,"apns_id":…,"collapse_id":…|null,"topic":…,"push_type":…,"priority":…,"expiration":…|null,"payload_bytes":…}`;
/// `expiration` is the header as sent.
enum LogLine {
    static func append(
        into buffer: inout [UInt8], timeMillis: Int64, connection: UInt64, token: String, apnsID: [UInt8], collapseID: String?,
        topic: String, pushType: String, priority: Int, expiration: String?, payloadBytes: Int
    ) {
        buffer.append(contentsOf: "{\"time_ms\":".utf8)
        buffer.append(contentsOf: String(timeMillis).utf8)
        buffer.append(contentsOf: ",\"connection\":".utf8)
        buffer.append(contentsOf: String(connection).utf8)
        buffer.append(contentsOf: ",\"token\":\"".utf8)
        buffer.append(contentsOf: token.utf8)
        buffer.append(contentsOf: "\",\"apns_id\":\"".utf8)
        buffer.append(contentsOf: apnsID)
        buffer.append(contentsOf: "\",\"collapse_id\":".utf8)
        if let collapseID { appendString(collapseID, into: &buffer) } else { buffer.append(contentsOf: "null".utf8) }
        buffer.append(contentsOf: ",\"topic\":".utf8)
        appendString(topic, into: &buffer)
        buffer.append(contentsOf: ",\"push_type\":\"".utf8)
        buffer.append(contentsOf: pushType.utf8)
        buffer.append(contentsOf: "\",\"priority\":".utf8)
        buffer.append(contentsOf: String(priority).utf8)
        buffer.append(contentsOf: ",\"expiration\":".utf8)
        if let expiration { appendString(expiration, into: &buffer) } else { buffer.append(contentsOf: "null".utf8) }
        buffer.append(contentsOf: ",\"payload_bytes\":".utf8)
        buffer.append(contentsOf: String(payloadBytes).utf8)
        buffer.append(contentsOf: "}\n".utf8)
    }

    /// A JSON string; header bytes that are not valid UTF-8 become U+FFFD.
    static func appendString(_ text: String, into buffer: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        buffer.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                buffer.append(UInt8(ascii: "\\"))
                buffer.append(byte)
            case 0..<0x20, 0x7F:
                buffer.append(contentsOf: "\\u00".utf8)
                buffer.append(hex[Int(byte >> 4)])
                buffer.append(hex[Int(byte & 0x0F)])
            default:
                buffer.append(byte)
            }
        }
        buffer.append(UInt8(ascii: "\""))
    }
}
