import Foundation

/// Everything an operator can set, in one place. Sources, lowest precedence first:
/// built-in defaults, the JSON file (`--config` or `PUSHFAN_CONFIG`), environment
/// variables, then command-line flags (applied by each command).
/// docs/configuration.md lists every key; keep the two in step.
package struct PushfanConfiguration: Codable, Sendable, Equatable {
    package struct Kafka: Codable, Sendable, Equatable {
        /// Bootstrap servers, `host:port,host:port`. Env: `PUSHFAN_KAFKA_BROKERS`.
        package var brokers: String = "127.0.0.1:9092"
        /// Consumer group shared by all workers.
        package var groupID: String = "pushfan-workers"
        /// Topic names; every default starts with `pushfan.`.
        package var topics: TopicNames = TopicNames()
        /// Raw librdkafka properties, passed through unchanged (SASL, SSL, tuning).
        /// They override Pushfan's typed settings.
        package var properties: [String: String] = [:]

        package init() {}

        enum CodingKeys: String, CodingKey { case brokers, groupID = "group_id", topics, properties }

        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let defaults = Kafka()
            brokers = try c.decodeIfPresent(String.self, forKey: .brokers) ?? defaults.brokers
            groupID = try c.decodeIfPresent(String.self, forKey: .groupID) ?? defaults.groupID
            topics = try c.decodeIfPresent(TopicNames.self, forKey: .topics) ?? defaults.topics
            properties = try c.decodeIfPresent([String: String].self, forKey: .properties) ?? defaults.properties
        }
    }

    package struct APNs: Codable, Sendable, Equatable {
        /// Endpoint override for simulators and staging. Env: `PUSHFAN_APNS_URL`.
        package var url: String?
        /// Extra CA file trusted for that endpoint. Env: `PUSHFAN_APNS_CA_FILE`.
        package var caFile: String?
        /// `nghttp2` (default) or `libcurl`; nil leaves the sender's default.
        package var transport: String?
        /// HTTP/2 connections per (endpoint, credential); nil leaves the sender's default (2).
        package var connections: Int?
        /// Streams per connection Pushfan opens at most; nil leaves the default (100).
        package var streamsPerConnection: Int?

        package init() {}
        enum CodingKeys: String, CodingKey {
            case url, caFile = "ca_file", transport, connections, streamsPerConnection = "streams_per_connection"
        }
    }

    package var kafka = Kafka()
    /// Device store: `sqlite:PATH` or a `postgres://` URL. Env: `PUSHFAN_DATABASE`.
    package var database: String = "sqlite:pushfan.db"
    package var apns = APNs()
    /// Log threshold: debug, info, notice, warning, error. Env: `PUSHFAN_LOG_LEVEL`.
    package var logLevel: String = "info"

    package init() {}

    enum CodingKeys: String, CodingKey { case kafka, database, apns, logLevel = "log_level" }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = PushfanConfiguration()
        kafka = try c.decodeIfPresent(Kafka.self, forKey: .kafka) ?? defaults.kafka
        database = try c.decodeIfPresent(String.self, forKey: .database) ?? defaults.database
        apns = try c.decodeIfPresent(APNs.self, forKey: .apns) ?? defaults.apns
        logLevel = try c.decodeIfPresent(String.self, forKey: .logLevel) ?? defaults.logLevel
    }

    /// Environment variable names operators and scripts rely on; they never change.
    package enum Environment {
        package static let config = "PUSHFAN_CONFIG"
        package static let kafkaBrokers = "PUSHFAN_KAFKA_BROKERS"
        package static let database = "PUSHFAN_DATABASE"
        package static let apnsURL = "PUSHFAN_APNS_URL"
        package static let apnsCAFile = "PUSHFAN_APNS_CA_FILE"
        package static let logLevel = "PUSHFAN_LOG_LEVEL"
    }

    /// Loads defaults, then the file (explicit path, else `PUSHFAN_CONFIG`), then the environment.
    package static func load(
        file: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> PushfanConfiguration {
        var configuration = PushfanConfiguration()
        if let path = file ?? environment[Environment.config], !path.isEmpty {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError("cannot read config file \(path)")
            }
            do {
                configuration = try JSONDecoder().decode(PushfanConfiguration.self, from: data)
            } catch let error as DecodingError {
                throw ConfigurationError("config file \(path): \(ConfigurationError.describe(error))")
            } catch {
                throw ConfigurationError("config file \(path): \(error)")
            }
        }
        if let value = environment[Environment.kafkaBrokers], !value.isEmpty { configuration.kafka.brokers = value }
        if let value = environment[Environment.database], !value.isEmpty { configuration.database = value }
        if let value = environment[Environment.apnsURL], !value.isEmpty { configuration.apns.url = value }
        if let value = environment[Environment.apnsCAFile], !value.isEmpty { configuration.apns.caFile = value }
        if let value = environment[Environment.logLevel], !value.isEmpty { configuration.logLevel = value }
        guard LogLevel(name: configuration.logLevel) != nil else {
            throw ConfigurationError("log_level '\(configuration.logLevel)' is not one of debug, info, notice, warning, error")
        }
        return configuration
    }

    package var logThreshold: LogLevel { LogLevel(name: logLevel) ?? .info }
}

/// A configuration problem, reported to the operator before anything starts.
package struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    package let description: String
    package init(_ description: String) { self.description = description }

    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context)): \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(path(context)): missing key \(key.stringValue)"
        case .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
