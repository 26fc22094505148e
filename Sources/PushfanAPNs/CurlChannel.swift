internal import CCurl
import Foundation
import PushfanCrypto
import PushfanHTTP2
import PushfanSupport

/// One APNs connection as libcurl makes and carries it: an easy handle in connect-only
/// mode. libcurl resolves the host (every address, IPv6 and IPv4 raced by happy eyeballs),
/// tunnels through a proxy when one is set (`apns.proxy`, else libcurl's reading of
/// `https_proxy`, `HTTPS_PROXY` and `no_proxy`), verifies the server against the system's
/// CAs plus the endpoint's CA file, presents the client certificate for certificate auth,
/// and then moves bytes (`curl_easy_send` and `curl_easy_recv`); the HTTP/2 session above
/// it is nghttp2's (`HTTP2Session`).
///
/// libcurl's own ALPN is off: with it, libcurl 7.88 starts its own HTTP/2 session on the
/// connection. `h2` is offered from the SSL_CTX callback instead, and the server's choice
/// is checked after the handshake.
///
/// `connect()` blocks (at most the connect timeout) and runs on a thread of its own; after
/// it the channel is used only by the pool's thread. The hand-over goes through
/// `ConnectAttempt`'s mutex: `@unchecked Sendable` rests on that.
final class CurlChannel: ByteChannel, @unchecked Sendable {
    private let easy: UnsafeMutableRawPointer
    /// libcurl's detailed error text (`CURLOPT_ERRORBUFFER`).
    private let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    /// What the SSL_CTX callback reads; retained by the channel, which outlives the handle.
    private let tlsSetup: TLSSetup
    private let isTLS: Bool
    private let host: String
    /// The connected socket, for poll; -1 before `connect()` succeeds.
    private(set) var socket: Int32 = -1

    /// What the SSL_CTX callback needs, what went wrong in it, and what the handshake agreed.
    private final class TLSSetup {
        let extraCAFile: String?
        let handshake = TLSConnectionSetup.Handshake()
        var failure: String?
        init(extraCAFile: String?) { self.extraCAFile = extraCAFile }
    }

    init(endpoint: APNsEndpoint, credentials: APNsCredentials, proxy: String?, connectTimeout: Duration) throws(APNsSenderError) {
        guard Curl.initialized else { throw .libcurl("curl_global_init", "initialization failed") }
        guard let easy = curl_easy_init() else { throw .libcurl("curl_easy_init", "out of memory") }
        self.easy = easy
        isTLS = !endpoint.isCleartext
        host = endpoint.baseURL
        tlsSetup = TLSSetup(extraCAFile: endpoint.caFile)
        errorText[0] = 0
        let milliseconds = Int(max(1, connectTimeout.milliseconds))
        var options = CurlOptions(easy)
        options.set(CURLOPT_URL, endpoint.baseURL + "/")
        options.set(CURLOPT_CONNECT_ONLY, 1)
        // Threads: no signals for name-resolution timeouts.
        options.set(CURLOPT_NOSIGNAL, 1)
        options.set(CURLOPT_CONNECTTIMEOUT_MS, milliseconds)
        options.set(CURLOPT_TIMEOUT_MS, milliseconds)
        options.set(CURLOPT_TCP_NODELAY, 1)
        options.set(CURLOPT_TCP_KEEPALIVE, 1)
        if options.failed == nil { _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorText) }
        if let proxy { options.set(CURLOPT_PROXY, proxy) }
        if isTLS {
            options.set(CURLOPT_SSL_ENABLE_ALPN, 0)
            options.tls(verifyPeer: endpoint.verifyPeer, credentials: credentials)
            if options.failed == nil {
                // Unretained: the channel keeps `tlsSetup` alive as long as the handle.
                _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_SSL_CTX_DATA, Unmanaged.passUnretained(tlsSetup).toOpaque())
                _ = pushfan_curl_easy_setopt_ssl_ctx(easy) { _, sslContext, user in
                    guard let sslContext, let user else { return CURLE_SSL_CERTPROBLEM }
                    let setup = Unmanaged<TLSSetup>.fromOpaque(user).takeUnretainedValue()
                    setup.failure = TLSConnectionSetup.prepare(sslContext: sslContext, extraCAFile: setup.extraCAFile, handshake: setup.handshake)
                    return setup.failure == nil ? CURLE_OK : CURLE_SSL_CACERT_BADFILE
                }
            }
        }
        if let failed = options.failed {
            curl_easy_cleanup(easy)
            errorText.deallocate()
            throw .libcurl("curl_easy_setopt", "\(failed) not supported by this libcurl")
        }
    }

    deinit {
        curl_easy_cleanup(easy)
        errorText.deallocate()
    }

    /// Connects: resolution, TCP (or the proxy's tunnel), TLS. Blocks up to the connect
    /// timeout. Returns why it failed, or nil when the connection is up and speaks `h2`.
    func connect() -> String? {
        let code = curl_easy_perform(easy)
        guard code == CURLE_OK else {
            if let failure = tlsSetup.failure { return failure }
            let detail = String(cString: errorText)
            return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        }
        var active = pushfan_curl_socket_bad()
        guard pushfan_curl_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &active) == CURLE_OK, active != pushfan_curl_socket_bad() else {
            return "libcurl connected but gave no socket"
        }
        if isTLS, tlsSetup.handshake.negotiatedProtocol != "h2" {
            return "the server at \(host) did not agree to HTTP/2 (ALPN: \(tlsSetup.handshake.negotiatedProtocol ?? "none"))"
        }
        socket = active
        return nil
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ChannelProgress {
        var count = 0
        let code = curl_easy_recv(easy, buffer.baseAddress, buffer.count, &count)
        switch code {
        case CURLE_OK: return count == 0 ? .closed : .done(count)
        case CURLE_AGAIN: return .wantRead
        default: return .failed(failure(code))
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> ChannelProgress {
        var count = 0
        let code = curl_easy_send(easy, bytes.baseAddress, bytes.count, &count)
        switch code {
        case CURLE_OK: return .done(count)
        case CURLE_AGAIN: return .wantWrite
        default: return .failed(failure(code))
        }
    }

    private func failure(_ code: CURLcode) -> String {
        let detail = String(cString: errorText)
        errorText[0] = 0
        return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    }
}

/// A connection attempt on its own thread: `curl_easy_perform` blocks, the pool's thread
/// must not. The result is handed back through the mutex, and the pool's thread is woken.
final class ConnectAttempt: Sendable {
    private let outcome = Locked<String??>(nil)

    /// Starts connecting `channel` now; `wake` runs when it is done.
    init(_ channel: CurlChannel, wake: Waker) {
        let thread = Thread {
            let failure = channel.connect()
            self.outcome.withLock { $0 = .some(failure) }
            wake.wake()
        }
        thread.name = "pushfan-apns-connect"
        thread.start()
    }

    /// nil while connecting; then `.some(nil)` when connected, or `.some(reason)`.
    var result: String?? { outcome.withLock { $0 } }
}
