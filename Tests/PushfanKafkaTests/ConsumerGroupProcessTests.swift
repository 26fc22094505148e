import Foundation
import PushfanTestSupport
import Testing

/// Two `pushfan consume` processes in one group, one of them killed with SIGKILL.
@Suite(.timeLimit(.minutes(3)))
struct ConsumerGroupProcessTests {
    func produce(_ cluster: DevClusterProcess, _ values: Range<Int>, topic: String) async throws {
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("values-\(UUID().uuidString).txt")
        // Keyed, so the records spread over all partitions (unkeyed ones stick to one for a while).
        try values.map { "\($0)|\($0)" }.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let producer = try ManagedProcess(
            TestBinaries.pushfan, ["produce", "--brokers", cluster.bootstrapServers, "--topic", topic, "--file", input.path, "--key-delimiter", "|"])
        #expect(await producer.waitForExit() == 0, "produce failed: \(producer.standardError)")
    }

    func consumer(_ cluster: DevClusterProcess, topic: String) throws -> ManagedProcess {
        var arguments = ["consume", "--brokers", cluster.bootstrapServers, "--topic", topic, "--group", "split", "--log-level", "info"]
        for (key, value) in DevClusterProcess.fastGroupProperties { arguments += ["--property", "\(key)=\(value)"] }
        return try ManagedProcess(TestBinaries.pushfan, arguments, name: "consume")
    }

    /// True when the member's last rebalance event in its log is a non-empty assignment.
    func ownsPartitions(_ log: String) -> Bool {
        let events = log.split(separator: "\n").filter { $0.contains("event=kafka.assigned") || $0.contains("event=kafka.revoked") }
        guard let last = events.last, last.contains("event=kafka.assigned") else { return false }
        return !last.contains("kafka.partitions=\"\"")
    }

    @Test func partitionsSplitAndMoveToTheSurvivorAfterKill9() async throws {
        let cluster = try await DevClusterProcess(partitions: 4)
        let topic = "pushfan.tasks"
        let first = try consumer(cluster, topic: topic)
        let second = try consumer(cluster, topic: topic)
        // Both members own partitions (their latest group event is a non-empty assignment)
        // before anything is produced.
        // Settled: both own partitions and neither log changed for two seconds (a member that
        // joins late triggers one more rebalance, which this waits out).
        var settled = false
        var lastLogs = ""
        var stableSince = ContinuousClock.now
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let logs = first.standardError + second.standardError
            if logs != lastLogs {
                lastLogs = logs
                stableSince = .now
            } else if ownsPartitions(first.standardError) && ownsPartitions(second.standardError) && ContinuousClock.now - stableSince > .seconds(2) {
                settled = true
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(settled, "the group did not settle: \(first.standardError)\n\(second.standardError)")
        try await produce(cluster, 0..<1000, topic: topic)
        let union = { Set(first.outputLines + second.outputLines) }
        let all = await first.waitForOutput(timeout: .seconds(30)) { _ in union().count >= 1000 }
        #expect(all != nil, "only \(union().count) of 1000 records consumed")
        #expect(!first.outputLines.isEmpty && !second.outputLines.isEmpty, "both members should have had partitions")

        // Let the 1 s auto-commit cover everything printed, then kill the first member hard.
        // Six commit intervals: on a loaded machine one commit may come seconds late, and a
        // member killed before it reads its partitions' records again (500 of them, once).
        try await Task.sleep(for: .seconds(6))
        let printedByFirst = first.outputLines
        first.signal(SIGKILL)
        _ = await first.waitForExit()

        try await produce(cluster, 1000..<2000, topic: topic)
        // The survivor takes over the dead member's partitions after the session timeout.
        let done = await second.waitForOutput(timeout: .seconds(60)) { _ in Set(second.outputLines).isSuperset(of: (1000..<2000).map(String.init)) }
        #expect(done != nil, "the survivor consumed \(Set(second.outputLines).intersection((1000..<2000).map(String.init)).count) of the last 1000")

        let everything = printedByFirst + second.outputLines
        #expect(Set(everything) == Set((0..<2000).map(String.init)))
        // Everything the killed member printed had been committed, so nothing is read twice.
        #expect(everything.count == 2000, "duplicates: \(everything.count - Set(everything).count)")
        second.signal(SIGTERM)
        #expect(await second.waitForExit(timeout: .seconds(20)) == 0)
    }
}
