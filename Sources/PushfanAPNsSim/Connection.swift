import Foundation
import PushfanCrypto
import PushfanHTTP2
internal import CEpoll

/// One client connection: a socket (with TLS unless h2c), an HTTP/2 server session
/// (`HTTP2Session`, whose delegate this is), the requests in progress, and APNs'
/// per-connection state (the key of its first push, the advertised stream limit, request
/// counts for GOAWAY and drop faults).
///
/// Lifetime: owned by its loop's table; the session is closed in `close()`, before the loop
/// drops the connection.
final class Connection: HTTP2SessionDelegate {
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
    private let channel: any ByteChannel
    private var handshaking: Bool
    private var session: HTTP2Session?
    private var streams: [Int32: Stream] = [:]
    /// The stream of the last lookup: header callbacks for one stream come in a row.
    private var cachedStreamID: Int32 = 0
    private var cachedStream: Stream?
    /// The client's credentials as far as this connection knows them (`RequestJudge`).
    private var credentials = ConnectionCredentials()
    private var wantsWritable = false
    private(set) var isClosed = false
    private var dropNow = false

    /// This connection's own latency factor under the model it was drawn for.
    private var latencyModel = LatencyModel.none
    private var latencyFactor = 1.0
    private var hadAccepted = false
    private var lastWasRejection = false
    /// Most streams this connection has had open at once (reported as `peak_streams`).
    private var peakStreams = 0
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
            let tls = try context.makeConnection(socket: fd)
            self.tls = tls
            channel = TLSChannel(tls)
            handshaking = true
        } else {
            channel = SocketChannel(fd: fd)
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
            credentials.certificateTopic = tls.peerCertificateTopic
            startSession()
            readAvailable()
            if !isClosed { flush() }
        case .wantRead: setWritable(false)
        case .wantWrite: setWritable(true)
        case .closed, .failed: close()
        }
    }

    // MARK: - HTTP/2 session

    private func startSession() {
        do {
            session = try HTTP2Session(role: .server(unlimitedResets: true), delegate: self)
        } catch {
            close()
            return
        }
        updateAdvertisedStreams()
    }

    func http2RequestBegan(_ streamID: Int32) { addStream(streamID) }

    func http2Header(_ streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(streamID) else { return }
        Self.store(header: name, value: value, in: &stream.request)
    }

    func http2Data(_ streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(streamID) else { return }
        let room = SimRequest.maxBodyBytes - stream.request.body.count
        if bytes.count <= room {
            stream.request.body.append(contentsOf: bytes)
        } else {
            stream.request.body.append(contentsOf: UnsafeBufferPointer(rebasing: bytes.prefix(room)))
            stream.request.bodyOverflow += bytes.count - room
        }
    }

    func http2PeerEnded(_ streamID: Int32) {
        guard let stream = stream(streamID), !stream.finished else { return }
        requestComplete(stream, streamID: streamID)
    }

    func http2StreamClosed(_ streamID: Int32, errorCode: UInt32) { removeStream(streamID) }

    func http2Body(_ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool) {
        guard let stream = stream(streamID) else { return (0, true) }
        let count = min(buffer.count, stream.responseBody.count - stream.responseOffset)
        stream.responseBody.withUnsafeBytes { body in
            buffer.baseAddress!.copyMemory(from: body.baseAddress! + stream.responseOffset, byteCount: count)
        }
        stream.responseOffset += count
        return (count, stream.responseOffset == stream.responseBody.count)
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
        if streams.count > peakStreams {
            peakStreams = streams.count
            loop.stats.withLock { $0.peakStreams = max($0.peakStreams, streams.count) }
        }
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
        case 15 where named("apns-channel-id"): set(&request.channelID, "apns-channel-id")
        case 15 where named("apns-request-id"): set(&request.requestID, "apns-request-id")
        case 16 where named("apns-collapse-id"): set(&request.collapseID, "apns-collapse-id")
        default: break
        }
    }

    // MARK: - I/O

    private func readAvailable() {
        guard let session else { return }
        let result = session.receive(from: channel, buffer: loop.readBuffer) { !self.dropNow && !self.isClosed }
        if dropNow {
            loop.stats.withLock { $0.droppedConnections += 1 }
            close()
            return
        }
        switch result {
        case .drained(let wantsWrite):
            if wantsWrite { setWritable(true) }
            finishRead()
        case .stopped: finishRead()
        // A protocol error's GOAWAY is already sent.
        case .ended: close()
        }
    }

    private func finishRead() {
        loop.flushLog()
    }

    /// Moves the session's pending frames to the socket; closes when the session is done.
    func flush() {
        guard let session, !isClosed, !handshaking else { return }
        loop.flushLog()
        if session.flush(to: channel) != nil {
            close()
            return
        }
        setWritable(session.wantsWrite)
        if session.isFinished { close() }
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
        session?.close()
        session = nil
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
            if faults.latency != latencyModel {
                latencyModel = faults.latency
                latencyFactor = faults.latency.connectionFactor(&loop.random)
            }
            let delay = faults.latency.sample(&loop.random, connectionFactor: latencyFactor)
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
        session?.resetStream(streamID, .refusedStream)
    }

    private func sendGoaway(lastStreamID: Int32) {
        guard let session else { return }
        goawayLastStreamID = lastStreamID
        session.submitGoAway(lastStreamID: lastStreamID, .noError, debugData: Array("{\"reason\":\"Shutdown\"}".utf8))
        loop.stats.withLock { $0.goawaysSent += 1 }
        // Streams above the last-stream-id that are already open will not be processed.
        for (id, stream) in streams where id > lastStreamID && !stream.finished {
            stream.finished = true
            refuse(id)
        }
    }

    /// Judges one request (`RequestJudge`), then records what the decision means: stats,
    /// the log line, and the per-connection state behind the advertised stream limit.
    private func judge(_ request: SimRequest, faults: FaultSettings) -> Response {
        // Echo a well-formed apns-id, else make one (as APNs does).
        let apnsID: [UInt8] = request.apnsID.flatMap { RequestRules.isUUID($0) ? Array($0.lowercased().utf8) : nil } ?? loop.random.uuid()
        var context = loop.judgeContext
        context.faults = faults
        let now = loop.nowMillis()
        switch RequestJudge.judge(request, credentials: &credentials, context: context, random: &loop.random, nowMillis: now) {
        case .refused:
            return .refused
        case .rejected(let rejection):
            loop.stats.withLock { $0.recordRejected(rejection) }
            lastWasRejection = true
            return .rejected(rejection, apnsID: apnsID)
        case .answered(let answer):
            loop.stats.withLock { $0.recordChannelRequest(method: request.method ?? "", status: answer.status) }
            let requestID = request.requestID.flatMap { RequestRules.isUUID($0) ? Array($0.lowercased().utf8) : nil } ?? loop.random.uuid()
            return .channel(answer, requestID: requestID)
        case .accepted(let checked, let token):
            hadAccepted = true
            lastWasRejection = false
            let broadcast = request.channelID != nil
            loop.stats.withLock {
                if broadcast {
                    $0.recordBroadcast(channel: token, topic: checked.topic)
                } else {
                    $0.recordAccepted(token: token, topic: checked.topic, pushType: checked.pushType, collapseID: checked.collapseID)
                }
            }
            if loop.logging {
                LogLine.append(
                    into: &loop.logBuffer, timeMillis: now, connection: logID, token: broadcast ? "" : token, apnsID: apnsID,
                    collapseID: checked.collapseID, topic: checked.topic, pushType: checked.pushType.rawValue,
                    priority: checked.priority, expiration: request.expiration, payloadBytes: request.bodyBytes,
                    payload: loop.logPayloads ? request.body : nil, channel: broadcast ? token : nil)
            }
            // A broadcast's answer always carries a unique id (Apple's page lists it).
            return .accepted(apnsID: apnsID, uniqueID: loop.sandbox || broadcast ? loop.random.uuid() : nil)
        }
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS as APNs advertises it: 1 for a token-auth connection
    /// before its first accepted push (if `startAtOne`), 1 after a rejection (if
    /// `dropToOneAfterRejection`) until the next acceptance, else the configured value.
    func updateAdvertisedStreams() {
        guard let session else { return }
        let faults = loop.faults
        var target = UInt32(clamping: faults.maxConcurrentStreams)
        if loop.authority != nil, credentials.certificateTopic == nil, faults.startAtOne, !hadAccepted { target = 1 }
        if faults.dropToOneAfterRejection, lastWasRejection { target = 1 }
        guard target != advertisedStreams else { return }
        advertisedStreams = target
        session.submitSettings(maxConcurrentStreams: target)
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
        case .channel(let answer, let requestID):
            submit(session, streamID: streamID, status: answer.status, apnsID: nil, uniqueID: nil, body: answer.body, stream: stream) { headers in
                headers.add("apns-request-id", requestID)
                if let channelID = answer.channelID { headers.add("apns-channel-id", channelID) }
            }
        }
    }

    /// Builds the header list in the loop's reusable one and submits it (nghttp2 copies
    /// names and values, so the list is free again when this returns).
    private func submit(
        _ session: HTTP2Session, streamID: Int32, status: Int, apnsID: [UInt8]?, uniqueID: [UInt8]?, body: [UInt8]?, stream: Stream,
        extraHeaders: (HTTP2Headers) -> Void = { _ in }
    ) {
        let headers = loop.responseHeaders
        headers.reset()
        var digits: (UInt8, UInt8, UInt8) = (UInt8(ascii: "0") + UInt8(status / 100 % 10), UInt8(ascii: "0") + UInt8(status / 10 % 10), UInt8(ascii: "0") + UInt8(status % 10))
        withUnsafeBytes(of: &digits) { headers.add(":status", $0) }
        if body != nil { headers.add("content-type", Self.jsonType) }
        if let apnsID { headers.add("apns-id", apnsID) }
        if let uniqueID { headers.add("apns-unique-id", uniqueID) }
        extraHeaders(headers)
        if let body {
            stream.responseBody = body
            stream.responseOffset = 0
        }
        session.submitResponse(stream: streamID, headers, hasBody: body != nil)
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
/// `expiration` is the header as sent; with `--log-payloads`, `"payload":"…"` (the body as a string) too.
enum LogLine {
    static func append(
        into buffer: inout [UInt8], timeMillis: Int64, connection: UInt64, token: String, apnsID: [UInt8], collapseID: String?,
        topic: String, pushType: String, priority: Int, expiration: String?, payloadBytes: Int, payload: [UInt8]? = nil, channel: String? = nil
    ) {
        buffer.append(contentsOf: "{\"time_ms\":".utf8)
        buffer.append(contentsOf: String(timeMillis).utf8)
        buffer.append(contentsOf: ",\"connection\":".utf8)
        buffer.append(contentsOf: String(connection).utf8)
        if let channel {
            buffer.append(contentsOf: ",\"channel\":".utf8)
            appendString(channel, into: &buffer)
        }
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
        if let payload {
            buffer.append(contentsOf: ",\"payload\":".utf8)
            appendString(String(decoding: payload, as: UTF8.self), into: &buffer)
        }
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

/// A TLS connection as the session's byte channel.
private final class TLSChannel: ByteChannel {
    private let tls: TLSConnection

    init(_ tls: TLSConnection) { self.tls = tls }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ChannelProgress { Self.progress(tls.read(into: buffer)) }

    func write(_ bytes: UnsafeRawBufferPointer) -> ChannelProgress { Self.progress(tls.write(bytes)) }

    private static func progress(_ progress: TLSConnection.Progress) -> ChannelProgress {
        switch progress {
        case .done(let count): .done(count)
        case .wantRead: .wantRead
        case .wantWrite: .wantWrite
        case .closed: .closed
        case .failed(let reason): .failed(reason)
        }
    }
}
