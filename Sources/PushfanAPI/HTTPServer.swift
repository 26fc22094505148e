internal import CMicrohttpd
import Foundation
import PushfanCore
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd: its own epoll thread accepts, parses and keeps
/// connections alive; each request's body is read (up to `maxBodyBytes`; a larger one is
/// answered 413 without being read whole), then the connection is suspended while the
/// handler runs as a Swift task, and resumed with its answer. Handlers never run on
/// libmicrohttpd's thread, so a slow store call holds up only its own connection.
package final class HTTPServer: Sendable {
    package struct Limits: Sendable {
        /// Largest request body; more is refused with 413.
        package var maxBodyBytes = 1 << 20
        /// Memory per connection for the request line and headers; more is refused with 431.
        /// libmicrohttpd zeroes it between requests, so a larger pool costs every request.
        package var connectionMemory = 32 * 1024
        /// Seconds a connection may stay idle (or a slow client take) before it is closed.
        package var idleTimeoutSeconds = 30
        package var maxConnections = 1024
        package init() {}
    }

    package typealias Handler = @Sendable (HTTPRequest) async -> HTTPResponse
    /// Told of each answer the server gives by itself, before any handler (413), so that
    /// it is counted like the others.
    package typealias Refusals = @Sendable (HTTPRequest, HTTPResponse) -> Void
    /// Answers a request on libmicrohttpd's own thread, without a task, when it returns a
    /// response (nil: the handler answers). For answers that only read memory, such as a
    /// metrics page, which must come back even while every task thread is busy.
    package typealias Immediate = @Sendable (HTTPRequest) -> HTTPResponse?

    private nonisolated(unsafe) let daemon: OpaquePointer
    private let context: Unmanaged<ServerContext>
    /// The port it listens on.
    package let port: Int

    /// Starts listening on `port` (0: a free one) of the loopback interface, or of every
    /// interface when `loopbackOnly` is false.
    package init(
        port: Int, loopbackOnly: Bool, limits: Limits = Limits(), refused: @escaping Refusals = { _, _ in }, immediate: Immediate? = nil,
        handler: @escaping Handler
    ) throws {
        let context = Unmanaged.passRetained(ServerContext(handler: handler, refused: refused, immediate: immediate, limits: limits))
        guard let daemon = pushfan_mhd_start(
            UInt16(port), loopbackOnly ? 1 : 0, accessHandler, context.toOpaque(), requestCompleted, nil,
            UInt32(limits.maxConnections), UInt32(limits.idleTimeoutSeconds), limits.connectionMemory)
        else {
            context.release()
            throw APIError(500, "listen_failed", "cannot listen on port \(port) (in use, or not allowed)")
        }
        self.daemon = daemon
        self.context = context
        self.port = Int(pushfan_mhd_port(daemon))
    }

    /// Stops accepting, lets the handlers running finish (at most `timeout`: give it the
    /// longest a handler can take, libmicrohttpd must not be stopped with a connection still
    /// suspended), then closes every connection.
    package func stop(timeout: Duration = .seconds(5)) async {
        _ = MHD_quiesce_daemon(daemon)
        let deadline = ContinuousClock.now + timeout
        let server = context.takeUnretainedValue()
        // Streaming bodies end (their connections may be suspended waiting for data).
        for stream in server.streams.withLock({ Array($0.values) }) { stream.close() }
        while (server.running.load(ordering: .acquiring) > 0 || !server.streams.withLock(\.isEmpty)) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        MHD_stop_daemon(daemon)
        context.release()
    }
}

/// What the C callbacks reach through their `cls` pointer.
private final class ServerContext: Sendable {
    let handler: HTTPServer.Handler
    let refused: HTTPServer.Refusals
    let immediate: HTTPServer.Immediate?
    let limits: HTTPServer.Limits
    /// Handlers running now (their connections suspended).
    let running = Atomic<Int>(0)
    /// Streaming bodies being sent now.
    let streams = Locked<[ObjectIdentifier: EventStream]>([:])

    init(handler: @escaping HTTPServer.Handler, refused: @escaping HTTPServer.Refusals, immediate: HTTPServer.Immediate?, limits: HTTPServer.Limits) {
        self.handler = handler
        self.refused = refused
        self.immediate = immediate
        self.limits = limits
    }
}

/// One request's state across libmicrohttpd's calls: created at the first, the body added
/// by the following ones, the answer set by the handler's task. Touched by libmicrohttpd's
/// thread, and by the task only while the connection is suspended.
private final class RequestState: @unchecked Sendable {
    var request: HTTPRequest
    var bodyTooLarge = false
    var started = false
    var response: HTTPResponse?

    init(request: HTTPRequest) { self.request = request }
}

/// A connection pointer handed to the handler's task, which only resumes it.
private struct ConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, requestContext in
    guard let cls, let connection, let requestContext, let uploadSize else { return pushfan_mhd_no() }
    let server = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
    guard let pointer = requestContext.pointee else {
        // First call: the request line and headers are in; the body is not read yet.
        var request = HTTPRequest(method: method.map { String(cString: $0) } ?? "", path: url.map { String(cString: $0) } ?? "/")
        request.headers = collect(connection, kind: pushfan_mhd_header_kind(), lowercased: true)
        request.query = collect(connection, kind: pushfan_mhd_query_kind(), lowercased: false)
        var address = [CChar](repeating: 0, count: 64)
        pushfan_mhd_client_address(connection, &address, address.count)
        request.clientAddress = String(decoding: address.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let state = RequestState(request: request)
        requestContext.pointee = Unmanaged.passRetained(state).toOpaque()
        if let length = request.headers["content-length"].flatMap(Int.init), length > server.limits.maxBodyBytes {
            state.bodyTooLarge = true
            return queue(connection, tooLarge(server, request))
        }
        return pushfan_mhd_yes()
    }
    let state = Unmanaged<RequestState>.fromOpaque(pointer).takeUnretainedValue()
    if uploadSize.pointee > 0 {
        let count = uploadSize.pointee
        if !state.bodyTooLarge, let uploadData {
            if state.request.body.count + count > server.limits.maxBodyBytes {
                // Read and dropped: the answer is 413 either way.
                state.bodyTooLarge = true
                state.request.body = []
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: count) { state.request.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count)) }
            }
        }
        uploadSize.pointee = 0
        return pushfan_mhd_yes()
    }
    if state.bodyTooLarge { return queue(connection, tooLarge(server, state.request)) }
    if let response = state.response { return queue(connection, response, server: server) }
    guard !state.started else { return pushfan_mhd_yes() }
    state.started = true
    if let response = server.immediate?(state.request) { return queue(connection, response) }
    server.running.add(1, ordering: .acquiringAndReleasing)
    MHD_suspend_connection(connection)
    let handle = ConnectionHandle(pointer: connection)
    let request = state.request
    let box = Unmanaged.passRetained(state)
    Task {
        let response = await server.handler(request)
        let state = box.takeRetainedValue()
        state.response = response
        MHD_resume_connection(handle.pointer)
        server.running.subtract(1, ordering: .acquiringAndReleasing)
    }
    return pushfan_mhd_yes()
}

private let requestCompleted: MHD_RequestCompletedCallback = { _, _, requestContext, _ in
    guard let requestContext, let pointer = requestContext.pointee else { return }
    Unmanaged<RequestState>.fromOpaque(pointer).release()
    requestContext.pointee = nil
}

private func tooLarge(_ server: ServerContext, _ request: HTTPRequest) -> HTTPResponse {
    let response = APIError(413, "body_too_large", "the request body is larger than \(server.limits.maxBodyBytes) bytes").response
    server.refused(request, response)
    return response
}

private func queue(_ connection: OpaquePointer, _ response: HTTPResponse, server: ServerContext? = nil) -> MHD_Result {
    let made: OpaquePointer?
    if let stream = response.stream, let server {
        made = streamResponse(connection, stream, server)
    } else {
        made = response.body.withUnsafeBytes { bytes in pushfan_mhd_response_copy(bytes.count, bytes.baseAddress) }
    }
    guard let made else { return pushfan_mhd_no() }
    defer { MHD_destroy_response(made) }
    for (name, value) in response.headers { _ = MHD_add_response_header(made, name, value) }
    return MHD_queue_response(connection, UInt32(response.status), made)
}

/// What a streaming body's callbacks reach: the stream and the server that counts it.
private final class StreamBinding {
    let stream: EventStream
    let server: ServerContext
    init(stream: EventStream, server: ServerContext) { (self.stream, self.server) = (stream, server) }
}

/// A libmicrohttpd response that pulls `stream`'s bytes; the binding is retained until
/// libmicrohttpd releases the response (the client gone or the body ended).
private func streamResponse(_ connection: OpaquePointer, _ stream: EventStream, _ server: ServerContext) -> OpaquePointer? {
    stream.attach(connection)
    server.streams.withLock { $0[ObjectIdentifier(stream)] = stream }
    let binding = Unmanaged.passRetained(StreamBinding(stream: stream, server: server))
    let made = pushfan_mhd_response_stream({ cls, _, buffer, capacity in
        guard let cls, let buffer else { return pushfan_mhd_end_of_stream() }
        return Unmanaged<StreamBinding>.fromOpaque(cls).takeUnretainedValue().stream.fill(buffer, capacity: capacity)
    }, binding.toOpaque(), { cls in
        guard let cls else { return }
        let binding = Unmanaged<StreamBinding>.fromOpaque(cls).takeRetainedValue()
        binding.stream.detach()
        _ = binding.server.streams.withLock { $0.removeValue(forKey: ObjectIdentifier(binding.stream)) }
    })
    if made == nil {
        stream.detach()
        _ = server.streams.withLock { $0.removeValue(forKey: ObjectIdentifier(stream)) }
        binding.release()
    }
    return made
}

private final class Collected {
    var values: [String: String] = [:]
    let lowercased: Bool
    init(lowercased: Bool) { self.lowercased = lowercased }
}

private func collect(_ connection: OpaquePointer, kind: MHD_ValueKind, lowercased: Bool) -> [String: String] {
    let collected = Collected(lowercased: lowercased)
    let box = Unmanaged.passUnretained(collected).toOpaque()
    _ = MHD_get_connection_values(connection, kind, { cls, _, key, value in
        guard let cls, let key else { return pushfan_mhd_yes() }
        let collected = Unmanaged<Collected>.fromOpaque(cls).takeUnretainedValue()
        let name = String(cString: key)
        collected.values[collected.lowercased ? name.lowercased() : name] = value.map { String(cString: $0) } ?? ""
        return pushfan_mhd_yes()
    }, box)
    return collected.values
}
