import Foundation
import PushfanAPNsModel

/// How device tokens decide their outcome, from a rules file (JSON, see docs/apns-sim.md):
///
/// ```json
/// {
///   "tokens":   {"<hex>": "BadDeviceToken",
///                "<hex>": {"reason": "Unregistered", "timestamp": 1700000000000},
///                "<hex>": {"topic": "com.example.app"}},
///   "unregistered": {"<hex>": 1700000000000},
///   "prefixes": {"dead": "Unregistered", "0bad": {"reason": "BadDeviceToken"}}
/// }
/// ```
///
/// A rule is a reason (status from Apple's table, or `status` for another reason), or a
/// `topic`: the bundle id the token belongs to, any other gives 400 DeviceTokenNotForTopic.
/// 410 rules carry `timestamp` (ms since the epoch); without one the response says "now".
/// An exact token wins over prefixes; the longest matching prefix wins among prefixes.
/// Tokens with no rule are accepted. Tokens in the file are matched in lowercase.
package struct DeviceRules: Sendable {
    package struct Rule: Sendable, Equatable {
        package var reason: APNsReason?
        package var status: Int?
        package var timestampMillis: Int64?
        package var topic: String?

        package init(reason: APNsReason? = nil, status: Int? = nil, timestampMillis: Int64? = nil, topic: String? = nil) {
            self.reason = reason
            self.status = status
            self.timestampMillis = timestampMillis
            self.topic = topic
        }
    }

    package private(set) var tokens: [String: Rule] = [:]
    /// Longest first.
    package private(set) var prefixes: [(prefix: String, rule: Rule)] = []

    package init(tokens: [String: Rule] = [:], prefixes: [String: Rule] = [:]) {
        self.tokens = Dictionary(tokens.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.prefixes = prefixes.map { ($0.key.lowercased(), $0.value) }.sorted { $0.prefix.count > $1.prefix.count }
    }

    package var isEmpty: Bool { tokens.isEmpty && prefixes.isEmpty }

    /// The rejection for `token` pushed to `bundleID`, nil to accept.
    package func outcome(token: String, bundleID: String, nowMillis: Int64) -> SimRejection? {
        guard !isEmpty else { return nil }
        let rule = tokens[token] ?? prefixes.first(where: { token.hasPrefix($0.prefix) })?.rule
        guard let rule else { return nil }
        if let topic = rule.topic, topic != bundleID { return SimRejection(.deviceTokenNotForTopic) }
        guard let reason = rule.reason else { return nil }
        let status = rule.status ?? SimRejection.status(of: reason)
        return SimRejection(reason, status: status, timestampMillis: status == 410 ? (rule.timestampMillis ?? nowMillis) : nil)
    }

    /// Reads a rules file.
    package static func load(file path: String) throws(SimConfigurationError) -> DeviceRules {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SimConfigurationError("cannot read the rules file \(path)")
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw SimConfigurationError("the rules file \(path) must be a JSON object (see docs/apns-sim.md)")
        }
        return try parse(root, source: path)
    }

    package static func parse(_ root: [String: Any], source: String) throws(SimConfigurationError) -> DeviceRules {
        for key in root.keys where !["tokens", "unregistered", "prefixes"].contains(key) {
            throw SimConfigurationError("\(source): unknown member \"\(key)\"; expected tokens, unregistered, prefixes")
        }
        var tokens: [String: Rule] = [:]
        var prefixes: [String: Rule] = [:]
        if let value = root["tokens"] {
            guard let map = value as? [String: Any] else { throw SimConfigurationError("\(source): \"tokens\" must be an object") }
            for (token, ruleValue) in map {
                guard RequestRules.lowercaseHexToken(Array(token.utf8)) != nil else {
                    throw SimConfigurationError("\(source): tokens: \"\(token.prefix(16))\" is not an even-length hex device token of 16 to 200 bytes")
                }
                tokens[token] = try rule(ruleValue, at: "\(source): tokens[\(token.prefix(8))…]")
            }
        }
        if let value = root["unregistered"] {
            guard let map = value as? [String: Any] else { throw SimConfigurationError("\(source): \"unregistered\" must be an object") }
            for (token, stamp) in map {
                guard let millis = (stamp as? NSNumber)?.int64Value else {
                    throw SimConfigurationError("\(source): unregistered[\(token.prefix(8))…] must be a timestamp in ms since the epoch")
                }
                tokens[token] = Rule(reason: .unregistered, timestampMillis: millis)
            }
        }
        if let value = root["prefixes"] {
            guard let map = value as? [String: Any] else { throw SimConfigurationError("\(source): \"prefixes\" must be an object") }
            for (prefix, ruleValue) in map {
                guard !prefix.isEmpty, prefix.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) }) else {
                    throw SimConfigurationError("\(source): prefixes: \"\(prefix)\" must be hex digits")
                }
                prefixes[prefix] = try rule(ruleValue, at: "\(source): prefixes[\(prefix)]")
            }
        }
        return DeviceRules(tokens: tokens, prefixes: prefixes)
    }

    private static func rule(_ value: Any, at location: String) throws(SimConfigurationError) -> Rule {
        if let reason = value as? String {
            guard !reason.isEmpty else { throw SimConfigurationError("\(location): the reason is empty") }
            return Rule(reason: APNsReason(rawValue: reason))
        }
        guard let object = value as? [String: Any] else {
            throw SimConfigurationError("\(location) must be a reason string or an object with reason, status, timestamp, topic")
        }
        for key in object.keys where !["reason", "status", "timestamp", "topic"].contains(key) {
            throw SimConfigurationError("\(location): unknown member \"\(key)\"; expected reason, status, timestamp, topic")
        }
        var rule = Rule()
        if let reason = object["reason"] {
            guard let text = reason as? String, !text.isEmpty else { throw SimConfigurationError("\(location): \"reason\" must be a non-empty string") }
            rule.reason = APNsReason(rawValue: text)
            if !rule.reason!.isKnown && object["status"] == nil {
                throw SimConfigurationError("\(location): \"\(text)\" is not one of Apple's reasons; give its \"status\" too")
            }
        }
        if let status = object["status"] {
            guard let number = (status as? NSNumber)?.intValue, (400...599).contains(number) else {
                throw SimConfigurationError("\(location): \"status\" must be 400...599")
            }
            rule.status = number
        }
        if let stamp = object["timestamp"] {
            guard let millis = (stamp as? NSNumber)?.int64Value else {
                throw SimConfigurationError("\(location): \"timestamp\" must be ms since the epoch")
            }
            rule.timestampMillis = millis
        }
        if let topic = object["topic"] {
            guard let text = topic as? String, !text.isEmpty else { throw SimConfigurationError("\(location): \"topic\" must be a bundle id") }
            rule.topic = text
        }
        if rule.reason == nil && rule.topic == nil { throw SimConfigurationError("\(location) needs a \"reason\" or a \"topic\"") }
        return rule
    }
}
