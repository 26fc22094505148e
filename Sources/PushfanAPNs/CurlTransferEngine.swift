import Foundation
import PushfanCore
internal import CCurl

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

/// The header lines of one transfer, as libcurl takes them (`name: value` and a NUL),
/// filled by `APNsNotification.writeHeaders`; the `authorization` line is made once per
/// provider token (one serves for 50 minutes).
struct HeaderLines: APNsHeaderSink {
    private(set) var list: UnsafeMutablePointer<curl_slist>?
    /// Reused for each line; libcurl copies it.
    private var line: [UInt8] = []
    private var jwt = ""
    private var authorizationLine: [UInt8] = []

    /// libcurl would add `accept: */*` and a form content type; APNs wants neither.
    static let replacedDefaults: [[UInt8]] = [Array("content-type: application/json\0".utf8), Array("accept:\0".utf8)]

    /// Starts the next transfer's list; the previous one belongs to its slot.
    mutating func begin() { list = nil }

    mutating func header(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        line.removeAll(keepingCapacity: true)
        line.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        line.append(contentsOf: ": ".utf8)
        line.append(contentsOf: value)
        line.append(0)
        append(line)
    }

    mutating func authorization(_ token: ProviderToken) {
        if token.jwt != jwt {
            jwt = token.jwt
            authorizationLine = Array("authorization: \(token.authorization)\0".utf8)
        }
        append(authorizationLine)
    }

    mutating func replaceDefaults() {
        for line in Self.replacedDefaults { append(line) }
    }

    private mutating func append(_ bytes: [UInt8]) {
        list = bytes.withUnsafeBufferPointer { curl_slist_append(list, $0.baseAddress) }
    }
}

/// The libcurl transport (`transport: libcurl`): libcurl's multi interface
/// multiplexes the requests over at most `connections` connections with at
/// most `streamsPerConnection` streams each, reusing its easy handles.
///
/// libcurl 7.88 answers a refused stream (APNs refuses streams while it
/// lowers a connection's limit to 1 after a rejection) by closing that
/// connection and resending on a fresh one, up to 5 times; docs/apns.md has
/// the measurements. The nghttp2 transport handles refusals per stream and is
/// the default.
final class CurlTransferEngine: TransferEngine {

    private var slots: [TransferSlot] = []
    private var freeSlots: [TransferSlot] = []
    private var lastUpkeep = ContinuousClock.now
    private var headerLines = HeaderLines()
    private let pacer: ConnectionPacer
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

    private let multi: UnsafeMutableRawPointer
    /// Pushes new transfers back while a connect is deferred.
    private var connectsBlockedUntil = ContinuousClock.now

    init(_ context: Context) throws(APNsSenderError) {
        guard Curl.initialized else { throw .libcurl("curl_global_init", "initialization failed") }
        guard let multi = curl_multi_init() else { throw .libcurl("curl_multi_init", "out of memory") }
        let configuration = context.configuration
        do {
            try Curl.check(pushfan_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX)), "CURLMOPT_PIPELINING")
            try Curl.check(pushfan_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.connections), "CURLMOPT_MAX_HOST_CONNECTIONS")
            try Curl.check(pushfan_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.connections), "CURLMOPT_MAX_TOTAL_CONNECTIONS")
            try Curl.check(pushfan_curl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.streamsPerConnection), "CURLMOPT_MAX_CONCURRENT_STREAMS")
        } catch {
            curl_multi_cleanup(multi)
            throw error
        }
        self.multi = multi
        pacer = ConnectionPacer(burst: 2 * configuration.connections, interval: .milliseconds(200))
        super.init(context: context)
    }

    override var waker: Waker {
        let multi = UncheckedPointer(multi)
        return Waker { curl_multi_wakeup(multi.pointer) }
    }

    /// Requests allowed on the wire now (see `connections`).
    override var inFlightLimit: Int {
        var warm = 0
        for isWarm in connections.values {
            guard isWarm else { return active }
            warm += 1
        }
        let opening = warm < configuration.connections ? 1 : 0
        return min(configuration.maxInFlight, warm * configuration.streamsPerConnection + opening)
    }

    // MARK: starting transfers

    override func start(_ request: PendingRequest, token: ProviderToken?) -> Bool {
        // libcurl decides when a transfer needs a new connection, so the
        // reconnect backoff holds every new transfer.
        let now = ContinuousClock.now
        guard now >= blockedUntil, now >= connectsBlockedUntil else { return false }
        startTransfer(request, token: token)
        return true
    }

    private func startTransfer(_ request: PendingRequest, token: ProviderToken?) {
        let slot: TransferSlot
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            guard let created = makeSlot() else {
                request.deliver(.failed(APNsTransportFailure(.connectFailed, detail: "libcurl could not create a handle")))
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

        // Headers from the notification's encoder, the provider token, and libcurl's
        // defaults replaced. libcurl copies each line.
        headerLines.begin()
        notification.writeHeaders(to: &headerLines)
        if let token { headerLines.authorization(token) }
        headerLines.replaceDefaults()
        let list = headerLines.list
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
            request.deliver(.failed(APNsTransportFailure(.connectFailed, detail: "libcurl refused the transfer")))
            return
        }
        active += 1
    }

    /// `name: value` as a NUL-terminated line; libcurl copies it.
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
        guard let request = slot.request else { return }
        let result: APNsSendResult
        if code == CURLE_OK {
            var status = 0
            _ = pushfan_curl_easy_getinfo_long(slot.easy, CURLINFO_RESPONSE_CODE, &status)
            result = .response(Self.outcome(
                status: status, apnsID: header("apns-id", slot), uniqueID: header("apns-unique-id", slot), body: slot.responseBody,
                request: request))
            // The connection answered: it is warm.
            var socket: curl_socket_t = pushfan_curl_socket_bad()
            if pushfan_curl_easy_getinfo_socket(slot.easy, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, connections[socket] != nil {
                connections[socket] = true
            }
        } else {
            result = .failed(classify(code, slot))
        }
        let token = slot.token
        let deferredByPacer = slot.connectDeferred && code == CURLE_COULDNT_CONNECT
        curl_multi_remove_handle(multi, slot.easy)
        active -= 1
        release(slot)
        if deferredByPacer {
            // Not sent: it waits for the next connect the pacer allows.
            connectsBlockedUntil = max(connectsBlockedUntil, pacer.nextAllowed)
            requeue(request)
            return
        }
        finish(request, result, token: token)
    }

    private func header(_ name: String, _ slot: TransferSlot) -> String? {
        var header: UnsafeMutablePointer<curl_header>?
        guard curl_easy_header(slot.easy, name, 0, UInt32(CURLH_HEADER), -1, &header) == CURLHE_OK, let header else { return nil }
        return String(cString: header.pointee.value)
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

    override func abortActive(_ failure: APNsTransportFailure) {
        for slot in slots where slot.request != nil {
            let request = slot.request!
            curl_multi_remove_handle(multi, slot.easy)
            active -= 1
            release(slot)
            request.deliver(.failed(failure))
        }
    }

    // MARK: I/O and housekeeping

    override func performIO(timeout: Int32) {
        var running: Int32 = 0
        curl_multi_perform(multi, &running)
        collectCompletions()
        curl_multi_poll(multi, nil, 0, timeout, nil)
        curl_multi_perform(multi, &running)
        collectCompletions()
    }

    /// HTTP/2 PING through `curl_easy_upkeep`, which needs a handle that is in
    /// the multi handle: so connections are pinged while transfers run, and an
    /// idle pool relies on `idleTimeout` and libcurl's liveness check on reuse.
    override func housekeeping() {
        let now = ContinuousClock.now
        guard now - lastUpkeep >= configuration.pingInterval else { return }
        lastUpkeep = now
        if let slot = slots.first(where: { $0.request != nil }) { _ = curl_easy_upkeep(slot.easy) }
    }

    override func closeTransport() {
        for slot in slots where slot.request != nil { curl_multi_remove_handle(multi, slot.easy) }
        // The multi handle closes the cached connections through the slots'
        // close-socket callbacks, so it goes before the slots.
        curl_multi_cleanup(multi)
        slots.removeAll()
        freeSlots.removeAll()
    }
}

/// A C pointer that only thread-safe calls use from other threads.
struct UncheckedPointer: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    init(_ pointer: UnsafeMutableRawPointer) { self.pointer = pointer }
}
