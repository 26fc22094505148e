import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `Idempotency-Key` on the calls that start sends (campaigns, messages): the first request
/// with a key does the work; a retry with the same key and body gets the first answer.
enum IdempotentCalls {
    /// Runs `work` once per key the request carries, or plainly when it carries none. The
    /// key is the app's, whichever call used it: it names one request, path and body.
    static func run(
        _ request: HTTPRequest, store: DeviceStore, app: String, body: [UInt8], work: () async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        guard let key = try key(request) else { return try await work() }
        let named = Array("\(request.method) \(request.path)\n".utf8) + body
        return try await once(store, app: app, key: key, body: named, work: work)
    }

    /// `Idempotency-Key`: 1 to 255 visible ASCII characters, or none.
    static func key(_ request: HTTPRequest) throws -> String? {
        guard let key = request.header("idempotency-key") else { return nil }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw APIError(400, "invalid_input", "Idempotency-Key must be 1 to 255 visible ASCII characters", field: "Idempotency-Key")
        }
        return key
    }

    /// Runs `work` once per key: a retry with the same key and body gets the first answer
    /// (a concurrent one waits for it), another body under the key is refused with 409. A
    /// failure (Kafka down) gives the key back, so the client's retry with it can succeed;
    /// work that was done is answered as done, even when its answer cannot be kept.
    private static func once(
        _ store: DeviceStore, app: String, key: String, body: [UInt8], work: () async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        let clock = store.clock
        let deadline = clock.now + IdempotencyKeys.abandonAfter
        while true {
            switch try await store.idempotency.claim(app: app, key: key, body: body, now: clock.wallMillis) {
            case .claimed:
                let response: HTTPResponse
                do {
                    response = try await work()
                } catch {
                    try? await store.idempotency.release(app: app, key: key)
                    throw error
                }
                await remember(response, store, app: app, key: key)
                return response
            case .answered(let status, let text, let location):
                var headers = ["Content-Type": "application/json"]
                if let location { headers["Location"] = location }
                return HTTPResponse(status: status, headers: headers, body: Array(text.utf8))
            case .mismatch:
                throw APIError(409, "idempotency_key_reused", "Idempotency-Key \(key) was used for a different request; use a new key for a new request", field: "Idempotency-Key")
            case .inProgress:
                guard clock.now < deadline else {
                    throw APIError(409, "idempotency_key_in_use", "a request with Idempotency-Key \(key) is still being processed; retry later")
                }
                try await clock.sleep(for: .milliseconds(25))
            }
        }
    }

    /// Keeps the answer of work that was done, trying the store a few times. If it cannot, the
    /// answer still goes out: an error would tell the client nothing happened and invite the
    /// retry that does the work twice. The key then stays in progress, and is taken again
    /// after `abandonAfter`, as a request whose process died.
    private static func remember(_ response: HTTPResponse, _ store: DeviceStore, app: String, key: String) async {
        let body = String(decoding: response.body, as: UTF8.self)
        for attempt in 0..<3 {
            do {
                try await store.idempotency.complete(app: app, key: key, status: response.status, body: body, location: response.headers["Location"])
                return
            } catch {
                if attempt < 2 { try? await store.clock.sleep(for: .milliseconds(100)) }
            }
        }
    }
}
