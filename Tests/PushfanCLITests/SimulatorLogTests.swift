import Foundation
import Testing
@testable import PushfanCLI

@Suite struct SimulatorLogTests {
    @Test("the log is counted by topic, collapse id and token in one pass; other lines are skipped")
    func countsByTopicCollapseIDAndToken() throws {
        let lines = [
            #"{"time_ms":1,"token":"aa","topic":"com.example.a","collapse_id":"c-1"}"#,
            #"{"time_ms":2,"token":"aa","topic":"com.example.a","collapse_id":"c-1"}"#,
            #"{"time_ms":3,"token":"bb","topic":"com.example.a","collapse_id":"c-1"}"#,
            #"{"time_ms":4,"token":"aa","topic":"com.example.a","collapse_id":"c-2"}"#,
            #"{"time_ms":5,"token":"aa","topic":"com.example.b","collapse_id":"c-1"}"#,
            #"{"time_ms":6,"token":"cc","topic":"com.example.a","collapse_id":null}"#,
            "not json",
        ]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sim-\(UUID().uuidString).ndjson").path
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try SimulatorLog(path: path)
        #expect(log.accepted(topic: "com.example.a", collapseID: "c-1") == ["aa": 2, "bb": 1])
        #expect(log.accepted(topic: "com.example.a", collapseID: "c-2") == ["aa": 1])
        #expect(log.accepted(topic: "com.example.b", collapseID: "c-1") == ["aa": 1])
        #expect(log.accepted(topic: "com.example.b", collapseID: "c-2") == [:])
    }

    @Test("a log that cannot be read is a usage error naming the file")
    func unreadableLog() {
        #expect(throws: UsageError.self) { try SimulatorLog(path: "/nonexistent/sim.ndjson") }
    }
}
