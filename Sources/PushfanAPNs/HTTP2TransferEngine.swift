import Foundation
import PushfanAPNsModel
import PushfanHTTP2
import PushfanSupport

/// The sender's transport: each connection is libcurl's (`CurlChannel`: resolution,
/// proxy, TLS, client certificates) carrying an nghttp2 client session (`HTTP2Session`),
/// driven by `poll` on the pool's thread.
///
/// Why libcurl carries connections but not streams: APNs lowers a connection's stream
/// limit to 1 after every rejection and refuses the streams that reach it meanwhile;
/// libcurl 7.88's own HTTP/2 answers each refused stream by closing the connection and
/// resending on a fresh one. Here a refused stream is simply sent again when the
/// connection has room, on the same connection, and a connection carries requests only
/// once the server's SETTINGS arrived (APNs starts token-auth connections at one stream).
/// GOAWAY's last-stream-id tells exactly which streams were not processed.
final class HTTP2TransferEngine: TransferEngine {
    private let scheme: [UInt8]
    private let authority: [UInt8]
    private var connections: [APNsConnection] = []
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let pacer: ConnectionPacer
    private var lastHousekeeping = ContinuousClock.now
    /// `authorization` value bytes for the current provider token.
    private var authorization: (jwt: String, value: [UInt8]) = ("", [])
    /// One request's header list, reused.
    private let headers = HTTP2Headers()
    /// `active` as last added to the in-flight gauge (pools of a process add up there).
    private var reportedInFlight = 0
    /// Answer times of this loop turn, added to the metrics once per turn.
    private var durations: Histogram.Batch?
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    /// Most times a request the server did not process is sent again before it
    /// is reported as `refusedStream` / `goAwayUnprocessed`.
    static let maxUnprocessedResends = 100

    init(_ context: Context) throws(APNsSenderError) {
        let endpoint = context.endpoint
        guard let schemeEnd = endpoint.baseURL.range(of: "://") else { throw .invalidEndpoint("no scheme in \(endpoint.baseURL)") }
        scheme = Array((endpoint.isCleartext ? "http" : "https").utf8)
        authority = Array(endpoint.baseURL[schemeEnd.upperBound...].utf8)
        // A first handle now: options libcurl refuses fail at startup, not per connection.
        _ = try CurlChannel(endpoint: endpoint, credentials: context.credentials, proxy: context.configuration.proxy, connectTimeout: context.configuration.connectTimeout)
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .invalidConfiguration("cannot create the pool's wake-up pipe: errno \(errno)") }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        pacer = ConnectionPacer(burst: 2 * context.configuration.connections, interval: .milliseconds(200))
        durations = context.metrics?.requestDuration.batch()
        super.init(context: context)
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
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

    /// Requests on the wire at once: the bulk connections' streams and the urgent one's.
    override var inFlightLimit: Int { configuration.maxInFlight + configuration.streamsPerConnection }

    override func start(_ request: PendingRequest, token: ProviderToken?) -> Bool {
        guard let connection = request.urgent ? connectionForUrgent() : connectionForBulk() else { return false }
        guard submit(request, token: token, on: connection) else { return true }
        active += 1
        return true
    }

    /// A campaign's request goes to the fullest bulk connection that still has room, so
    /// requests gather on as few connections as the load needs and the others fall idle and
    /// close (`idleTimeout`) when the load drops.
    private func connectionForBulk() -> APNsConnection? {
        var best: APNsConnection?
        var bestRoom = Int.max
        for connection in connections where connection.state == .ready && !connection.carriesUrgent {
            let room = connection.room(configured: configuration.streamsPerConnection)
            if room > 0 && room < bestRoom {
                best = connection
                bestRoom = room
            }
        }
        if best == nil { openConnectionsIfNeeded() }
        return best
    }

    /// An urgent request (a transactional message's) goes to the pool's urgent connection,
    /// opened on first need and closed like any other once idle. A campaign keeps up to its
    /// stream limit in flight on each bulk connection, and when the server reads slower than
    /// that arrives, the backlog sits in that connection's socket: a request queued behind it
    /// waits for all of it. On its own connection it waits for none. A bulk connection with
    /// nothing in flight has no backlog either and takes the request while the urgent one is
    /// not ready; the request waits for the urgent connection while it opens, and takes the
    /// bulk connection with the most room when the urgent one is full or cannot be opened now.
    private func connectionForUrgent() -> APNsConnection? {
        let own = connections.first { $0.carriesUrgent && $0.isUsable }
        if let own, own.state == .ready, own.room(configured: configuration.streamsPerConnection) > 0 { return own }
        var bulk: APNsConnection?
        var bulkRoom = 0
        for connection in connections where connection.state == .ready && !connection.carriesUrgent {
            let room = connection.room(configured: configuration.streamsPerConnection)
            if connection.streams.isEmpty && room > 0 { return connection }
            if room > bulkRoom {
                bulk = connection
                bulkRoom = room
            }
        }
        if let own {
            if own.isOpening { return nil }
        } else if ContinuousClock.now >= blockedUntil, pacer.tryAcquire(), openConnection(carriesUrgent: true) {
            return nil
        }
        if bulk == nil { openConnectionsIfNeeded() }
        return bulk
    }

    /// The highest stream limit any connection of this pool has announced (APNs' temporary
    /// 1 left out); nil before the first.
    private var peakStreamLimit: Int?

    /// A connection's SETTINGS announced `limit` concurrent streams.
    func streamLimitSeen(_ limit: Int) {
        // APNs' 1 is temporary (a new token-auth connection, the drop after a rejection).
        guard limit > 1, limit > (peakStreamLimit ?? 0) else { return }
        peakStreamLimit = limit
        if let gauge = metrics?.streamLimit { gauge.set(max(gauge.value(), Double(min(limit, configuration.streamsPerConnection)))) }
    }

    /// Connections wanted for `demand` requests that want the wire now (on it, or waiting
    /// for it): each carries the stream limit the server has shown (the configured one
    /// before it has shown any), capped by the configuration. A connection APNs has dropped
    /// to one stream after a rejection still counts at its peak: the pool waits for it to
    /// rise again rather than open more connections around the drop.
    static func wantedConnections(demand: Int, streamLimit: Int?, configuration: APNsClientConfiguration) -> Int {
        guard demand > 0 else { return 0 }
        let perConnection = max(1, min(configuration.streamsPerConnection, streamLimit ?? configuration.streamsPerConnection))
        return min(configuration.connections, (demand + perConnection - 1) / perConnection)
    }

    /// Opens bulk connections until the pool has as many usable ones as the requests on the
    /// wire and waiting for it want (`wantedConnections`), unless the reconnect backoff or
    /// the pacer says wait. Called when no ready connection has room.
    private func openConnectionsIfNeeded() {
        let wanted = Self.wantedConnections(demand: active + waitingCount, streamLimit: peakStreamLimit, configuration: configuration)
        var usable = connections.filter { $0.isUsable && !$0.carriesUrgent }.count
        while usable < wanted {
            guard ContinuousClock.now >= blockedUntil, pacer.tryAcquire(), openConnection(carriesUrgent: false) else { return }
            usable += 1
        }
    }

    /// Starts a connection attempt; false (and the failure noted) if libcurl refused it.
    @discardableResult
    private func openConnection(carriesUrgent: Bool) -> Bool {
        do {
            let channel = try CurlChannel(endpoint: endpoint, credentials: credentials, proxy: configuration.proxy, connectTimeout: configuration.connectTimeout)
            connections.append(APNsConnection(engine: self, channel: channel, carriesUrgent: carriesUrgent))
            return true
        } catch {
            connectFailed(APNsTransportFailure(.connectFailed, detail: error.description))
            return false
        }
    }

    /// Submits the request's HEADERS and DATA to the session; false (and the
    /// request failed) if nghttp2 refused it.
    private func submit(_ request: PendingRequest, token: ProviderToken?, on connection: APNsConnection) -> Bool {
        guard let session = connection.session else { return false }
        let notification = request.notification
        headers.reset()
        headers.add(":method", "POST")
        headers.add(":scheme", scheme)
        headers.add(":authority", authority)
        headers.add(":path", notification.path)
        var sink = HeaderSink(headers: headers)
        notification.writeHeaders(to: &sink)
        if let token {
            if token.jwt != authorization.jwt { authorization = (token.jwt, Array(token.authorization.utf8)) }
            headers.add("authorization", authorization.value)
        }
        headers.add("content-type", "application/json")
        headers.add("content-length", String(notification.payload.count))
        switch session.submitRequest(headers, hasBody: true) {
        case .failure(let error):
            finish(request, .failed(APNsTransportFailure(.connectionLost, detail: error.description)), token: token)
            return false
        case .success(let streamID):
            connection.streams[streamID] = APNsConnection.Stream(request: request, token: token, deadline: .now + configuration.requestTimeout)
        }
        connection.lastUsed = .now
        // Written in `performIO`, with every other request started this turn: one write
        // for many requests instead of one each.
        connection.hasUnflushedRequests = true
        return true
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
    func streamEnded(_ stream: APNsConnection.Stream, streamID: Int32, errorCode: UInt32, on connection: APNsConnection) {
        guard !stream.timedOut else { return }
        active -= 1
        if stream.status > 0 {
            durations?.observe((ContinuousClock.now - stream.submittedAt).seconds)
            let outcome = Self.outcome(
                status: stream.status, apnsID: stream.apnsID, uniqueID: stream.uniqueID, body: stream.body, request: stream.request)
            connection.noteResponse()
            finish(stream.request, .response(outcome), token: stream.token)
            return
        }
        if errorCode == HTTP2ErrorCode.refusedStream.rawValue {
            resendUnprocessed(stream, APNsTransportFailure(.refusedStream, detail: "the server refused the stream (REFUSED_STREAM)"))
        } else if let last = connection.goAwayLastStreamID, streamID > last {
            resendUnprocessed(stream, .goAway(streamID: UInt32(streamID), lastStreamID: UInt32(last), detail: connection.goAwayDetail))
        } else if !stream.sent {
            resendUnprocessed(stream, APNsTransportFailure(.connectionLost, detail: connection.closeReason ?? "closed before it was sent"))
        } else if let last = connection.goAwayLastStreamID {
            finish(stream.request, .failed(.goAway(streamID: UInt32(streamID), lastStreamID: UInt32(last), detail: connection.goAwayDetail)), token: stream.token)
        } else if errorCode != 0 {
            finish(stream.request, .failed(APNsTransportFailure(.streamReset, detail: "the server reset the stream: \(HTTP2Session.errorCodeName(errorCode))")), token: stream.token)
        } else {
            finish(stream.request, .failed(APNsTransportFailure(.connectionLost, detail: connection.closeReason ?? "the connection closed")), token: stream.token)
        }
    }

    /// Sends again something the server certainly did not process, unless it
    /// was refused too often; then the caller hears it (still "not processed").
    private func resendUnprocessed(_ stream: APNsConnection.Stream, _ failure: APNsTransportFailure) {
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
        for connection in connections where connection.hasUnflushedRequests { connection.flush() }
        var descriptors = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        // A connection libcurl is still opening has no socket yet: its thread wakes us.
        var polled: [APNsConnection] = []
        for connection in connections {
            guard let fd = connection.fd else { continue }
            descriptors.append(pollfd(fd: fd, events: connection.pollEvents, revents: 0))
            polled.append(connection)
        }
        let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
        if ready > 0 && descriptors[0].revents != 0 {
            var sink = [UInt8](repeating: 0, count: 256)
            while read(wakeRead, &sink, sink.count) > 0 {}
        }
        // Connections may be added or removed while handling events: index by the snapshot.
        for (index, connection) in polled.enumerated() where descriptors[index + 1].revents != 0 {
            connection.handle(events: descriptors[index + 1].revents)
        }
        for connection in connections where connection.state == .connecting { connection.checkConnected() }
        connections.removeAll { $0.state == .closed }
        if let gauge = metrics?.inFlight, active != reportedInFlight {
            gauge.add(Double(active - reportedInFlight))
            reportedInFlight = active
        }
        if let batch = durations, batch.count > 0 {
            metrics?.requestDuration.add(batch)
            durations = metrics?.requestDuration.batch()
        }
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
        metrics?.inFlight.add(Double(-reportedInFlight))
        reportedInFlight = 0
    }

    /// A timed-out request: reported now; its stream is cancelled.
    func timedOut(_ stream: APNsConnection.Stream) {
        active -= 1
        finish(stream.request, .failed(APNsTransportFailure(.timedOut, detail: "no answer within \(configuration.requestTimeout)")), token: stream.token)
    }
}

/// Where `APNsNotification.writeHeaders` writes: the request's header list.
private struct HeaderSink: APNsHeaderSink {
    let headers: HTTP2Headers

    mutating func header(_ name: StaticString, _ value: UnsafeRawBufferPointer) { headers.add(name, value) }
}
