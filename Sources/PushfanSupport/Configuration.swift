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
        /// An HTTP proxy the sender tunnels through (`http://host:port`); nil: libcurl reads
        /// `https_proxy`, `HTTPS_PROXY` and `no_proxy` from the environment.
        package var proxy: String?
        /// Most HTTP/2 connections per (endpoint, credential), opened as the load needs them;
        /// nil leaves the sender's default (16).
        package var connections: Int?
        /// Streams per connection Pushfan opens at most; nil leaves the default (1,000).
        package var streamsPerConnection: Int?

        package init() {}
        enum CodingKeys: String, CodingKey {
            case url, caFile = "ca_file", proxy, connections, streamsPerConnection = "streams_per_connection"
        }
        package init(from decoder: any Decoder) throws {
            try refuseRetired(
                "transport", in: decoder,
                "is no longer a setting: every APNs connection is libcurl's, carrying nghttp2's HTTP/2 (docs/apns.md); remove it")
            let c = try decoder.container(keyedBy: CodingKeys.self)
            url = try c.decodeIfPresent(String.self, forKey: .url)
            caFile = try c.decodeIfPresent(String.self, forKey: .caFile)
            proxy = try c.decodeIfPresent(String.self, forKey: .proxy)
            connections = try c.decodeIfPresent(Int.self, forKey: .connections)
            streamsPerConnection = try c.decodeIfPresent(Int.self, forKey: .streamsPerConnection)
        }
    }

    /// The fan-out worker (`pushfan worker`). Flags of the same names override these.
    package struct Worker: Codable, Sendable, Equatable {
        /// Rate lanes per app: the planner spreads an app's tasks over this many Kafka keys
        /// and each lane may send `rate / lanes` per second. More lanes spread one app over
        /// more workers; every worker must reach `rate / lanes` for the app to reach its rate.
        package var lanes: Int = 4
        /// Devices per task (audience shard), at most; small audiences get smaller shards
        /// so that every lane has work.
        package var shardSize: Int = 5_000
        /// Devices read and claimed together.
        package var pageSize: Int = 500
        /// Most pages of one task out at once (being sent, or waiting for their last answers):
        /// the next page is read and claimed as soon as the one before it is on the wire, and
        /// earlier ones wait for APNs' slowest answers (seconds, at real latency) beside it.
        /// Bounds a task's memory: pages × page_size devices.
        package var pagesInFlight: Int = 32
        /// How long a claim keeps other workers off a device; a crashed worker's devices
        /// are taken over after this.
        package var leaseSeconds: Int = 30
        /// Seconds from SIGTERM to exit, at most.
        package var shutdownTimeoutSeconds: Int = 10
        /// Milliseconds between a campaign's progress events from one worker.
        package var progressIntervalMs: Int = 2_000
        /// How long an app's sends pause after a credentials failure (403 from APNs, a key
        /// that cannot be loaded) before they are tried again.
        package var credentialsPauseSeconds: Int = 30
        /// How long an app's credentials may keep failing before its campaigns stop waiting:
        /// their unsent devices end `failed` with reason `credentials`.
        package var credentialsGiveUpSeconds: Int = 900

        package init() {}

        enum CodingKeys: String, CodingKey {
            case lanes, shardSize = "shard_size", pageSize = "page_size", pagesInFlight = "pages_in_flight", leaseSeconds = "lease_s"
            case shutdownTimeoutSeconds = "shutdown_timeout_s", progressIntervalMs = "progress_interval_ms"
            case credentialsPauseSeconds = "credentials_pause_s", credentialsGiveUpSeconds = "credentials_give_up_s"
        }

        package init(from decoder: any Decoder) throws {
            try refuseRetired(
                "clock_offset_s", in: decoder,
                "is no longer a setting: a worker's clock is the machine's; tests shift it by running pushfan-shifted-clock (docs/operations.md); remove it")
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let defaults = Worker()
            lanes = try c.decodeIfPresent(Int.self, forKey: .lanes) ?? defaults.lanes
            shardSize = try c.decodeIfPresent(Int.self, forKey: .shardSize) ?? defaults.shardSize
            pageSize = try c.decodeIfPresent(Int.self, forKey: .pageSize) ?? defaults.pageSize
            pagesInFlight = try c.decodeIfPresent(Int.self, forKey: .pagesInFlight) ?? defaults.pagesInFlight
            leaseSeconds = try c.decodeIfPresent(Int.self, forKey: .leaseSeconds) ?? defaults.leaseSeconds
            shutdownTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .shutdownTimeoutSeconds) ?? defaults.shutdownTimeoutSeconds
            progressIntervalMs = try c.decodeIfPresent(Int.self, forKey: .progressIntervalMs) ?? defaults.progressIntervalMs
            credentialsPauseSeconds = try c.decodeIfPresent(Int.self, forKey: .credentialsPauseSeconds) ?? defaults.credentialsPauseSeconds
            credentialsGiveUpSeconds = try c.decodeIfPresent(Int.self, forKey: .credentialsGiveUpSeconds) ?? defaults.credentialsGiveUpSeconds
        }

        /// Refuses values that cannot work, naming the key.
        package func validate() throws(ConfigurationError) {
            func check(_ value: Int, _ key: String, _ range: ClosedRange<Int>) throws(ConfigurationError) {
                guard range.contains(value) else { throw ConfigurationError("worker.\(key) must be from \(range.lowerBound) to \(range.upperBound), got \(value)") }
            }
            try check(lanes, "lanes", 1...256)
            try check(shardSize, "shard_size", 1...1_000_000)
            try check(pageSize, "page_size", 1...10_000)
            try check(pagesInFlight, "pages_in_flight", 1...256)
            try check(leaseSeconds, "lease_s", 1...3_600)
            try check(shutdownTimeoutSeconds, "shutdown_timeout_s", 1...600)
            try check(progressIntervalMs, "progress_interval_ms", 100...600_000)
            try check(credentialsPauseSeconds, "credentials_pause_s", 1...3_600)
            try check(credentialsGiveUpSeconds, "credentials_give_up_s", 1...604_800)
        }
    }

    package var kafka = Kafka()
    package var worker = Worker()
    /// Device store: `sqlite:PATH` or a `postgres://` URL. Env: `PUSHFAN_DATABASE`.
    package var database: String = "sqlite:pushfan.db"
    package var apns = APNs()
    /// Log threshold: debug, info, notice, warning, error. Env: `PUSHFAN_LOG_LEVEL`.
    package var logLevel: String = "info"

    package init() {}

    enum CodingKeys: String, CodingKey { case kafka, database, apns, worker, logLevel = "log_level" }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = PushfanConfiguration()
        kafka = try c.decodeIfPresent(Kafka.self, forKey: .kafka) ?? defaults.kafka
        database = try c.decodeIfPresent(String.self, forKey: .database) ?? defaults.database
        apns = try c.decodeIfPresent(APNs.self, forKey: .apns) ?? defaults.apns
        worker = try c.decodeIfPresent(Worker.self, forKey: .worker) ?? defaults.worker
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
        /// Kafka's `sasl.password`, so a deployment keeps it in its secrets, not its config file.
        package static let kafkaSASLPassword = "PUSHFAN_KAFKA_SASL_PASSWORD"
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
        if let value = environment[Environment.kafkaSASLPassword], !value.isEmpty { configuration.kafka.properties["sasl.password"] = value }
        try configuration.worker.validate()
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

/// Refuses `key`, which once was a setting, with what to do instead (`advice`).
private func refuseRetired(_ key: String, in decoder: any Decoder, _ advice: String) throws {
    let members = try decoder.container(keyedBy: AnyCodingKey.self)
    let retired = AnyCodingKey(stringValue: key)
    if members.contains(retired) { throw DecodingError.dataCorruptedError(forKey: retired, in: members, debugDescription: advice) }
}
