import Foundation
import PushfanTestSupport
import Testing

/// What a client saw for one request.
struct ClientResponse: CustomStringConvertible {
    var status: Int?
    var headers: [String: String] = [:]
    var body = ""
    /// curl's exit code (0: an HTTP response arrived).
    var exitCode: Int32 = 0

    var reason: String? {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["reason"] as? String
    }

    var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] }

    var description: String { "status \(status.map(String.init) ?? "none") \(headers) \(body) (curl exit \(exitCode))" }
}

/// Requests to a simulator through the curl and nghttp command line clients.
enum Clients {
    static let token = String(repeating: "ab", count: 32)
    static let alertBody = #"{"aps":{"alert":{"title":"Hello","body":"from the simulator tests"}}}"#

    /// One request per curl call (a fresh connection each time).
    static func curl(
        _ sim: SimulatorProcess, path: String = "/3/device/" + token, method: String = "POST",
        headers: [String] = ["apns-topic: com.example.app", "apns-push-type: alert"], body: String? = alertBody
    ) async throws -> ClientResponse {
        var arguments = ["-s", "-i", "--max-time", "20", "-X", method] + sim.curlOptions
        for header in headers { arguments += ["-H", header] }
        if let body { arguments += ["--data-binary", body] }
        arguments.append(sim.url + path)
        let result = try await CommandLineTool.run("curl", arguments)
        var response = parse(result.output)
        response.exitCode = result.status
        return response
    }

    /// Several requests on one connection (`curl --next`); each entry is (headers, body, path).
    static func curlSequence(_ sim: SimulatorProcess, _ requests: [(headers: [String], body: String, path: String)]) async throws -> [ClientResponse] {
        let marker = "--end-of-response--"
        var arguments: [String] = []
        for (index, request) in requests.enumerated() {
            if index > 0 { arguments.append("--next") }
            arguments += ["-s", "-i", "--max-time", "20", "-X", "POST", "-w", "\n" + marker + "\n"] + sim.curlOptions
            for header in request.headers { arguments += ["-H", header] }
            arguments += ["--data-binary", request.body, sim.url + request.path]
        }
        let result = try await CommandLineTool.run("curl", arguments)
        return result.output.components(separatedBy: marker + "\n").filter { !$0.isEmpty }.map(parse)
    }

    /// Paths for `count` different tokens (nghttp fetches a repeated URI only once).
    static func distinctPaths(_ count: Int) -> [String] {
        (1...count).map { "/3/device/" + String(format: "%04d", $0) + String(repeating: "a", count: 60) }
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS values the server sent, in order, from nghttp -v.
    static func receivedStreamLimits(_ log: String) -> [Int] {
        var limits: [Int] = []
        var inReceivedSettings = false
        for line in log.split(separator: "\n") {
            if line.contains(" frame <") { inReceivedSettings = line.contains("recv SETTINGS frame") }
            if inReceivedSettings, let range = line.range(of: "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):") {
                limits.append(Int(line[range.upperBound...].prefix { $0.isNumber }) ?? -1)
            }
        }
        return limits
    }

    static func parse(_ output: String) -> ClientResponse {
        var response = ClientResponse()
        let normalized = output.replacingOccurrences(of: "\r\n", with: "\n")
        guard let split = normalized.range(of: "\n\n") else {
            if normalized.hasPrefix("HTTP/2 ") { response.status = Int(normalized.split(separator: " ")[1].trimmingCharacters(in: .whitespacesAndNewlines)) }
            return response
        }
        let head = normalized[..<split.lowerBound].split(separator: "\n")
        if let first = head.first, first.hasPrefix("HTTP/2 ") {
            response.status = Int(first.split(separator: " ")[1])
        }
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            response.headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        response.body = String(normalized[split.upperBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
        return response
    }

    /// nghttp -v on one connection for all `paths`; returns its frame log.
    static func nghttp(_ sim: SimulatorProcess, paths: [String], headers: [String], bodyFile: String?, extra: [String] = []) async throws -> String {
        var arguments = ["-v", "-n", "--timeout=20"] + extra
        for header in headers { arguments += ["-H", header] }
        if let bodyFile { arguments += ["-d", bodyFile] }
        arguments += paths.map { sim.url + $0 }
        let result = try await CommandLineTool.run("nghttp", arguments)
        return result.output + result.error
    }

    /// Writes `text` to a file in the simulator's directory and returns its path.
    static func file(_ sim: SimulatorProcess, _ name: String, _ text: String) throws -> String {
        let path = sim.directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func int(_ value: Any?) -> Int { (value as? NSNumber)?.intValue ?? -1 }
}

/// A keys file for `key` in a fresh directory, and the simulator arguments that use it.
func keysArguments(_ keys: [TestKey], topics: [String]? = nil) throws -> [String] {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-simkeys-\(UUID().uuidString.prefix(8))").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let file = directory + "/keys.json"
    try JSONSerialization.data(withJSONObject: ["keys": keys.map { $0.keysFileEntry(topics: topics) }]).write(to: URL(fileURLWithPath: file))
    return ["--keys", file]
}

func nowSeconds() -> Int64 { Int64(Date().timeIntervalSince1970) }
