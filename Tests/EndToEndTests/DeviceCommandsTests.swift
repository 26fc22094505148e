import Foundation
import PushfanTestSupport
import Testing

/// `pushfan devices import` and `pushfan devices expand` as a user runs them: a file with
/// good and bad lines goes in, the bad ones are reported by line, and the expansion finds
/// every imported device once, on SQLite and on PostgreSQL. The batch is large enough for
/// the bulk paths (PostgreSQL writes it in two parts at once).
@Suite struct DeviceCommandsTests {
    static let backends: [String] = {
        let environment = ProcessInfo.processInfo.environment
        let postgres = environment["PUSHFAN_TEST_POSTGRES"] != nil || environment["PUSHFAN_REQUIRE_POSTGRES"] == "1"
        return postgres ? ["sqlite", "postgres"] : ["sqlite"]
    }()

    func freshDatabase(_ backend: String, in directory: String) async throws -> String {
        guard backend == "postgres" else { return "sqlite:" + directory + "/devices.db" }
        guard let server = ProcessInfo.processInfo.environment["PUSHFAN_TEST_POSTGRES"], let slash = server.lastIndex(of: "/") else {
            throw TestFailure("PUSHFAN_TEST_POSTGRES is not set: run the tests through scripts/test (scripts/with-postgres)")
        }
        let name = "pushfan_cli_\(UUID().uuidString.prefix(8).lowercased())"
        let created = try await CommandLineTool.run("psql", [server, "-q", "-c", "CREATE DATABASE \(name)"])
        guard created.status == 0 else { throw TestFailure("psql: \(created.error)") }
        return server[..<slash] + "/" + name
    }

    @Test(arguments: backends)
    func importReportsBadLinesAndExpandFindsEveryDeviceOnce(_ backend: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-devices-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await freshDatabase(backend, in: directory)
        func pushfan(_ arguments: [String]) async throws -> CommandLineTool.Result {
            try await CommandLineTool.run(TestBinaries.pushfan, arguments + ["--database", database])
        }

        let key = directory + "/key.p8"
        _ = try await CommandLineTool.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        let added = try await pushfan([
            "apps", "add", "--app", "shop", "--topic", "com.example.shop", "--team-id", "TEAM000001", "--key-id", "KEY0000001", "--key-file", key,
        ])
        #expect(added.status == 0, "\(added.error)")
        let count = 2500
        var lines: [String] = []
        for index in 0..<count {
            let tags = index % 5 == 0 ? #"["vip"]"# : "[]"
            lines.append(#"{"device_id":"d-\#(index)","token":"\#(String(format: "%064x", index + 1))","tags":\#(tags)}"#)
            if index == 10 { lines.append(#"{"device_id":"bad-token","token":"xyz"}"#) }
            if index == 2000 { lines.append("{not json") }
        }
        let file = directory + "/devices.ndjson"
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)

        let imported = try await pushfan(["devices", "import", "--app", "shop", file])
        #expect(imported.status == 1, "one or more lines were rejected")
        #expect(imported.output.contains("imported \(count) devices, rejected 2 lines"), "\(imported.output)")
        #expect(imported.error.contains("1 line (12): ") && imported.error.contains("hexadecimal"), "\(imported.error)")
        #expect(imported.error.contains("1 line (2003): not a JSON object"), "\(imported.error)")

        // Shards of 300: eight full ones and one with the last 100 devices.
        let expanded = try await pushfan(["devices", "expand", "--app", "shop", "--shard-size", "300", "--page", "70"])
        #expect(expanded.status == 0, "\(expanded.error)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(expanded.output.utf8)) as? [String: Any])
        #expect(report["devices"] as? Int == count)
        #expect(report["shards"] as? Int == 9)

        let vip = try await pushfan(["devices", "expand", "--app", "shop", "tag:vip"])
        let vipReport = try #require(try JSONSerialization.jsonObject(with: Data(vip.output.utf8)) as? [String: Any])
        #expect(vipReport["devices"] as? Int == count / 5)

        // The same file again updates in place: nothing is added.
        let again = try await pushfan(["devices", "import", "--app", "shop", file])
        #expect(again.output.contains("imported \(count) devices, rejected 2 lines"), "\(again.output)")
        let after = try await pushfan(["devices", "expand", "--app", "shop"])
        let afterReport = try #require(try JSONSerialization.jsonObject(with: Data(after.output.utf8)) as? [String: Any])
        #expect(afterReport["devices"] as? Int == count)
    }
}
