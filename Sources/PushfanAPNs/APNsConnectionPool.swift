import Foundation
import Synchronization
import PushfanCore
internal import CCurl

/// Where one batch's results are gathered. Written only by the pool's thread
/// once the batch is handed over (the hand-over goes through the pool's mutex,
/// which orders it), and read by the waiting caller after the last result.
final class ResultCollector: @unchecked Sendable {
    private var results: [APNsSendResult?]
    private var remaining: Int
    private let continuation: CheckedContinuation<[APNsSendResult], Never>

    init(count: Int, continuation: CheckedContinuation<[APNsSendResult], Never>) {
        results = Array(repeating: nil, count: count)
        remaining = count
        self.continuation = continuation
    }

    func deliver(_ result: APNsSendResult, at index: Int) {
        results[index] = result
        remaining -= 1
        if remaining == 0 { continuation.resume(returning: results.map { $0! }) }
    }
}

/// A notification waiting for, or on, the wire.
struct PendingRequest: Sendable {
    let notification: APNsNotification
    let collector: ResultCollector
    let index: Int
    /// Already resent once after ExpiredProviderToken with a fresh token.
    var resentWithFreshToken = false
}

/// State shared between callers and the pool's thread.
private struct SharedState {
    var incoming: [PendingRequest] = []
    /// Requests the thread holds that are not on the wire yet.
    var waitingInThread = 0
    var roomWaiters: [CheckedContinuation<Void, Never>] = []
    var closing = false
    var closed = false
    var closeWaiters: [CheckedContinuation<Void, Never>] = []

    var queued: Int { incoming.count + waitingInThread }
}

/// The mutex-guarded state, in a class so the pool and its thread share it.
private final class SharedBox: Sendable {
    let state = Mutex(SharedState())
}

/// libcurl's multi handle, moved to the pool's thread after creation. Only
/// `curl_multi_wakeup` is called on it from other threads, which libcurl allows.
private struct MultiHandle: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

/// One endpoint and one credential: HTTP/2 connections driven by libcurl's
/// multi interface on a dedicated thread (never the cooperative pool).
///
/// libcurl multiplexes the transfers over at most `connections` connections
/// with at most `streamsPerConnection` streams each (fewer when the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS says so) and reuses its easy handles. Callers
/// hand over batches; the thread keeps `maxInFlight` requests on the wire,
/// queues the rest (callers wait when `maxQueued` are queued) and resumes each
/// batch's caller once when all its results are in.
final class APNsConnectionPool: Sendable {
    private let multi: MultiHandle
    private let shared = SharedBox()
    private let maxQueued: Int

    init(
        endpoint: APNsEndpoint, credentials: APNsCredentials, configuration: APNsClientConfiguration,
        tokenCache: ProviderTokenCache, logger: Logger
    ) throws(APNsSenderError) {
        guard Curl.initialized else { throw .libcurl("curl_global_init", "initialization failed") }
        guard let pointer = curl_multi_init() else { throw .libcurl("curl_multi_init", "out of memory") }
        let multi = MultiHandle(pointer: pointer)
        do {
            try Curl.check(pushfan_curl_multi_setopt_long(pointer, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX)), "CURLMOPT_PIPELINING")
            try Curl.check(pushfan_curl_multi_setopt_long(pointer, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.connections), "CURLMOPT_MAX_HOST_CONNECTIONS")
            try Curl.check(pushfan_curl_multi_setopt_long(pointer, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.connections), "CURLMOPT_MAX_TOTAL_CONNECTIONS")
            try Curl.check(pushfan_curl_multi_setopt_long(pointer, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.streamsPerConnection), "CURLMOPT_MAX_CONCURRENT_STREAMS")
        } catch {
            curl_multi_cleanup(pointer)
            throw error
        }
        self.multi = multi
        self.maxQueued = configuration.maxQueued
        let shared = self.shared
        let thread = Thread {
            let engine = TransferEngine(
                multi: multi.pointer, endpoint: endpoint, credentials: credentials, configuration: configuration,
                tokenCache: tokenCache, logger: logger, shared: shared)
            engine.run()
        }
        thread.name = "pushfan-apns-\(credentials.poolIdentity)"
        thread.start()
    }

    /// Sends `notifications` and returns their results in the same order. Waits
    /// first while the pool's queue is full.
    func send(_ notifications: [APNsNotification]) async -> [APNsSendResult] {
        guard !notifications.isEmpty else { return [] }
        await waitForRoom()
        return await withCheckedContinuation { continuation in
            let collector = ResultCollector(count: notifications.count, continuation: continuation)
            let accepted = shared.state.withLock { state in
                guard !state.closing else { return false }
                state.incoming.reserveCapacity(state.incoming.count + notifications.count)
                for (index, notification) in notifications.enumerated() {
                    state.incoming.append(PendingRequest(notification: notification, collector: collector, index: index))
                }
                return true
            }
            if accepted {
                curl_multi_wakeup(multi.pointer)
            } else {
                let closed = APNsSendResult.failed(APNsTransportFailure(.senderClosed, detail: "the sender is shutting down"))
                for index in notifications.indices { collector.deliver(closed, at: index) }
            }
        }
    }

    private func waitForRoom() async {
        let maxQueued = self.maxQueued
        while shared.state.withLock({ !$0.closing && $0.queued >= maxQueued }) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let parked = shared.state.withLock { state in
                    guard !state.closing, state.queued >= maxQueued else { return false }
                    state.roomWaiters.append(continuation)
                    return true
                }
                if !parked { continuation.resume() }
            }
        }
    }

    /// Stops taking work: queued requests fail as `senderClosed` (never sent),
    /// requests on the wire get `shutdownGrace` to finish, then the thread exits.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = shared.state.withLock { state in
                state.closing = true
                if state.closed { return true }
                state.closeWaiters.append(continuation)
                return false
            }
            curl_multi_wakeup(multi.pointer)
            if done { continuation.resume() }
        }
    }

    /// The thread's side of `SharedState`; the engine calls these.
    fileprivate static func take(_ shared: SharedBox, waitingInThread: Int, maxQueued: Int)
        -> (requests: [PendingRequest], closing: Bool, roomWaiters: [CheckedContinuation<Void, Never>])
    {
        shared.state.withLock { state in
            let requests = state.incoming
            state.incoming = []
            state.waitingInThread = waitingInThread + requests.count
            var waiters: [CheckedContinuation<Void, Never>] = []
            if !state.roomWaiters.isEmpty && (state.queued < maxQueued || state.closing) {
                waiters = state.roomWaiters
                state.roomWaiters = []
            }
            return (requests, state.closing, waiters)
        }
    }
}

/// Paces new connections. Apple treats rapid connect/disconnect as an attack,
/// and libcurl 7.88 closes a whole connection and connects again whenever a
/// stream is refused (REFUSED_STREAM, as APNs does while its stream limit is
/// low), which would turn a limit drop into a reconnect storm. A token bucket:
/// `burst` connects at once, then one per `interval`.
final class ConnectionPacer {
    private var tokens: Double
    private let capacity: Double
    private let interval: Duration
    private var last = ContinuousClock.now
    /// Connects refused so far, for logs and tests.
    private(set) var deferred = 0

    init(burst: Int, interval: Duration) {
        capacity = Double(burst)
        tokens = capacity
        self.interval = interval
    }

    func tryAcquire() -> Bool {
        refill()
        guard tokens >= 1 else {
            deferred += 1
            return false
        }
        tokens -= 1
        return true
    }

    /// When the next connect will be allowed.
    var nextAllowed: ContinuousClock.Instant {
        refill()
        return tokens >= 1 ? last : last + interval * (1 - tokens)
    }

    private func refill() {
        let now = ContinuousClock.now
        tokens = min(capacity, tokens + (now - last) / interval)
        last = now
    }
}

/// One reusable easy handle with the buffers of the request it carries.
/// Owned by the engine's `slots` array for the engine's whole life: libcurl gets
/// unretained pointers to it (`CURLOPT_PRIVATE`, `CURLOPT_WRITEDATA`).
private final class TransferSlot {
    let easy: UnsafeMutableRawPointer
    var request: PendingRequest?
    /// The provider token the request carried, to report it if APNs calls it expired.
    var token: ProviderToken?
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// The payload as libcurl reads it (`CURLOPT_POSTFIELDS` does not copy).
    var payload: UnsafeMutableRawBufferPointer
    var responseBody: [UInt8] = []
    let errorText: UnsafeMutablePointer<CChar>
    /// Scratch for building NUL-terminated header lines and the URL.
    var line: [UInt8] = []
    let pacer: ConnectionPacer
    /// The pacer refused the connection this transfer needed: requeue, not a failure.
    var connectDeferred = false
    /// Connection events for the engine's bookkeeping (set by the engine, which
    /// owns the slot; libcurl reports a connection's close to the slot that
    /// opened it, whichever transfer is running then).
    var onSocketOpened: ((Int32) -> Void)?
    var onSocketClosed: ((Int32) -> Void)?

    init(easy: UnsafeMutableRawPointer, pacer: ConnectionPacer) {
        self.easy = easy
        self.pacer = pacer
        payload = .allocate(byteCount: 4096, alignment: 1)
        errorText = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        payload.deallocate()
        errorText.deallocate()
    }

    /// Most response-body bytes kept: APNs error bodies are a few dozen bytes.
    static let maxBody = 16 * 1024
}

/// Header lines that repeat from request to request, kept as NUL-terminated
/// bytes: a campaign sends one topic, push type and priority to every device,
/// and one provider token serves for 50 minutes.
private struct HeaderLines {
    private var key: (topic: String, pushType: Campaign.PushType, priority: APNsNotification.Priority)?
    private var fixed: [[UInt8]] = []
    private var jwt = ""
    private var authorizationLine: [UInt8] = []

    /// libcurl would add `accept: */*` and a form content type; APNs wants neither.
    static let replacedDefaults: [[UInt8]] = [Array("content-type: application/json\0".utf8), Array("accept:\0".utf8)]

    mutating func lines(for notification: APNsNotification) -> [[UInt8]] {
        if let key, key.topic == notification.topic, key.pushType == notification.pushType, key.priority == notification.priority {
            return fixed
        }
        key = (notification.topic, notification.pushType, notification.priority)
        fixed = [
            Array("apns-topic: \(notification.topic)\0".utf8),
            Array("apns-push-type: \(notification.pushType.rawValue)\0".utf8),
            Array("apns-priority: \(notification.priority.rawValue)\0".utf8),
        ]
        return fixed
    }

    mutating func authorization(_ token: ProviderToken) -> [UInt8] {
        if token.jwt != jwt {
            jwt = token.jwt
            authorizationLine = Array("authorization: \(token.authorization)\0".utf8)
        }
        return authorizationLine
    }

    /// The UUID as APNs wants it: lowercase, with hyphens.
    static func appendLowercaseUUID(_ uuid: UUID, to line: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        withUnsafeBytes(of: uuid.uuid) { bytes in
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { line.append(UInt8(ascii: "-")) }
                line.append(digits.utf8Start[Int(byte >> 4)])
                line.append(digits.utf8Start[Int(byte & 0x0F)])
            }
        }
    }
}

/// Runs on the pool's thread: owns the multi handle, the slots and every
/// request after hand-over.
private final class TransferEngine {
    private let multi: UnsafeMutableRawPointer
    private let endpoint: APNsEndpoint
    private let credentials: APNsCredentials
    private let configuration: APNsClientConfiguration
    private let tokenCache: ProviderTokenCache
    private let logger: Logger
    private let shared: SharedBox

    private var slots: [TransferSlot] = []
    private var freeSlots: [TransferSlot] = []
    private var active = 0
    /// Requests not on the wire yet, oldest first from `waitingHead`.
    private var waiting: [PendingRequest] = []
    private var waitingHead = 0
    /// No new transfer starts before this (reconnect backoff).
    private var blockedUntil = ContinuousClock.now
    private var consecutiveConnectFailures = 0
    private var lastUpkeep = ContinuousClock.now
    private var headerLines = HeaderLines()
    private let pacer: ConnectionPacer
    /// APNs lowers a connection's stream limit to 1 after a rejection, until
    /// the next acceptance; while the last answer was a rejection the pool keeps
    /// one request per connection in flight, so it does not open streams the
    /// server would refuse.
    /// Open connections by socket: true once a response came back on it.
    ///
    /// libcurl assumes 100 streams on a new connection until the server's
    /// SETTINGS arrive, but APNs allows a token-auth connection 1 stream until
    /// its first valid request and refuses the others, and libcurl 7.88 answers
    /// a refused stream by closing the connection and connecting again. So a
    /// new ("cold") connection gets one request; nothing more starts until it
    /// answers (after its SETTINGS), and the pool keeps on the wire only what
    /// its answering ("warm") connections can carry, plus one request to open
    /// the next connection.
    private var connections: [Int32: Bool] = [:]

    init(
        multi: UnsafeMutableRawPointer, endpoint: APNsEndpoint, credentials: APNsCredentials,
        configuration: APNsClientConfiguration, tokenCache: ProviderTokenCache, logger: Logger, shared: SharedBox
    ) {
        self.multi = multi
        self.endpoint = endpoint
        self.credentials = credentials
        self.configuration = configuration
        self.tokenCache = tokenCache
        self.logger = logger
        self.shared = shared
        pacer = ConnectionPacer(burst: 2 * configuration.connections, interval: .milliseconds(200))
    }

    /// Requests allowed on the wire now (see `connections`).
    private var inFlightLimit: Int {
        var warm = 0
        for isWarm in connections.values {
            guard isWarm else { return active }
            warm += 1
        }
        let opening = warm < configuration.connections ? 1 : 0
        return min(configuration.maxInFlight, warm * configuration.streamsPerConnection + opening)
    }

    private var waitingCount: Int { waiting.count - waitingHead }

    func run() {
        var closing = false
        var closeDeadline: ContinuousClock.Instant?
        while true {
            let taken = APNsConnectionPool.take(shared, waitingInThread: waitingCount, maxQueued: configuration.maxQueued)
            waiting.append(contentsOf: taken.requests)
            for waiter in taken.roomWaiters { waiter.resume() }
            if taken.closing && !closing {
                closing = true
                closeDeadline = .now + configuration.shutdownGrace
                failWaiting(APNsTransportFailure(.senderClosed, detail: "the sender shut down before this was sent"))
            }
            if !closing { startWaiting() }

            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            collectCompletions()

            if closing {
                failWaiting(APNsTransportFailure(.senderClosed, detail: "the sender shut down before this was sent"))
                if active == 0 { break }
                if let closeDeadline, ContinuousClock.now >= closeDeadline {
                    abortActive(APNsTransportFailure(.connectionLost, detail: "the sender shut down with this request on the wire"))
                    break
                }
            }
            keepConnectionsAlive()
            curl_multi_poll(multi, nil, 0, pollTimeoutMilliseconds(), nil)
        }
        finish()
    }

    // MARK: starting transfers

    private func startWaiting() {
        let limit = inFlightLimit
        guard waitingCount > 0, active < limit else { return }
        let now = ContinuousClock.now
        guard now >= blockedUntil else { return }
        var token: ProviderToken?
        if case .token(let key) = credentials {
            do {
                token = try tokenCache.token(for: key)
            } catch {
                failWaiting(APNsTransportFailure(.credentialsUnavailable, detail: error.description))
                return
            }
        }
        while active < limit, waitingHead < waiting.count {
            let request = waiting[waitingHead]
            waitingHead += 1
            start(request, token: token)
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 4096 && waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    private func start(_ request: PendingRequest, token: ProviderToken?) {
        let slot: TransferSlot
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            guard let created = makeSlot() else {
                request.collector.deliver(.failed(APNsTransportFailure(.connectFailed, detail: "libcurl could not create a handle")), at: request.index)
                return
            }
            slot = created
        }
        let notification = request.notification
        let easy = slot.easy
        slot.request = request
        slot.token = token
        slot.responseBody.removeAll(keepingCapacity: true)
        slot.errorText[0] = 0
        slot.connectDeferred = false

        // URL
        slot.line.removeAll(keepingCapacity: true)
        slot.line.append(contentsOf: endpoint.baseURL.utf8)
        slot.line.append(contentsOf: "/3/device/".utf8)
        slot.line.append(contentsOf: notification.token.hex.utf8)
        slot.line.append(0)
        _ = slot.line.withUnsafeBufferPointer { pushfan_curl_easy_setopt_pointer(easy, CURLOPT_URL, $0.baseAddress) }

        // Headers (the same as `APNsNotification.headers`, written without
        // intermediate strings), the provider token, and libcurl's defaults
        // replaced. libcurl copies each line.
        var list: UnsafeMutablePointer<curl_slist>?
        let fixed = headerLines.lines(for: notification)
        for line in fixed { list = line.withUnsafeBufferPointer { curl_slist_append(list, $0.baseAddress) } }
        if let expiration = notification.expiration.headerValue { list = appendHeader(list, slot, "apns-expiration", expiration) }
        if let collapseID = notification.collapseID { list = appendHeader(list, slot, "apns-collapse-id", collapseID) }
        slot.line.removeAll(keepingCapacity: true)
        slot.line.append(contentsOf: "apns-id: ".utf8)
        HeaderLines.appendLowercaseUUID(notification.apnsID, to: &slot.line)
        slot.line.append(0)
        list = slot.line.withUnsafeBufferPointer { curl_slist_append(list, $0.baseAddress) }
        if let token { list = headerLines.authorization(token).withUnsafeBufferPointer { curl_slist_append(list, $0.baseAddress) } }
        for line in HeaderLines.replacedDefaults { list = line.withUnsafeBufferPointer { curl_slist_append(list, $0.baseAddress) } }
        slot.headerList = list
        _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, list)

        // Body
        let payload = notification.payload
        if slot.payload.count < payload.count {
            slot.payload.deallocate()
            slot.payload = .allocate(byteCount: payload.count, alignment: 1)
        }
        payload.copyBytes(to: UnsafeMutableRawBufferPointer(rebasing: slot.payload[0..<payload.count]))
        _ = pushfan_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(payload.count))
        _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_POSTFIELDS, slot.payload.baseAddress)
        // After ExpiredProviderToken: a new connection with the new token.
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, request.resentWithFreshToken ? 1 : 0)

        if curl_multi_add_handle(multi, easy) != CURLM_OK {
            release(slot)
            request.collector.deliver(.failed(APNsTransportFailure(.connectFailed, detail: "libcurl refused the transfer")), at: request.index)
            return
        }
        active += 1
    }

    /// `name: value` as a NUL-terminated line; libcurl copies it.
    private func appendHeader(
        _ list: UnsafeMutablePointer<curl_slist>?, _ slot: TransferSlot, _ name: StaticString, _ value: String
    ) -> UnsafeMutablePointer<curl_slist>? {
        slot.line.removeAll(keepingCapacity: true)
        slot.line.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        slot.line.append(contentsOf: ": ".utf8)
        slot.line.append(contentsOf: value.utf8)
        slot.line.append(0)
        return slot.line.withUnsafeBufferPointer { curl_slist_append(list, $0.baseAddress) }
    }

    private func makeSlot() -> TransferSlot? {
        guard let easy = curl_easy_init() else { return nil }
        let slot = TransferSlot(easy: easy, pacer: pacer)
        // Unowned: the engine owns the slot.
        slot.onSocketOpened = { [unowned self] socket in self.connections[socket] = false }
        slot.onSocketClosed = { [unowned self] socket in self.connections[socket] = nil }
        // Unretained: `slots` keeps every slot alive as long as the engine, which
        // outlives all of its transfers (finish() removes them first).
        let context = Unmanaged.passUnretained(slot).toOpaque()
        let https = !endpoint.isCleartext
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = pushfan_curl_easy_setopt_long(
            easy, CURLOPT_HTTP_VERSION, https ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
        _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, context)
        _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = pushfan_curl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let slot = Unmanaged<TransferSlot>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            if let data, slot.responseBody.count + length <= TransferSlot.maxBody {
                slot.responseBody.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
            }
            return length
        }
        _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, slot.errorText)
        _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, context)
        _ = pushfan_curl_easy_setopt_opensocket(easy) { context, _, address in
            let slot = Unmanaged<TransferSlot>.fromOpaque(context!).takeUnretainedValue()
            guard let address, slot.pacer.tryAcquire() else {
                slot.connectDeferred = true
                return pushfan_curl_socket_bad()
            }
            let descriptor = socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
            if descriptor >= 0 { slot.onSocketOpened?(descriptor) }
            return descriptor
        }
        _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_CLOSESOCKETDATA, context)
        _ = pushfan_curl_easy_setopt_closesocket(easy) { context, descriptor in
            Unmanaged<TransferSlot>.fromOpaque(context!).takeUnretainedValue().onSocketClosed?(descriptor)
            return close(descriptor)
        }
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(configuration.requestTimeout.milliseconds))
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_MAXAGE_CONN, max(1, Int(configuration.idleTimeout.seconds)))
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_UPKEEP_INTERVAL_MS, Int(configuration.pingInterval.milliseconds))
        _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        if https {
            if let caFile = endpoint.caFile { _ = setString(easy, CURLOPT_CAINFO, caFile) }
            if !endpoint.verifyPeer {
                _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
                _ = pushfan_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
            }
            if case .certificate(let certificate) = credentials {
                _ = setString(easy, CURLOPT_SSLCERT, certificate.certificateFile)
                _ = setString(easy, CURLOPT_SSLCERTTYPE, certificate.format.rawValue)
                if let keyFile = certificate.keyFile { _ = setString(easy, CURLOPT_SSLKEY, keyFile) }
                if let password = certificate.password { _ = setString(easy, CURLOPT_KEYPASSWD, password) }
            }
        }
        slots.append(slot)
        return slot
    }

    /// libcurl copies string options, so a temporary C string is enough.
    private func setString(_ easy: UnsafeMutableRawPointer, _ option: CURLoption, _ value: String) -> CURLcode {
        value.withCString { pushfan_curl_easy_setopt_pointer(easy, option, $0) }
    }

    // MARK: completions

    private func collectCompletions() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = pushfan_curl_msg_result(message)
            var context: UnsafeMutableRawPointer?
            _ = pushfan_curl_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &context)
            guard let context else { continue }
            complete(Unmanaged<TransferSlot>.fromOpaque(context).takeUnretainedValue(), code: code)
        }
    }

    private func complete(_ slot: TransferSlot, code: CURLcode) {
        guard var request = slot.request else { return }
        let result: APNsSendResult
        if code == CURLE_OK {
            var status = 0
            _ = pushfan_curl_easy_getinfo_long(slot.easy, CURLINFO_RESPONSE_CODE, &status)
            var headers: [(String, String)] = []
            for name in ["apns-id", "apns-unique-id"] {
                var header: UnsafeMutablePointer<curl_header>?
                if curl_easy_header(slot.easy, name, 0, UInt32(CURLH_HEADER), -1, &header) == CURLHE_OK, let header {
                    headers.append((name, String(cString: header.pointee.value)))
                }
            }
            result = .response(APNsOutcome(
                status: status, headers: headers, body: slot.responseBody, requestAPNsID: request.notification.apnsIDString))
        } else {
            let failure = classify(code, slot)
            logger.debug("apns.transfer.failed", ["cause": failure.cause.rawValue, "curl_code": "\(code.rawValue)", "detail": failure.detail])
            result = .failed(failure)
        }
        let token = slot.token
        let deferredByPacer = slot.connectDeferred && code == CURLE_COULDNT_CONNECT
        if code == CURLE_OK {
            // The connection answered: it is warm.
            var socket: curl_socket_t = pushfan_curl_socket_bad()
            if pushfan_curl_easy_getinfo_socket(slot.easy, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK,
               connections[socket] != nil
            {
                connections[socket] = true
            }
        }
        curl_multi_remove_handle(multi, slot.easy)
        active -= 1
        release(slot)

        if deferredByPacer {
            // Not sent: it waits for the next connect the pacer allows.
            blockedUntil = max(blockedUntil, pacer.nextAllowed)
            waiting.insert(request, at: waitingHead)
            return
        }
        switch result {
        case .failed(let failure) where failure.cause == .connectFailed:
            noteConnectFailure(failure)
        case .response:
            consecutiveConnectFailures = 0
        default:
            break
        }
        // ExpiredProviderToken: refresh once, reconnect and resend, unless the
        // token is too young to replace (then the caller's retry waits).
        if case .response(.rejected(_, .expiredProviderToken, _)) = result, !request.resentWithFreshToken,
           case .token(let key) = credentials, let token
        {
            switch tokenCache.invalidate(token, for: key) {
            case .refreshNow, .alreadyReplaced:
                logger.notice("apns.token.expired", ["key_id": key.keyID, "action": "refresh_and_reconnect"])
                request.resentWithFreshToken = true
                waiting.insert(request, at: waitingHead)
                return
            case .refreshAt(let date):
                logger.warning("apns.token.expired", ["key_id": key.keyID, "action": "too_young_to_refresh", "refresh_at": "\(date)"])
            }
        }
        request.collector.deliver(result, at: request.index)
    }

    private func release(_ slot: TransferSlot) {
        curl_slist_free_all(slot.headerList)
        slot.headerList = nil
        slot.request = nil
        slot.token = nil
        freeSlots.append(slot)
    }

    /// What libcurl's error code says about whether APNs saw the request.
    private func classify(_ code: CURLcode, _ slot: TransferSlot) -> APNsTransportFailure {
        let detail = slot.errorText[0] != 0 ? String(cString: slot.errorText) : String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_SSL_CONNECT_ERROR,
             CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CIPHER,
             CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_UNSUPPORTED_PROTOCOL:
            return APNsTransportFailure(.connectFailed, detail: detail)
        case CURLE_OPERATION_TIMEDOUT:
            var pretransfer: curl_off_t = 0
            _ = withUnsafeMutablePointer(to: &pretransfer) {
                pushfan_curl_easy_getinfo_pointer(slot.easy, CURLINFO_PRETRANSFER_TIME_T, UnsafeMutableRawPointer($0).assumingMemoryBound(to: UnsafeMutableRawPointer?.self))
            }
            return APNsTransportFailure(pretransfer == 0 ? .connectFailed : .timedOut, detail: detail)
        case CURLE_HTTP2_STREAM:
            return APNsTransportFailure(detail.contains("REFUSED_STREAM") ? .refusedStream : .streamReset, detail: detail)
        default:
            return APNsTransportFailure(.connectionLost, detail: detail)
        }
    }

    /// Backs off new connection attempts: one step per failed round (the
    /// transfers that failed together count once).
    private func noteConnectFailure(_ failure: APNsTransportFailure) {
        let now = ContinuousClock.now
        guard now >= blockedUntil else { return }
        consecutiveConnectFailures += 1
        let exponent = Double(min(consecutiveConnectFailures - 1, 30))
        let ceiling = min(configuration.reconnectMaxDelay.seconds, configuration.reconnectBaseDelay.seconds * pow(2, exponent))
        let delay = Duration.seconds(Double.random(in: (ceiling / 2)...ceiling))
        blockedUntil = now + delay
        logger.warning("apns.connect.failed", [
            "endpoint": endpoint.baseURL, "error": failure.detail, "attempt": "\(consecutiveConnectFailures)",
            "retry_in_ms": "\(delay.milliseconds)",
        ])
    }

    private func failWaiting(_ failure: APNsTransportFailure) {
        while waitingHead < waiting.count {
            let request = waiting[waitingHead]
            waitingHead += 1
            request.collector.deliver(.failed(failure), at: request.index)
        }
        waiting.removeAll(keepingCapacity: true)
        waitingHead = 0
    }

    private func abortActive(_ failure: APNsTransportFailure) {
        for slot in slots where slot.request != nil {
            let request = slot.request!
            curl_multi_remove_handle(multi, slot.easy)
            active -= 1
            release(slot)
            request.collector.deliver(.failed(failure), at: request.index)
        }
    }

    // MARK: housekeeping

    /// HTTP/2 PING through `curl_easy_upkeep`, which needs a handle that is in
    /// the multi handle: so connections are pinged while transfers run, and an
    /// idle pool relies on `idleTimeout` and libcurl's liveness check on reuse.
    private func keepConnectionsAlive() {
        let now = ContinuousClock.now
        guard now - lastUpkeep >= configuration.pingInterval else { return }
        lastUpkeep = now
        if let slot = slots.first(where: { $0.request != nil }) { _ = curl_easy_upkeep(slot.easy) }
    }

    private func pollTimeoutMilliseconds() -> Int32 {
        var timeout: Int = 1000
        if waitingCount > 0, active < inFlightLimit {
            let wait = blockedUntil - ContinuousClock.now
            timeout = min(timeout, max(0, Int(wait.milliseconds)))
        }
        return Int32(timeout)
    }

    private func finish() {
        for slot in slots where slot.request != nil { curl_multi_remove_handle(multi, slot.easy) }
        // The multi handle closes the cached connections through the slots'
        // close-socket callbacks, so it goes before the slots.
        curl_multi_cleanup(multi)
        slots.removeAll()
        freeSlots.removeAll()
        let waiters = shared.state.withLock { state in
            state.closed = true
            let waiters = state.closeWaiters + state.roomWaiters
            state.closeWaiters = []
            state.roomWaiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
