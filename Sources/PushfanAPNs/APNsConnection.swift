import Foundation
import PushfanAPNsModel
import PushfanHTTP2

/// One APNs connection: libcurl's connection (`CurlChannel`) carrying an nghttp2 client
/// session (`HTTP2Session`), and the requests on it. Owned by the engine's `connections`;
/// it is the session's delegate, and `close()` deletes the session before the engine can
/// drop the connection.
final class APNsConnection: HTTP2SessionDelegate {
    enum State {
        case connecting, awaitingSettings, ready, draining, closed
    }

    /// One request on this connection.
    final class Stream {
        let request: PendingRequest
        let token: ProviderToken?
        let submittedAt = ContinuousClock.now
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
    /// Carries only urgent requests (`PendingRequest.urgent`): its socket and the server's
    /// reading of it never hold a campaign's backlog.
    let carriesUrgent: Bool
    private let channel: CurlChannel
    private var attempt: ConnectAttempt?
    private(set) var session: HTTP2Session?
    private(set) var state = State.connecting
    var streams: [Int32: Stream] = [:]
    private(set) var goAwayLastStreamID: Int32?
    private(set) var goAwayDetail = ""
    private(set) var closeReason: String?
    private let openedAt = ContinuousClock.now
    var lastUsed = ContinuousClock.now
    /// Requests were submitted since the last `flush`.
    var hasUnflushedRequests = false
    private var lastRead = ContinuousClock.now
    private var pingSentAt: ContinuousClock.Instant?
    /// Its session got ready once: counted as open until it closes.
    private var wasReady = false

    /// Starts connecting on a thread of its own (`ConnectAttempt`).
    init(engine: HTTP2TransferEngine, channel: CurlChannel, carriesUrgent: Bool = false) {
        self.engine = engine
        self.carriesUrgent = carriesUrgent
        self.channel = channel
        attempt = ConnectAttempt(channel, wake: engine.waker)
    }

    var isOpening: Bool { state == .connecting || state == .awaitingSettings }

    /// Open or opening: neither draining nor closed.
    var isUsable: Bool { state != .draining && state != .closed }

    /// The socket to poll; nil while libcurl is still connecting.
    var fd: Int32? { state == .connecting || state == .closed ? nil : channel.socket }

    /// Streams this connection can take now: the smaller of Pushfan's limit and
    /// the server's current SETTINGS_MAX_CONCURRENT_STREAMS, less those open.
    func room(configured: Int) -> Int {
        guard let session else { return 0 }
        return min(configured, session.remoteMaxConcurrentStreams) - streams.count
    }

    var pollEvents: Int16 { Int16(POLLIN) | (session?.wantsWrite == true ? Int16(POLLOUT) : 0) }

    // MARK: events

    /// Called on every loop turn while connecting: starts the session once libcurl is done.
    func checkConnected() {
        guard state == .connecting, let result = attempt?.result else { return }
        attempt = nil
        engine.logger.debug("apns.connection.connected", ["after_ms": "\((ContinuousClock.now - openedAt).milliseconds)", "error": result ?? ""])
        if let failure = result { return close(reason: failure) }
        do {
            let session = try HTTP2Session(role: .client, delegate: self)
            self.session = session
            session.submitSettings(enablePush: false)
        } catch {
            return close(reason: error.description)
        }
        state = .awaitingSettings
        lastRead = .now
        flush()
    }

    func handle(events: Int16) {
        guard state != .connecting && state != .closed else { return }
        if events & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readAvailable() }
        if state != .closed, events & Int16(POLLOUT) != 0 { flush() }
    }

    private func readAvailable() {
        guard let session else { return }
        let result = session.receive(from: channel, buffer: engine.readBuffer) {
            self.lastRead = .now
            return self.state != .closed
        }
        switch result {
        case .drained, .stopped: flush()
        case .ended(let reason): close(reason: reason)
        }
    }

    /// Moves nghttp2's pending frames to the connection; closes a drained or ended one.
    func flush() {
        hasUnflushedRequests = false
        guard let session, state != .closed else { return }
        if let failure = session.flush(to: channel) { return close(reason: failure) }
        if state == .draining && streams.isEmpty {
            close(reason: goAwayLastStreamID != nil ? "GOAWAY: \(goAwayDetail)" : "drained")
        } else if session.isFinished {
            close(reason: goAwayLastStreamID != nil ? "GOAWAY: \(goAwayDetail)" : "the session ended")
        }
    }

    // MARK: HTTP2SessionDelegate

    func http2Header(_ streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[streamID] else { return }
        if name.elementsEqual(":status".utf8) {
            stream.status = Int(String(decoding: value, as: UTF8.self)) ?? 0
        } else if name.elementsEqual("apns-id".utf8) {
            stream.apnsID = String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual("apns-unique-id".utf8) {
            stream.uniqueID = String(decoding: value, as: UTF8.self)
        }
    }

    func http2Data(_ streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[streamID] else { return }
        let room = 16 * 1024 - stream.body.count
        stream.body.append(contentsOf: UnsafeBufferPointer(rebasing: bytes.prefix(max(room, 0))))
    }

    func http2SettingsReceived() {
        if let limit = session?.remoteMaxConcurrentStreams { engine.streamLimitSeen(limit) }
        guard state == .awaitingSettings else { return }
        state = .ready
        wasReady = true
        engine.logger.debug("apns.connection.ready", ["after_ms": "\((ContinuousClock.now - openedAt).milliseconds)"])
        engine.metrics?.connectionsOpened.add()
        engine.metrics?.connectionsOpen.add(1)
    }

    func http2GoAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeBufferPointer<UInt8>) {
        var detail = HTTP2Session.errorCodeName(errorCode)
        if !debugData.isEmpty { detail += ": " + String(decoding: debugData.prefix(256), as: UTF8.self) }
        goAwayLastStreamID = lastStreamID
        goAwayDetail = detail
        if state != .closed { state = .draining }
    }

    func http2PingAcknowledged() { pingSentAt = nil }

    func http2HeadersSent(_ streamID: Int32) { streams[streamID]?.sent = true }

    func http2StreamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        // Called from inside nghttp2: the session must not be closed here
        // (`flush` closes a drained connection afterwards).
        engine.streamEnded(stream, streamID: streamID, errorCode: errorCode, on: self)
    }

    func http2Body(_ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool) {
        guard let stream = streams[streamID] else { return (0, true) }
        let payload = stream.request.notification.payload
        let count = min(buffer.count, payload.count - stream.offset)
        if count > 0 {
            payload.copyBytes(
                to: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]),
                from: (payload.startIndex + stream.offset)..<(payload.startIndex + stream.offset + count))
        }
        stream.offset += count
        return (count, stream.offset == payload.count)
    }

    /// An answer came back: the connection works.
    func noteResponse() { lastRead = .now }

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
        if state == .awaitingSettings, now - openedAt > engine.configuration.connectTimeout {
            return close(reason: "no HTTP/2 session within \(engine.configuration.connectTimeout)")
        }
        guard let session else { return }
        var cancelled = false
        for (streamID, stream) in streams where !stream.timedOut && now > stream.deadline {
            stream.timedOut = true
            session.resetStream(streamID, .cancel)
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
            session.terminate()
            flush()
            return
        }
        if let pingSentAt {
            if now - pingSentAt > configuration.pingInterval { close(reason: "no answer to PING within \(configuration.pingInterval)") }
            return
        }
        if streams.isEmpty && now - lastUsed > configuration.idleTimeout {
            session.terminate()
            flush()
            close(reason: "idle for \(configuration.idleTimeout)")
            return
        }
        if now - lastRead > configuration.pingInterval {
            session.submitPing()
            pingSentAt = now
            flush()
        }
    }

    /// Closes the connection; every request still on it ends (`streamEnded` sorts
    /// out which were processed).
    ///
    /// A connection that closes before its session was ready (libcurl failing to connect,
    /// or the server hanging up before its SETTINGS, as a server that rejects a client
    /// certificate after a TLS 1.3 handshake does) is a failed connection attempt.
    func close(reason: String) {
        guard state != .closed else { return }
        let wasOpening = isOpening
        engine.logger.debug("apns.connection.closed", ["state": "\(state)", "age_ms": "\((ContinuousClock.now - openedAt).milliseconds)", "reason": reason])
        state = .closed
        closeReason = reason
        let remaining = streams
        streams.removeAll()
        session?.close()
        session = nil
        if wasReady { engine.metrics?.connectionsOpen.add(-1) }
        // libcurl closes the socket when the channel is freed, with the connection.
        for (streamID, stream) in remaining.sorted(by: { $0.key < $1.key }) {
            engine.streamEnded(stream, streamID: streamID, errorCode: 0, on: self)
        }
        if wasOpening { engine.connectFailed(APNsTransportFailure(.connectFailed, detail: reason)) }
    }
}
