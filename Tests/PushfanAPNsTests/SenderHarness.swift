import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanCrypto
import PushfanMessages
import PushfanSupport
import PushfanTestSupport

/// A simulator with one registered signing key, and clients for it.
struct SenderHarness {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.app"

    let simulator: SimulatorProcess
    let key: ES256PrivateKey
    let keyFile: String
    /// The key, keys file and log, removed when the last copy of the harness goes.
    let scratch: ScratchDirectory

    /// Starts `pushfan apns-sim` with the harness key registered for `topic`
    /// (and the suffixed topics) plus `arguments` (rules, faults, --log).
    static func start(_ arguments: [String] = [], rules: [String: Any]? = nil, log: Bool = true) async throws -> SenderHarness {
        let scratch = try ScratchDirectory("pushfan-sender")
        let directory = scratch.path
        let key = ES256PrivateKey.generate()
        let keyFile = directory + "/AuthKey.p8"
        try Data(key.pkcs8PEM.utf8).write(to: URL(fileURLWithPath: keyFile))
        let keys: [String: Any] = ["keys": [["team_id": teamID, "key_id": keyID, "public_key": key.publicKey.pem]]]
        let keysFile = directory + "/keys.json"
        try JSONSerialization.data(withJSONObject: keys).write(to: URL(fileURLWithPath: keysFile))
        var full = ["--keys", keysFile, "--threads", "1"] + arguments
        if let rules {
            let rulesFile = directory + "/rules.json"
            try JSONSerialization.data(withJSONObject: rules).write(to: URL(fileURLWithPath: rulesFile))
            full += ["--rules", rulesFile]
        }
        if log { full += ["--log", directory + "/accepted.ndjson"] }
        return SenderHarness(simulator: try await SimulatorProcess(full), key: key, keyFile: keyFile, scratch: scratch)
    }

    var endpoint: APNsEndpoint {
        get throws { try APNsEndpoint(url: simulator.url, caFile: simulator.caFile) }
    }

    var credentials: APNsCredentials {
        get throws { try APNsCredentials.token(teamID: Self.teamID, keyID: Self.keyID, key: key) }
    }

    func client(
        tokenCache: ProviderTokenCache = ProviderTokenCache(clock: SystemClock()), logger: Logger = Logger(label: "apns"),
        _ configure: (inout APNsClientConfiguration) -> Void = { _ in }
    ) throws -> APNsClient {
        var configuration = APNsClientConfiguration()
        configuration.connections = 1
        configure(&configuration)
        return try APNsClient(endpoint: endpoint, credentials: credentials, configuration: configuration, tokenCache: tokenCache, logger: logger)
    }

    /// A logger at debug level whose lines are kept (`lines`), for a test that says what the
    /// sender did when it fails.
    final class LogCapture: Sendable {
        private let kept = Locked<[String]>([])
        var logger: Logger { Logger(label: "apns", threshold: .debug) { [kept] line in kept.withLock { $0.append(line) } } }
        var lines: [String] { kept.withLock { $0 } }
    }

    /// An alert notification to a fresh random token.
    static func alert(token: DeviceToken = randomToken(), collapseID: String? = nil) throws -> APNsNotification {
        try APNsNotification(
            token: token, topic: topic,
            payload: APNsPayload(json: ["aps": .object(["alert": .object(["title": .string("Hi"), "body": .string("there")])])]),
            collapseID: collapseID)
    }

    static func randomToken() -> DeviceToken {
        try! DeviceToken((0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined())
    }

    /// Accepted log lines, keyed by apns-id.
    func acceptedLog() -> [String: [String: Any]] {
        var byID: [String: [String: Any]] = [:]
        for line in simulator.logLines() {
            if let id = line["apns_id"] as? String { byID[id] = line }
        }
        return byID
    }

    func stop() { simulator.stop() }
}

extension APNsSendResult {
    var isAccepted: Bool {
        if case .response(.accepted) = self { return true }
        return false
    }

    var rejection: (status: Int, reason: APNsReason, timestamp: Date?)? {
        if case .response(.rejected(let status, let reason, let timestamp)) = self { return (status, reason, timestamp) }
        return nil
    }

    var failure: APNsTransportFailure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }
}

extension Dictionary where Key == String, Value == Any {
    /// A nested integer count such as stats["status"]["200"], 0 when absent.
    func count(_ path: String...) -> Int {
        var node: Any = self
        for key in path {
            guard let object = node as? [String: Any], let next = object[key] else { return 0 }
            node = next
        }
        return (node as? NSNumber)?.intValue ?? 0
    }
}
