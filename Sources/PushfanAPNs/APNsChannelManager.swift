internal import CCurl
import Foundation
import PushfanAPNsModel
import PushfanSupport

/// Broadcast channel management (iOS 18): create, read, list and delete an app's channels
/// through APNs' channel management requests (Apple's "Sending channel management requests
/// to APNs"; docs/apns.md). These are rare calls from an operator or a marketing tool, not
/// sends: each is one libcurl transfer over HTTP/2 of its own (libcurl's HTTP/2 through
/// nghttp2), blocking a thread off Swift's pool, with the app's credentials.
///
/// Apple serves them on their own host (`api-manage-broadcast[.sandbox].push.apple.com`,
/// ports 2196 and 2195); an endpoint override (a simulator, a staging proxy) serves them
/// beside the pushes, on the override's address.
package struct APNsChannelManager: Sendable {
    /// What APNs answered other than success: its status and reason, or a transport failure
    /// (status 0).
    package struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        package let status: Int
        package let reason: String

        package init(status: Int, reason: String) { (self.status, self.reason) = (status, reason) }

        package var description: String { status == 0 ? "APNs could not be reached: \(reason)" : "APNs answered \(status) \(reason)" }
    }

    /// A channel as APNs describes it.
    package struct Channel: Equatable, Sendable {
        package let id: String
        package let policy: BroadcastChannel.StoragePolicy

        package init(id: String, policy: BroadcastChannel.StoragePolicy) { (self.id, self.policy) = (id, policy) }
    }

    private let baseURL: String
    private let caFile: String?
    private let verifyPeer: Bool
    private let credentials: APNsCredentials
    private let tokens: ProviderTokenCache
    private let timeout: Duration

    /// `override` is the configured endpoint (`apns.url`), nil for Apple's hosts.
    package init(
        environment: APNsEnvironment, override: APNsEndpoint?, credentials: APNsCredentials, tokens: ProviderTokenCache,
        timeout: Duration = .seconds(10)
    ) {
        baseURL = override?.baseURL ?? "https://" + environment.channelManagementHost
        caFile = override?.caFile
        verifyPeer = override?.verifyPeer ?? true
        self.credentials = credentials
        self.tokens = tokens
        self.timeout = timeout
    }

    /// Creates a channel of `bundleID`; returns the id APNs made.
    package func create(bundleID: String, policy: BroadcastChannel.StoragePolicy) async throws(Failure) -> String {
        let body = #"{"message-storage-policy":\#(policy.rawValue),"push-type":"LiveActivity"}"#
        let answer = try await perform("POST", "/1/apps/\(bundleID)/channels", channel: nil, body: Array(body.utf8))
        guard answer.status == 201, let id = answer.headers["apns-channel-id"], BroadcastChannel.problem(withID: id) == nil else {
            throw Self.failure(answer)
        }
        return id
    }

    /// The channel's storage policy, as APNs keeps it.
    package func read(bundleID: String, channel: String) async throws(Failure) -> Channel {
        let answer = try await perform("GET", "/1/apps/\(bundleID)/channels", channel: channel, body: nil)
        guard answer.status == 200,
              let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
              let number = object["message-storage-policy"] as? Int, let policy = BroadcastChannel.StoragePolicy(rawValue: number)
        else { throw Self.failure(answer) }
        return Channel(id: channel, policy: policy)
    }

    /// Every channel id of `bundleID`.
    package func list(bundleID: String) async throws(Failure) -> [String] {
        let answer = try await perform("GET", "/1/apps/\(bundleID)/all-channels", channel: nil, body: nil)
        guard answer.status == 200,
              let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
              let ids = object["channels"] as? [String]
        else { throw Self.failure(answer) }
        return ids
    }

    /// Deletes a channel; irreversible (its id is never made again).
    package func delete(bundleID: String, channel: String) async throws(Failure) {
        let answer = try await perform("DELETE", "/1/apps/\(bundleID)/channels", channel: channel, body: nil)
        guard answer.status == 204 || answer.status == 200 else { throw Self.failure(answer) }
    }

    private static func failure(_ answer: Answer) -> Failure {
        let reason = (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["reason"] as? String
        return Failure(status: answer.status, reason: reason ?? (answer.status < 300 ? "an answer without what it should carry" : "no reason given"))
    }

    // MARK: - One transfer

    struct Answer {
        var status = 0
        var headers: [String: String] = [:]
        var body: [UInt8] = []
    }

    private func perform(_ method: String, _ path: String, channel: String?, body: [UInt8]?) async throws(Failure) -> Answer {
        var headerLines = ["apns-request-id: " + APNsNotification.randomID().uuidString.lowercased()]
        if case .token(let key) = credentials {
            do { headerLines.append("authorization: " + (try tokens.token(for: key)).authorization) } catch {
                throw Failure(status: 0, reason: "the provider token could not be made: \(error.description)")
            }
        }
        if let channel { headerLines.append("apns-channel-id: " + channel) }
        if body != nil { headerLines.append("content-type: application/json") }
        let request = Transfer(
            url: baseURL + path, method: method, headers: headerLines, body: body, caFile: caFile, verifyPeer: verifyPeer,
            credentials: credentials, timeout: timeout)
        let result: Result<Answer, Failure> = await BlockingWork.run { request.run() }
        return try result.get()
    }
}

/// One libcurl easy transfer; `run` blocks.
private struct Transfer: Sendable {
    let url: String
    let method: String
    let headers: [String]
    let body: [UInt8]?
    let caFile: String?
    let verifyPeer: Bool
    let credentials: APNsCredentials
    let timeout: Duration

    /// Collects what libcurl hands the callbacks.
    final class Sink {
        var answer = APNsChannelManager.Answer()
    }

    func run() -> Result<APNsChannelManager.Answer, APNsChannelManager.Failure> {
        guard Curl.initialized, let easy = curl_easy_init() else { return .failure(.init(status: 0, reason: "libcurl could not start")) }
        defer { curl_easy_cleanup(easy) }
        var list: UnsafeMutablePointer<curl_slist>?
        for line in headers { list = curl_slist_append(list, line) }
        defer { curl_slist_free_all(list) }
        let sink = Sink()
        let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorText[0] = 0
        defer { errorText.deallocate() }
        var options = CurlOptions(easy)
        options.set(CURLOPT_URL, url)
        options.set(CURLOPT_CUSTOMREQUEST, method)
        options.set(CURLOPT_NOSIGNAL, 1)
        options.set(CURLOPT_TIMEOUT_MS, Int(max(1, timeout.milliseconds)))
        options.set(CURLOPT_HTTP_VERSION, Int(url.hasPrefix("http://") ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : CURL_HTTP_VERSION_2TLS))
        options.tls(verifyPeer: verifyPeer, credentials: credentials)
        if let caFile { options.set(CURLOPT_CAINFO, caFile) }
        if options.failed == nil {
            _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, list)
            _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorText)
            let context = Unmanaged.passUnretained(sink).toOpaque()
            _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
            _ = pushfan_curl_easy_setopt_callback(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
                let bytes = size * count
                // A management answer is a few hundred bytes; anything past 1 MiB is not one.
                guard sink.answer.body.count + bytes <= 1 << 20 else { return 0 }
                if let data { data.withMemoryRebound(to: UInt8.self, capacity: bytes) { sink.answer.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: bytes)) } }
                return bytes
            }
            _ = pushfan_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
            _ = pushfan_curl_easy_setopt_callback(easy, CURLOPT_HEADERFUNCTION) { data, size, count, context in
                let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
                let bytes = size * count
                guard let data else { return bytes }
                let line = data.withMemoryRebound(to: UInt8.self, capacity: bytes) { String(decoding: UnsafeBufferPointer(start: $0, count: bytes), as: UTF8.self) }
                if let colon = line.firstIndex(of: ":") {
                    let name = line[..<colon].lowercased()
                    sink.answer.headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
                }
                return bytes
            }
        }
        if let body {
            options.set(CURLOPT_POSTFIELDSIZE, body.count)
            _ = body.withUnsafeBytes { pushfan_curl_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
        }
        if let failed = options.failed { return .failure(.init(status: 0, reason: "libcurl option \(failed) not supported")) }
        let code = curl_easy_perform(easy)
        guard code == CURLE_OK else {
            let detail = String(cString: errorText)
            return .failure(.init(status: 0, reason: detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail))
        }
        var status = 0
        _ = pushfan_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        sink.answer.status = status
        return .success(sink.answer)
    }
}
