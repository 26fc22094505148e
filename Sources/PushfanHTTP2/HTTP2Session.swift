import Foundation
internal import CNghttp2

/// What an HTTP/2 session tells the connection that owns it. Every method has a default
/// that does nothing; a role implements what it needs.
package protocol HTTP2SessionDelegate: AnyObject {
    /// A request's HEADERS began on `stream` (server).
    func http2RequestBegan(_ stream: Int32)
    func http2Header(_ stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)
    func http2Data(_ stream: Int32, _ bytes: UnsafeBufferPointer<UInt8>)
    /// The peer ended its side of `stream` (server: the request is complete).
    func http2PeerEnded(_ stream: Int32)
    /// Our HEADERS for `stream` went out: the peer may have seen the request.
    func http2HeadersSent(_ stream: Int32)
    func http2StreamClosed(_ stream: Int32, errorCode: UInt32)
    /// The peer's SETTINGS (not an acknowledgement) arrived.
    func http2SettingsReceived()
    func http2GoAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeBufferPointer<UInt8>)
    func http2PingAcknowledged()
    /// Up to `buffer.count` body bytes of `stream`: how many were written, and whether they
    /// were the last.
    func http2Body(_ stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool)
}

extension HTTP2SessionDelegate {
    package func http2RequestBegan(_ stream: Int32) {}
    package func http2Header(_ stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {}
    package func http2Data(_ stream: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {}
    package func http2PeerEnded(_ stream: Int32) {}
    package func http2HeadersSent(_ stream: Int32) {}
    package func http2StreamClosed(_ stream: Int32, errorCode: UInt32) {}
    package func http2SettingsReceived() {}
    package func http2GoAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeBufferPointer<UInt8>) {}
    package func http2PingAcknowledged() {}
    package func http2Body(_ stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool) { (0, true) }
}

/// HTTP/2 error codes the sender and the simulator send or look for.
package enum HTTP2ErrorCode: UInt32, Sendable {
    case noError = 0
    case internalError = 2
    case refusedStream = 7
    case cancel = 8
}

/// One nghttp2 session, client or server, over any `ByteChannel`: the only place the
/// project calls nghttp2. It feeds received bytes to nghttp2 (`receive`), moves what nghttp2
/// wants sent to the channel (`flush`), and turns nghttp2's callbacks into the delegate's
/// calls.
///
/// Lifetime: nghttp2 gets this object as its user data, unretained
/// (`passUnretained`): the nghttp2 session is deleted in `close()` or `deinit`, so the
/// pointer never outlives the object. The delegate owns this object and is held unowned.
/// Nothing is `passRetained`.
package final class HTTP2Session {
    package enum Role: Sendable {
        case client
        /// `unlimitedResets` lifts nghttp2's rapid-reset protection, which closes a
        /// connection once a client has reset 1,000 streams faster than 33 a second. Apple
        /// documents no such limit; a test server should not invent one.
        case server(unlimitedResets: Bool)
    }

    /// What `receive` ended with.
    package enum ReceiveResult: Equatable {
        /// Everything the channel had is read; `wantsWrite` if TLS needs the socket writable.
        case drained(wantsWrite: Bool)
        /// `keepReading` said stop.
        case stopped
        /// The connection is over; the text says why.
        case ended(String)
    }

    private unowned let delegate: any HTTP2SessionDelegate
    private var session: OpaquePointer?
    private var output: [UInt8] = []
    private var outputOffset = 0
    /// Bytes wait for the channel to be writable.
    package private(set) var wantsWrite = false

    package init(role: Role, delegate: any HTTP2SessionDelegate) throws(HTTP2SessionError) {
        self.delegate = delegate
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks)
        var options: OpaquePointer?
        nghttp2_option_new(&options)
        defer { nghttp2_option_del(options) }
        var session: OpaquePointer?
        // Unretained: see the type's documentation.
        let user = Unmanaged.passUnretained(self).toOpaque()
        let rc: Int32
        switch role {
        case .client:
            rc = nghttp2_session_client_new2(&session, callbacks, user, options)
        case .server(let unlimitedResets):
            if unlimitedResets { nghttp2_option_set_stream_reset_rate_limit(options, UInt64.max, UInt64.max) }
            rc = nghttp2_session_server_new2(&session, callbacks, user, options)
        }
        guard rc == 0, let session else { throw HTTP2SessionError("nghttp2 could not create a session: \(Self.errorText(rc))") }
        self.session = session
    }

    deinit { close() }

    /// Deletes the nghttp2 session; nothing is sent or received after this. Never call it
    /// from inside one of the delegate's methods.
    package func close() {
        if let session { nghttp2_session_del(session) }
        session = nil
    }

    package var isOpen: Bool { session != nil }

    /// Neither side has anything more to say: the connection can close.
    package var isFinished: Bool {
        guard let session else { return true }
        return nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }

    // MARK: bytes

    /// Reads what `channel` has into `buffer` and feeds it to nghttp2, until the channel
    /// would block, `keepReading` (asked after each chunk) says stop, or the connection
    /// ends. A protocol error flushes the GOAWAY nghttp2 queued before it reports the end.
    package func receive(
        from channel: any ByteChannel, buffer: UnsafeMutableRawBufferPointer, keepReading: () -> Bool = { true }
    ) -> ReceiveResult {
        while let session {
            let got: Int
            switch channel.read(into: buffer) {
            case .done(let count): got = count
            case .wantRead: return .drained(wantsWrite: false)
            case .wantWrite: return .drained(wantsWrite: true)
            case .closed: return .ended("the peer closed the connection")
            case .failed(let reason): return .ended(reason)
            }
            let consumed = nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), got)
            if consumed < 0 {
                _ = flush(to: channel)
                return .ended("HTTP/2 protocol error: \(Self.errorText(Int32(consumed)))")
            }
            if !keepReading() { return .stopped }
        }
        return .ended("the session is closed")
    }

    /// Moves nghttp2's pending frames to `channel` until it would block (then `wantsWrite`).
    /// Returns nil, or why the connection ended.
    package func flush(to channel: any ByteChannel) -> String? {
        guard let session else { return "the session is closed" }
        while true {
            while output.count - outputOffset < 64 * 1024 {
                var data: UnsafePointer<UInt8>?
                let count = nghttp2_session_mem_send(session, &data)
                if count < 0 { return "HTTP/2 error: \(Self.errorText(Int32(count)))" }
                if count == 0 { break }
                output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
            }
            if outputOffset == output.count {
                output.removeAll(keepingCapacity: true)
                outputOffset = 0
                wantsWrite = false
                return nil
            }
            let progress = output.withUnsafeBytes { channel.write(UnsafeRawBufferPointer(rebasing: $0[outputOffset...])) }
            switch progress {
            case .done(let count): outputOffset += count
            case .wantRead, .wantWrite:
                wantsWrite = true
                return nil
            case .closed: return "the peer closed the connection"
            case .failed(let reason): return reason
            }
        }
    }

    // MARK: frames

    /// Submits a request; `hasBody` reads the body through the delegate's `http2Body`.
    /// Returns the stream id, or nghttp2's reason for refusing.
    package func submitRequest(_ headers: HTTP2Headers, hasBody: Bool) -> Result<Int32, HTTP2SessionError> {
        guard let session else { return .failure(HTTP2SessionError("the session is closed")) }
        var provider = Self.bodyProvider
        let id = hasBody
            ? nghttp2_submit_request(session, nil, headers.entries, headers.count, &provider, nil)
            : nghttp2_submit_request(session, nil, headers.entries, headers.count, nil, nil)
        return id > 0 ? .success(id) : .failure(HTTP2SessionError("nghttp2 refused the request: \(Self.errorText(id))"))
    }

    package func submitResponse(stream: Int32, _ headers: HTTP2Headers, hasBody: Bool) {
        guard let session else { return }
        var provider = Self.bodyProvider
        if hasBody {
            nghttp2_submit_response(session, stream, headers.entries, headers.count, &provider)
        } else {
            nghttp2_submit_response(session, stream, headers.entries, headers.count, nil)
        }
    }

    /// Our SETTINGS: server push off (a client's), the stream limit (a server's).
    package func submitSettings(enablePush: Bool? = nil, maxConcurrentStreams: UInt32? = nil) {
        guard let session else { return }
        var entries: [nghttp2_settings_entry] = []
        if let enablePush { entries.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: enablePush ? 1 : 0)) }
        if let maxConcurrentStreams {
            entries.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams))
        }
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), entries, entries.count)
    }

    package func resetStream(_ stream: Int32, _ code: HTTP2ErrorCode) {
        guard let session else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code.rawValue)
    }

    package func submitGoAway(lastStreamID: Int32, _ code: HTTP2ErrorCode, debugData: [UInt8]) {
        guard let session else { return }
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, code.rawValue, debugData, debugData.count)
    }

    package func submitPing() {
        guard let session else { return }
        nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }

    /// GOAWAY(NO_ERROR) for the last stream the peer started; the session ends once flushed.
    package func terminate() {
        guard let session else { return }
        nghttp2_session_terminate_session(session, HTTP2ErrorCode.noError.rawValue)
    }

    /// The peer's current SETTINGS_MAX_CONCURRENT_STREAMS (nghttp2 assumes no limit until
    /// the peer's SETTINGS arrive).
    package var remoteMaxConcurrentStreams: Int {
        guard let session else { return 0 }
        return Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    package static func errorText(_ code: Int32) -> String { String(cString: nghttp2_strerror(code)) }

    /// An HTTP/2 error code's name (`REFUSED_STREAM`).
    package static func errorCodeName(_ code: UInt32) -> String {
        guard let name = nghttp2_http2_strerror(code) else { return "error \(code)" }
        return String(cString: name)
    }

    // MARK: callbacks

    private static func from(_ pointer: UnsafeMutableRawPointer) -> HTTP2Session {
        Unmanaged<HTTP2Session>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Reads a stream's body from the delegate.
    private static let bodyProvider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) { _, stream, buffer, length, flags, _, user in
        guard let buffer, let flags, let user else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let (count, last) = HTTP2Session.from(user).delegate.http2Body(stream, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
        if last { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }

    private static func install(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                HTTP2Session.from(user).delegate.http2RequestBegan(frame.pointee.hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let name, let value, let user else { return 0 }
            HTTP2Session.from(user).delegate.http2Header(
                frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength))
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
            guard let data, let user else { return 0 }
            HTTP2Session.from(user).delegate.http2Data(stream, UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            let delegate = HTTP2Session.from(user).delegate
            let header = frame.pointee.hd
            let isAck = header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
            switch UInt32(header.type) {
            case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
                if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 { delegate.http2PeerEnded(header.stream_id) }
            case NGHTTP2_SETTINGS.rawValue where !isAck:
                delegate.http2SettingsReceived()
            case NGHTTP2_GOAWAY.rawValue:
                let goAway = frame.pointee.goaway
                delegate.http2GoAway(
                    lastStreamID: goAway.last_stream_id, errorCode: goAway.error_code,
                    debugData: UnsafeBufferPointer(start: goAway.opaque_data, count: goAway.opaque_data == nil ? 0 : goAway.opaque_data_len))
            case NGHTTP2_PING.rawValue where isAck:
                delegate.http2PingAcknowledged()
            default:
                break
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame, let user, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue else { return 0 }
            HTTP2Session.from(user).delegate.http2HeadersSent(frame.pointee.hd.stream_id)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, errorCode, user in
            guard let user else { return 0 }
            HTTP2Session.from(user).delegate.http2StreamClosed(stream, errorCode: errorCode)
            return 0
        }
    }
}

/// Why a session could not be made or a frame not submitted.
package struct HTTP2SessionError: Error, CustomStringConvertible, Sendable {
    package let description: String
    init(_ description: String) { self.description = description }
}
