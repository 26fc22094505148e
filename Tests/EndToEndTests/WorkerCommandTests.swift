import Foundation
import PushfanTestSupport
import Testing

/// What a user sees when `pushfan worker`, `submit --wait` and `results tail` are given
/// something they cannot work with.
@Suite struct WorkerCommandTests {
    func pushfan(_ arguments: [String]) async throws -> CommandLineTool.Result {
        try await CommandLineTool.run(TestBinaries.pushfan, arguments)
    }

    @Test func workerWithEveryRoleOffIsAUsageError() async throws {
        let result = try await pushfan(["worker", "--no-planner", "--no-sender", "--no-events"])
        #expect(result.status == 2)
        #expect(result.error.contains("--no-planner, --no-sender and --no-events together leave nothing to do"), "\(result.error)")
    }

    @Test(arguments: [
        (["--lanes", "0"], "--lanes"),
        (["--shutdown-timeout", "0"], "--shutdown-timeout"),
        (["--id", "two words"], "--id must be 1 to 128 characters"),
    ])
    func workerFlagsOutOfRangeAreRefused(_ flags: [String], _ expected: String) async throws {
        let result = try await pushfan(["worker"] + flags)
        #expect(result.status == 2)
        #expect(result.error.contains(expected), "\(result.error)")
    }

    @Test func workerWithAnUnknownDatabaseSchemeSaysWhatIsAllowed() async throws {
        let result = try await pushfan(["worker", "--database", "mysql://db", "--brokers", "127.0.0.1:1"])
        #expect(result.status == 1)
        #expect(result.error.contains("database must be sqlite:PATH or a postgres:// URL"), "\(result.error)")
    }

    @Test func resultsTailRefusesAnUnknownStartingPoint() async throws {
        let result = try await pushfan(["results", "tail", "--from", "middle"])
        #expect(result.status == 2)
        #expect(result.error.contains("--from must be earliest or latest"), "\(result.error)")
    }

    @Test("submit --wait with no worker running gives up after --timeout and says why")
    func submitWaitWithoutWorkersTimesOut() async throws {
        let cluster = try await DevClusterProcess(partitions: 2)
        defer { cluster.process.signal(SIGTERM) }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("campaign-\(UUID().uuidString.prefix(6)).json").path
        try Pipeline.campaign("lonely", app: "shop").write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await pushfan(["submit", file, "--wait", "--timeout", "3", "--brokers", cluster.bootstrapServers, "--log-level", "warning"])
        #expect(result.status == 1)
        #expect(result.output.contains("campaign lonely submitted"), "\(result.output)")
        #expect(result.error.contains("no word from any worker about lonely within 3 s; is a worker running?"), "\(result.error)")
    }
}
