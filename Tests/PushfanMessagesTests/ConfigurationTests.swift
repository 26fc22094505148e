import Foundation
@testable import PushfanMessages
@testable import PushfanSupport
import Testing

@Suite struct ConfigurationTests {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func write(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-config-\(UUID().uuidString).json").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func theDeployExampleLoadsAndTheEnvironmentWins() throws {
        let path = root.appendingPathComponent("deploy/pushfan.example.json").path
        let fromFile = try PushfanConfiguration.load(file: path, environment: [:])
        #expect(fromFile.kafka.properties["security.protocol"] == "SASL_SSL")
        #expect(fromFile.database.hasPrefix("postgres://"))
        let overridden = try PushfanConfiguration.load(
            file: path, environment: ["PUSHFAN_KAFKA_BROKERS": "127.0.0.1:1", "PUSHFAN_DATABASE": "sqlite:x.db", "PUSHFAN_APNS_URL": "https://sim:2197"])
        #expect(overridden.kafka.brokers == "127.0.0.1:1" && overridden.database == "sqlite:x.db" && overridden.apns.url == "https://sim:2197")
        #expect(overridden.kafka.properties["sasl.password"] == fromFile.kafka.properties["sasl.password"], "no variable, the file's")
        let secret = try PushfanConfiguration.load(file: path, environment: ["PUSHFAN_KAFKA_SASL_PASSWORD": "from-the-secret"])
        #expect(secret.kafka.properties["sasl.password"] == "from-the-secret" && secret.kafka.properties["security.protocol"] == "SASL_SSL")
    }

    @Test func theSenderSectionReadsItsKeys() throws {
        let path = try write(#"{"apns": {"proxy": "http://proxy:3128", "connections": 4, "streams_per_connection": 500, "ca_file": "ca.pem"}}"#)
        let apns = try PushfanConfiguration.load(file: path, environment: [:]).apns
        #expect(apns.proxy == "http://proxy:3128" && apns.connections == 4 && apns.streamsPerConnection == 500 && apns.caFile == "ca.pem")
        // The retired transport choice is refused with what to do, whatever it named.
        for old in ["nghttp2", "libcurl"] {
            #expect {
                _ = try PushfanConfiguration.load(file: try write(#"{"apns": {"transport": "\#(old)"}}"#), environment: [:])
            } throws: { error in
                "\(error)".contains("apns.transport: is no longer a setting") && "\(error)".contains("remove it")
            }
        }
        #expect {
            _ = try PushfanConfiguration.load(file: try write(#"{"apns": {"connections": "many"}}"#), environment: [:])
        } throws: { error in
            "\(error)".contains("apns.connections")
        }
    }

    @Test("the retired worker.clock_offset_s is refused, saying what to do instead, rather than ignored (a test relying on it would run unshifted)")
    func theRetiredClockOffsetIsRefused() throws {
        #expect {
            _ = try PushfanConfiguration.load(file: try write(#"{"worker": {"clock_offset_s": 3600}}"#), environment: [:])
        } throws: { error in
            "\(error)".contains("worker.clock_offset_s: is no longer a setting") && "\(error)".contains("pushfan-shifted-clock")
        }
    }

    @Test func theWorkerSectionReadsItsKeysAndKeepsDefaultsForTheRest() throws {
        let path = try write(#"{"worker": {"lanes": 8, "shard_size": 2000, "lease_s": 5, "shutdown_timeout_s": 20}}"#)
        let worker = try PushfanConfiguration.load(file: path, environment: [:]).worker
        #expect(worker.lanes == 8 && worker.shardSize == 2000 && worker.leaseSeconds == 5 && worker.shutdownTimeoutSeconds == 20)
        #expect(worker.pageSize == 500 && worker.progressIntervalMs == 2000)
    }

    @Test(arguments: [
        (#"{"worker": {"lanes": 0}}"#, "worker.lanes must be from 1 to 256, got 0"),
        (#"{"worker": {"page_size": 100000}}"#, "worker.page_size must be from 1 to 10000, got 100000"),
        (#"{"worker": {"shutdown_timeout_s": -1}}"#, "worker.shutdown_timeout_s must be from 1 to 600, got -1"),
        (#"{"worker": {"lease_s": "long"}}"#, "worker.lease_s"),
    ])
    func badWorkerSettingsNameTheKey(text: String, expected: String) throws {
        let path = try write(text)
        #expect {
            _ = try PushfanConfiguration.load(file: path, environment: [:])
        } throws: { error in
            "\(error)".contains(expected)
        }
    }

    @Test func defaultsNeedNoFile() throws {
        let configuration = try PushfanConfiguration.load(file: nil, environment: [:])
        #expect(configuration.kafka.topics.campaigns == "pushfan.campaigns")
        #expect(configuration.database == "sqlite:pushfan.db")
    }

    @Test(arguments: [
        (#"{"kafka": {"brokers": 9092}}"#, "kafka.brokers"),
        ("{not json", "config file"),
        (#"{"log_level": "loud"}"#, "log_level 'loud'"),
    ])
    func badFilesNameTheProblem(text: String, expected: String) throws {
        let path = try write(text)
        #expect {
            _ = try PushfanConfiguration.load(file: path, environment: [:])
        } throws: { error in
            "\(error)".contains(expected)
        }
    }

    @Test func aMissingFileIsAnError() {
        #expect(throws: ConfigurationError("cannot read config file /nonexistent/pushfan.json")) {
            _ = try PushfanConfiguration.load(file: "/nonexistent/pushfan.json", environment: [:])
        }
    }
}
