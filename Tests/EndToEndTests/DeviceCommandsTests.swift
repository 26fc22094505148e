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

    @Test("devices export writes every active device as an import line with its tokens of every kind; importing the file into another store (and backend) gives the same devices, which export the same lines", arguments: backends)
    func exportRoundTripsThroughImport(_ backend: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-export-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = try await freshDatabase(backend, in: directory)
        let target = "sqlite:" + directory + "/copy.db"
        let key = directory + "/key.p8"
        _ = try await CommandLineTool.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        for database in [source, target] {
            let added = try await CommandLineTool.run(TestBinaries.pushfan, [
                "apps", "add", "--app", "shop", "--topic", "com.example.shop", "--team-id", "TEAM000001", "--key-id", "KEY0000001", "--key-file", key,
                "--database", database,
            ])
            #expect(added.status == 0, "\(added.error)")
        }
        func hex(_ prefix: String, _ index: Int) -> String { prefix + String(format: "%060x", index) }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        // More devices than one export page, with every field an import line can carry.
        var lines: [String] = []
        for index in 0..<1_000 {
            var tokens = [#"{"kind":"voip","token":"\#(hex("7e11", index))","environment":"sandbox"}"#]
            if index % 3 == 0 {
                tokens.append(#"{"kind":"liveactivity_update","token":"\#(hex("a1a1", index))","activity_id":"act-\#(index)","attributes_type":"MatchActivity","attributes":{"match":"\#(index % 2)"},"expires_at":\#(now + 3_600_000)}"#)
            }
            if index == 7 { tokens.append(#"{"kind":"liveactivity_update","token":"\#(hex("dead", index))","activity_id":"ended","expires_at":\#(now - 1_000)}"#) }
            lines.append(#"{"device_id":"d-\#(index)","token":"\#(String(format: "%064x", index + 1))","locale":"de_DE","timezone":"Europe/Berlin","app_version":"2.\#(index % 4)","os_version":"18.1","tags":["b","a\#(index % 2)"],"attributes":{"plan":"pro","visits":\#(index)},"quiet_hours":{"start":"22:00","end":"07:30"},"last_seen":\#(now - Int64(index)),"tokens":[\#(tokens.joined(separator: ","))]}"#)
        }
        try lines.joined(separator: "\n").write(toFile: directory + "/in.ndjson", atomically: true, encoding: .utf8)
        let imported = try await CommandLineTool.run(TestBinaries.pushfan, ["devices", "import", "--app", "shop", directory + "/in.ndjson", "--database", source])
        #expect(imported.status == 0, "\(imported.error)")

        let exported = try await CommandLineTool.run(TestBinaries.pushfan, ["devices", "export", "--app", "shop", "--out", directory + "/out.ndjson", "--database", source])
        #expect(exported.status == 0 && exported.error.contains("exported 1000 devices of app shop"), "\(exported.error)")
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/out.ndjson")[.posixPermissions] as? Int
        #expect(mode == 0o600, "the export holds device tokens")
        let text = try String(contentsOfFile: directory + "/out.ndjson", encoding: .utf8)
        // Row-key order, which on PostgreSQL need not be the file's (its import writes in parts at once).
        let exportedLines = try text.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(exportedLines.count == 1_000)
        let first = try #require(exportedLines.first { $0["device_id"] as? String == "d-0" })
        #expect(first["device_id"] as? String == "d-0" && first["timezone"] as? String == "Europe/Berlin" && first["tags"] as? [String] == ["a0", "b"])
        #expect((first["quiet_hours"] as? [String: String]) == ["start": "22:00", "end": "07:30"] && (first["attributes"] as? [String: Any])?["visits"] as? Int == 0)
        let kinds = (first["tokens"] as? [[String: Any]])?.map { "\($0["kind"] ?? "")/\($0["attributes_type"] ?? "-")" }
        #expect(kinds == ["liveactivity_update/MatchActivity", "voip/-"], "\(first)")
        #expect(!text.contains(hex("dead", 7)), "an ended activity's token is not exported")

        let copied = try await CommandLineTool.run(TestBinaries.pushfan, ["devices", "import", "--app", "shop", directory + "/out.ndjson", "--database", target])
        #expect(copied.status == 0 && copied.output.contains("imported 1000 devices, rejected 0 lines"), "\(copied.output) \(copied.error)")
        let again = try await CommandLineTool.run(TestBinaries.pushfan, ["devices", "export", "--app", "shop", "--database", target])
        #expect(again.status == 0 && again.output == text, "the copy exports the same lines")

        let unknown = try await CommandLineTool.run(TestBinaries.pushfan, ["devices", "export", "--app", "nope", "--database", target])
        #expect(unknown.status == 1 && unknown.error.contains("unknown app 'nope'") && unknown.output.isEmpty, "\(unknown.error)")
    }
}
