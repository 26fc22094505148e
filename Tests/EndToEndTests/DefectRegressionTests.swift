import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// Promises a bad-input and fault probe found broken, each checked as a user meets it: an
/// oversize campaign, a long store outage, bad credentials, a reused campaign id, APNs
/// failing until the expiration, and the command line's small print.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct DefectRegressionTests {
    func pushfan(_ arguments: [String], input: Data? = nil) async throws -> CommandLineTool.Result {
        try await CommandLineTool.run(TestBinaries.pushfan, arguments, input: input)
    }

    func write(_ text: String, in pipeline: Pipeline, name: String) throws -> String {
        let file = pipeline.directory + "/" + name
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    func deadLetters(_ pipeline: Pipeline, until done: @escaping ([DeadLetterRecord]) -> Bool) async throws -> [DeadLetterRecord] {
        try await pipeline.readTopic(TopicNames.defaultDeadletter, timeout: .seconds(30), into: [DeadLetterRecord]()) { letters, record in
            if let letter = try? MessageCodec.decode(DeadLetterRecord.self, from: Data(record.value)) { letters.append(letter) }
            return done(letters)
        }
    }

    @Test("a 760 KB campaign is refused by submit, dead-lettered once as a bounded prefix with its size and digest, and planning goes on")
    func oversizeCampaignDoesNotWedgePlanning() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        try await pipeline.addApp("shop", topic: "com.example.shop", rate: 10_000, devices: 300)
        let worker = try pipeline.startWorker("a")
        let huge = #"{"v":1,"id":"huge","app":"shop","audience":{"segment":"tag:all"},"notification":{"content":{"default":{"title":"big"}},"data":{"blob":"\#(String(repeating: "x", count: 760_000))"}}}"#
        let file = try write(huge, in: pipeline, name: "huge.json")

        let refused = try await pushfan(["submit", file] + pipeline.kafkaArguments)
        #expect(refused.status == 1)
        #expect(refused.error.contains("the campaign record is \(huge.utf8.count) bytes; at most 524288 are allowed"), "\(refused.error)")

        // Straight onto the topic, as any Kafka producer could.
        try await pipeline.produceRaw([huge], key: "huge")
        try await pipeline.submit(Pipeline.campaign("after", app: "shop"))
        let after = try await pipeline.results(of: "after", timeout: .seconds(60))
        #expect(after.completed?.count(of: .delivered) == 300)

        let letters = try await deadLetters(pipeline) { $0.contains { $0.key == "huge" } }
        let letter = try #require(letters.first { $0.key == "huge" })
        #expect(letter.error == "record_too_large")
        #expect(letter.originalSize == huge.utf8.count && letter.truncated)
        #expect(letter.originalBytes() == Data(huge.utf8.prefix(65_536)))
        let digest = try await CommandLineTool.run("sha256sum", [file])
        #expect(digest.output.hasPrefix(try #require(letter.originalSHA256)), "\(digest.output)")
        // Passed over, not retried: no retry logged, one letter.
        #expect(!worker.standardError.contains("planner.retry"), "\(worker.standardError.suffix(1500))")
        #expect(letters.filter { $0.key == "huge" }.count == 1)
    }

    @Test("the SQLite file locked mid-campaign until a worker meets the lock: answers in hand are recorded afterwards, nothing is sent twice")
    func storeOutageRetriesTheWriteNotTheSend() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        // 16 s of sending at 500/s: the lock below lands mid-campaign even when taking it
        // waits behind the workers' writes on a loaded machine (at 1,000/s a run once finished
        // first, and the outage was never met).
        let count = 8_000
        try await pipeline.addApp("shop", topic: "com.example.shop", rate: 500, devices: count)
        // Writers give up after about 3 s here (the default is 5 s, retried twice), so the
        // lock below is a real outage for them: it is held until a worker has met it.
        let impatient = pipeline.database + "?busy_timeout_ms=1000"
        let workers = [try pipeline.startWorker("a", lease: 30, database: impatient), try pipeline.startWorker("b", lease: 30, database: impatient)]
        try await pipeline.submit(Pipeline.campaign("locked", app: "shop"))
        let started = await Pipeline.eventually(timeout: .seconds(60)) { pipeline.delivered(topic: "com.example.shop").count >= 1_500 }
        #expect(started)

        // The outage is met by a write of answers in hand (retried in place), or, when no page
        // was in flight as the lock came (seen once under the whole suite's load), by the next
        // claim (its task retried; nothing was sent for it yet).
        func outagesMet() -> Int {
            workers.map { worker in
                worker.standardError.split(separator: "\n").filter {
                    $0.contains("event=task.store_retry") || ($0.contains("event=task.retry") && $0.contains("locked by another process"))
                }.count
            }.reduce(0, +)
        }
        let locker = try ManagedProcess("sqlite3", [String(pipeline.database.dropFirst("sqlite:".count))], name: "sqlite3")
        // The workers write all the time: wait for the lock like any writer, then hold it.
        locker.send(".timeout 10000")
        locker.send("BEGIN EXCLUSIVE;")
        locker.send("SELECT 'locked';")
        #expect(await locker.waitForOutput(timeout: .seconds(15)) { $0.contains("locked") } != nil)
        #expect(!locker.standardError.contains("Error"), "sqlite3 could not lock the store: \(locker.standardError)")
        // Counted from here: before the lock the two workers may also have met each other's.
        let metBefore = outagesMet()
        let met = await Pipeline.eventually(timeout: .seconds(30)) { outagesMet() > metBefore }
        #expect(met, "no worker met the lock in 30 s")
        locker.send("COMMIT;")
        locker.closeInput()
        _ = await locker.waitForExit()

        let results = try await pipeline.results(of: "locked", timeout: .seconds(120))
        #expect(results.completed?.count(of: .delivered) == count)
        #expect(Set(results.devices.keys) == Set((0..<count).map { "shop-\($0)" }))
        let tokens = pipeline.delivered(topic: "com.example.shop").compactMap { $0["token"] as? String }
        #expect(Set(tokens).count == count)
        #expect(tokens.count == count, "\(tokens.count - Set(tokens).count) notifications were sent twice")
    }

    @Test("apps add refuses keys that cannot sign, ids Apple would not issue and two kinds of auth at once, and stores nothing")
    func appsAddChecksCredentials() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let directory = pipeline.directory
        let rsa = directory + "/rsa.p8", p384 = directory + "/p384.p8", garbage = directory + "/garbage.p8"
        _ = try await CommandLineTool.run("openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsa])
        _ = try await CommandLineTool.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", p384])
        try "not a key\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        let cases: [(file: String, team: String, key: String, status: Int32, says: String)] = [
            (directory + "/missing.p8", "TEAM000001", "KEY0000001", 1, "missing.p8"),
            (rsa, "TEAM000001", "KEY0000001", 1, "not an EC key"),
            (p384, "TEAM000001", "KEY0000001", 1, "another curve"),
            (garbage, "TEAM000001", "KEY0000001", 1, "the credentials cannot be used"),
            (pipeline.keyFile, "team1", "KEY0000001", 2, "--team-id must be Apple's 10-character id of A-Z and 0-9"),
            (pipeline.keyFile, "TEAM000001", "KEY-1", 2, "--key-id must be Apple's 10-character id"),
        ]
        for item in cases {
            let added = try await pushfan([
                "apps", "add", "--database", pipeline.database, "--app", "bad", "--topic", "com.example.bad",
                "--team-id", item.team, "--key-id", item.key, "--key-file", item.file,
            ])
            #expect(added.status == item.status && added.error.contains(item.says), "\(item.file): \(added.status) \(added.error)")
            #expect(!added.output.contains("secret"), "a secret was printed for an app that was refused")
        }
        let both = try await pushfan([
            "apps", "add", "--database", pipeline.database, "--app", "bad", "--topic", "com.example.bad",
            "--team-id", "TEAM000001", "--key-id", "KEY0000001", "--key-file", pipeline.keyFile, "--cert", pipeline.keyFile,
        ])
        #expect(both.status == 2 && both.error.contains("not both"), "\(both.status) \(both.error)")
        let lookup = try await pushfan(["devices", "list", "--database", pipeline.database, "--app", "bad"])
        let imported = try await pushfan(["devices", "import", "--database", pipeline.database, "--app", "bad", "/dev/null"])
        #expect(imported.status == 1 && imported.error.contains("unknown app 'bad'"), "\(lookup.error) \(imported.error)")
    }

    @Test("credentials failing at send time: submit --wait shows the pause and its reason; after the limit the devices end failed")
    func credentialsFailureEndsTheCampaign() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let keyFile = pipeline.directory + "/gone.p8"
        try FileManager.default.copyItem(atPath: pipeline.keyFile, toPath: keyFile)
        try await pipeline.addApp("locked", topic: "com.example.locked", rate: 10_000, devices: 200, keyFile: keyFile)
        try FileManager.default.removeItem(atPath: keyFile)
        try pipeline.startWorker("a", extra: ["--credentials-pause", "1", "--credentials-give-up", "4"])
        let file = try write(Pipeline.campaign("doomed", app: "locked"), in: pipeline, name: "doomed.json")
        let waited = try await pushfan(["submit", file, "--wait", "--timeout", "90"] + pipeline.kafkaArguments)
        #expect(waited.status == 0, "\(waited.error)")
        #expect(waited.output.contains("paused: the app's APNs credentials fail") && waited.output.contains("gone.p8"), "\(waited.output)")
        #expect(waited.output.contains("campaign doomed (app locked): completed"), "\(waited.output)")
        let results = try await pipeline.results(of: "doomed", timeout: .seconds(30))
        #expect(results.completed?.count(of: .failed) == 200)
        #expect(results.devices.values.allSatisfy { $0.outcome == .failed && $0.reason == "credentials" && $0.attempts == 0 })
        #expect(results.events.contains { $0.event == .paused && ($0.error ?? "").contains("gone.p8") })
        #expect(pipeline.delivered(topic: "com.example.locked").isEmpty)
    }

    @Test("submit --wait follows its own record: a resent campaign is acknowledged, another body under a used id is refused, a past expiration never leaves")
    func waitFollowsThisSubmission() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        try await pipeline.addApp("shop", topic: "com.example.shop", rate: 10_000, devices: 300)
        try pipeline.startWorker("a")
        let first = try write(Pipeline.campaign("reused", app: "shop"), in: pipeline, name: "first.json")
        func wait(_ file: String) async throws -> CommandLineTool.Result {
            try await pushfan(["submit", file, "--wait", "--timeout", "60"] + pipeline.kafkaArguments)
        }
        let done = try await wait(first)
        #expect(done.status == 0 && done.output.contains("delivered") && done.output.contains("300"), "\(done.output) \(done.error)")
        // The same campaign again: answered from the store, nothing sent twice.
        let again = try await wait(first)
        #expect(again.status == 0 && again.output.contains("campaign reused (app shop): completed"), "\(again.output) \(again.error)")
        // Another campaign under the same id: refused, though an old `completed` is on the topic.
        let other = try write(Pipeline.campaign("reused", app: "shop", audience: #"{"segment":"locale = de_DE"}"#), in: pipeline, name: "other.json")
        let conflict = try await wait(other)
        #expect(conflict.status == 1, "\(conflict.output)")
        #expect(conflict.error.contains("campaign id reused is already taken by a different campaign (completed)"), "\(conflict.error)")
        let letters = try await deadLetters(pipeline) { $0.contains { $0.error == "conflicting_campaign" } }
        #expect(letters.contains { $0.key == "shop/reused" && $0.error == "conflicting_campaign" })
        // After the refusal the campaign's true state is told again, so the latest event is right.
        let events = try await pipeline.readTopic(TopicNames.defaultResults, timeout: .seconds(30), into: [CampaignEvent]()) { events, record in
            if case .campaign(let event)? = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)), event.campaign == "reused", event.app == "shop" {
                events.append(event)
            }
            guard let refusal = events.lastIndex(where: { $0.event == .failed }) else { return false }
            return events[refusal...].contains { $0.event == .completed }
        }
        let refusal = try #require(events.lastIndex { $0.event == .failed }, "\(events.map(\.event))")
        #expect(events[refusal].submission != nil)
        let restated = try #require(events[refusal...].last)
        #expect(restated.event == .completed && restated.count(of: .delivered) == 300 && restated.submission == nil)
        #expect(Set(pipeline.delivered(topic: "com.example.shop").compactMap { $0["token"] as? String }).count == 300)
        #expect(pipeline.delivered(topic: "com.example.shop").count == 300)
        // Campaign ids are named within their app: another app's "reused" is its own campaign,
        // planned and sent, and shop's stays as it was.
        try await pipeline.addApp("news", topic: "com.example.news", rate: 10_000, devices: 100)
        let news = try await wait(try write(Pipeline.campaign("reused", app: "news"), in: pipeline, name: "news.json"))
        #expect(news.status == 0 && news.output.contains("campaign reused (app news): completed"), "\(news.output) \(news.error)")
        #expect(pipeline.delivered(topic: "com.example.news").count == 100)
        let shopStatus = try await pushfan(["campaigns", "status", "shop/reused", "--database", pipeline.database])
        #expect(shopStatus.output.contains("campaign reused (app shop): completed") && shopStatus.output.contains("audience 300"), "\(shopStatus.output)")
        let newsStatus = try await pushfan(["campaigns", "status", "news/reused", "--database", pipeline.database])
        #expect(newsStatus.output.contains("campaign reused (app news): completed") && newsStatus.output.contains("audience 100"), "\(newsStatus.output)")

        let late = try write(Pipeline.campaign("late", app: "shop", options: #"{"expiration":1000000000}"#), in: pipeline, name: "late.json")
        let refused = try await pushfan(["submit", late] + pipeline.kafkaArguments)
        #expect(refused.status == 1 && refused.error.contains("options.expiration: 1000000000 (2001-09-09T01:46:40Z) has already passed"), "\(refused.error)")
    }

    @Test("APNs answering 503: the lane's circuit holds requests to a trickle and recovers; nothing starts after the expiration")
    func failingAPNsIsNotHammered() async throws {
        let pipeline = try await Pipeline(simArguments: ["--p503", "1"])
        defer { pipeline.stop() }
        let count = 2_000
        try await pipeline.addApp("shop", topic: "com.example.shop", rate: 1_000, devices: count)
        let worker = try pipeline.startWorker("a")
        try await pipeline.submit(Pipeline.campaign("outage", app: "shop"))
        let failing = await Pipeline.eventually(timeout: .seconds(60)) { worker.standardError.contains("event=lane.circuit_open") }
        #expect(failing, "\(worker.standardError.suffix(1500))")
        let before = try await pipeline.sim.stats()["requests"] as? Int ?? 0
        try await Task.sleep(for: .seconds(6))
        let during = (try await pipeline.sim.stats()["requests"] as? Int ?? 0) - before
        // At the app's rate these 6 s would be 6,000 requests; the open circuits probe instead.
        #expect(during < 600, "\(during) requests in 6 s against a failing APNs")
        _ = try await pipeline.sim.control(["p503": 0])
        let recovered = try await pipeline.results(of: "outage", timeout: .seconds(120))
        #expect(recovered.completed?.finished == count)
        #expect((recovered.completed?.count(of: .delivered) ?? 0) >= count * 95 / 100, "\(recovered.completed?.counts ?? [:])")
        #expect(worker.standardError.contains("event=lane.circuit_closed"))

        // Failing until the expiration second: then every device not yet sent expires.
        _ = try await pipeline.sim.control(["p503": 1])
        let expiration = Int64(Date().timeIntervalSince1970) + 6
        try await pipeline.submit(Pipeline.campaign("deadline", app: "shop", options: #"{"expiration":\#(expiration)}"#))
        while Date().timeIntervalSince1970 < Double(expiration) { try await Task.sleep(for: .milliseconds(20)) }
        _ = try await pipeline.sim.control(["p503": 0])
        let late = try await pipeline.results(of: "deadline", timeout: .seconds(60))
        #expect(late.completed?.finished == count)
        let sentLate = pipeline.delivered(topic: "com.example.shop").filter {
            ($0["collapse_id"] as? String) == "deadline" && (($0["time_ms"] as? NSNumber)?.int64Value ?? 0) > expiration * 1000 + 50
        }
        let lateCount = sentLate.count
        #expect(lateCount == 0, "\(lateCount) notifications reached APNs after their expiration")
        #expect(late.devices.values.allSatisfy { $0.outcome != .delivered || $0.attempts >= 1 })
        #expect((late.completed?.count(of: .expired) ?? 0) > count / 2, "\(late.completed?.counts ?? [:])")
    }

    @Test("the command line's small print: group help, grouped import errors, over-long lines, CSV headers, BOMs, directories, device ids")
    func smallThings() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-small-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = "sqlite:" + directory + "/store.db"

        let help = try await pushfan(["apps", "--help"])
        #expect(help.status == 0 && help.output.contains("apps add") && !help.error.contains("unknown command"), "\(help.output) \(help.error)")
        let devicesHelp = try await pushfan(["devices", "--help"])
        #expect(devicesHelp.status == 0 && devicesHelp.output.contains("devices import"))
        let unknown = try await pushfan(["apps", "remove"])
        #expect(unknown.status == 2 && unknown.error.contains("unknown command 'apps remove'") && unknown.error.contains("apps add"))

        let key = directory + "/key.p8"
        _ = try await CommandLineTool.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        let added = try await pushfan([
            "apps", "add", "--database", database, "--app", "shop", "--topic", "com.example.shop", "--team-id", "TEAM000001",
            "--key-id", "KEY0000001", "--key-file", key,
        ])
        #expect(added.status == 0, "\(added.error)")
        let mode = (try FileManager.default.attributesOfItem(atPath: directory + "/store.db")[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600, "the database was created with mode \(String(mode ?? 0, radix: 8))")

        func token(_ index: Int) -> String { String(format: "%064x", index + 1) }
        // 5,000 lines with one mistake, a few with another, a 10 MB line, and good lines after it.
        var lines: [String] = []
        for index in 0..<5_000 { lines.append(#"{"device_id":"bad-\#(index)","token":"xyz\#(index)"}"#) }
        lines.append(#"{"device_id":"a/b","token":"\#(token(1))"}"#)
        lines.append(#"{"device_id":"big","token":"\#(token(2))","attributes":{"blob":"\#(String(repeating: "z", count: 10_000_000))"}}"#)
        for index in 0..<10 { lines.append(#"{"device_id":"good-\#(index)","token":"\#(token(10 + index))"}"#) }
        let file = directory + "/devices.ndjson"
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try await pushfan(["devices", "import", "--database", database, "--app", "shop", file])
        #expect(imported.status == 1)
        #expect(imported.output.contains("imported 10 devices, rejected 5002 lines"), "\(imported.output)")
        let report = imported.error.split(separator: "\n")
        #expect(report.count <= 6, "\(report.count) lines of errors: \(report.prefix(8))")
        #expect(report.contains { $0.hasPrefix("5000 lines (1, 2, 3, 4, 5, …): ") }, "\(report)")
        #expect(report.contains { $0.hasPrefix("1 line (5001): device id must be") }, "\(report)")
        #expect(report.contains { $0 == "1 line (5002): longer than the limit of 1048575 bytes" }, "\(report)")

        let header = directory + "/wrong.csv"
        try "id,token\nd1,\(token(1))\nd2,\(token(2))\n".write(toFile: header, atomically: true, encoding: .utf8)
        let wrong = try await pushfan(["devices", "import", "--database", database, "--app", "shop", header])
        #expect(wrong.status == 1)
        #expect(wrong.error.contains("unknown CSV column 'id'") && wrong.error.contains("nothing was imported"), "\(wrong.error)")
        #expect(wrong.error.split(separator: "\n").count == 3, "\(wrong.error)")

        let bom = directory + "/excel.csv"
        try "\u{FEFF}device_id,token\nexcel-1,\(token(40))\n".write(toFile: bom, atomically: true, encoding: .utf8)
        let fromExcel = try await pushfan(["devices", "import", "--database", database, "--app", "shop", bom])
        #expect(fromExcel.status == 0 && fromExcel.output.contains("imported 1 devices, rejected 0 lines"), "\(fromExcel.output) \(fromExcel.error)")

        let folder = try await pushfan(["devices", "import", "--database", database, "--app", "shop", directory])
        #expect(folder.status == 2 && folder.error.contains("is a directory"), "\(folder.error)")

        let slash = try await pushfan(["devices", "register", "--database", database, "--app", "shop", "--token", token(50), "--device-id", "a/b"])
        #expect(slash.status == 1 && slash.error.contains("device id must be 1-128 characters of A-Z a-z 0-9 . _ : -"), "\(slash.error)")
    }
}
