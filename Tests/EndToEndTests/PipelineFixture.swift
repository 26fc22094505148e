import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// The whole stack as separate processes, as an operator runs it: `pushfan kafka-dev`,
/// `pushfan apns-sim` (logging every accepted notification), a SQLite store filled through
/// `pushfan apps add` and `pushfan devices import`, and `pushfan worker` processes.
/// Results are read back with an independent consumer of the results topic.
final class Pipeline: @unchecked Sendable {
    /// This pipeline's files (store, simulator log, keys), removed after the pipeline.
    private let scratch: ScratchDirectory
    var directory: String { scratch.path }
    let cluster: DevClusterProcess
    let sim: SimulatorProcess
    let database: String
    let keyFile: String
    private(set) var workers: [String: ManagedProcess] = [:]
    let partitions: Int

    /// Page size the workers use (the default); the in-flight window of one lane.
    static let pageSize = PushfanConfiguration.Worker().pageSize

    /// `postgres: true` puts the device store in a fresh database of the test PostgreSQL
    /// server (scripts/with-postgres); otherwise a SQLite file.
    init(simArguments: [String] = [], partitions: Int = 6, postgres: Bool = false) async throws {
        let scratch = try ScratchDirectory("pushfan-pipeline")
        self.scratch = scratch
        let directory = scratch.path
        self.partitions = partitions
        cluster = try await DevClusterProcess(partitions: partitions)
        // The 20-minute provider-token rule per key, across connections: the workers must
        // share one token (through the store) or APNs-like TooManyProviderTokenUpdates follow.
        sim = try await SimulatorProcess(["--accept-any-key", "--token-updates", "key", "--log", directory + "/sim.ndjson"] + simArguments)
        if postgres {
            guard let server = ProcessInfo.processInfo.environment["PUSHFAN_TEST_POSTGRES"], let slash = server.lastIndex(of: "/") else {
                throw TestFailure("PUSHFAN_TEST_POSTGRES is not set: run the tests through scripts/test (scripts/with-postgres)")
            }
            let name = "pushfan_e2e_\(UUID().uuidString.prefix(8).lowercased())"
            let created = try await CommandLineTool.run("psql", [server, "-q", "-c", "CREATE DATABASE \(name)"])
            guard created.status == 0 else { throw TestFailure("psql: \(created.error)") }
            database = server[..<slash] + "/" + name
        } else {
            database = "sqlite:" + directory + "/store.db"
        }
        keyFile = directory + "/key.p8"
        let key = try await CommandLineTool.run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyFile])
        guard key.status == 0 else { throw TestFailure("openssl: \(key.error)") }
    }

    deinit { stop() }

    func stop() {
        for worker in workers.values where worker.isRunning { worker.signal(SIGKILL) }
        sim.stop()
        cluster.process.signal(SIGTERM)
    }

    /// The token of device `index` of an app: 64 hex digits, `prefix` first.
    static func token(_ index: Int, prefix: String = "") -> String {
        let digits = String(format: "%064x", index + 1)
        return prefix + digits.dropFirst(prefix.count)
    }

    /// Registers an app and imports `count` devices `<app>-<i>`; `prefix(i)` starts the
    /// token of device i (simulator rules match on prefixes), `fields(i)` adds members to its
    /// import line (`"timezone":"Asia/Tokyo"`), `appArguments` go to `apps add`.
    func addApp(
        _ app: String, topic: String, rate: Int, devices count: Int, locales: [String] = ["en_US", "de_DE", "fr_FR"], keyFile: String? = nil,
        appArguments: [String] = [], prefix: (Int) -> String = { _ in "" }, fields: (Int) -> String? = { _ in nil }
    ) async throws {
        try await run([
            "apps", "add", "--database", database, "--app", app, "--topic", topic, "--team-id", "TEAM000001", "--key-id", "KEY0000001",
            "--key-file", keyFile ?? self.keyFile, "--rate", String(rate),
        ] + appArguments)
        let file = directory + "/\(app)-devices.ndjson"
        var text = ""
        text.reserveCapacity(count * 120)
        for index in 0..<count {
            let extra = fields(index).map { "," + $0 } ?? ""
            text += #"{"device_id":"\#(app)-\#(index)","token":"\#(Self.token(index, prefix: prefix(index)))","locale":"\#(locales[index % locales.count])"\#(extra)}"# + "\n"
        }
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        try await run(["devices", "import", "--database", database, "--app", app, file])
    }

    @discardableResult
    func run(_ arguments: [String], input: Data? = nil) async throws -> CommandLineTool.Result {
        let result = try await CommandLineTool.run(TestBinaries.pushfan, arguments, input: input)
        guard result.status == 0 else { throw TestFailure("pushfan \(arguments.prefix(2).joined(separator: " ")) exited \(result.status): \(result.error)") }
        return result
    }

    var kafkaArguments: [String] {
        var arguments = ["--brokers", cluster.bootstrapServers]
        for (key, value) in DevClusterProcess.fastGroupProperties { arguments += ["--property", "\(key)=\(value)"] }
        return arguments
    }

    /// Starts worker `id`; with `clockOffset`, its wall clock reads that many seconds ahead
    /// (`pushfan-shifted-clock`; the simulator's must be shifted alike).
    @discardableResult
    func startWorker(_ id: String, lease: Int = 4, database: String? = nil, extra: [String] = [], clockOffset: Int? = nil) throws -> ManagedProcess {
        var arguments = ["worker", "--id", id, "--database", database ?? self.database, "--url", sim.url, "--lease", String(lease), "--log-level", "info"]
        if let caFile = sim.caFile { arguments += ["--ca-file", caFile] }
        arguments += kafkaArguments + extra
        let worker = try clockOffset.map { offset in
            try ManagedProcess(TestBinaries.shiftedClock, [String(offset)] + arguments, name: "worker-\(id)")
        } ?? ManagedProcess(TestBinaries.pushfan, arguments, name: "worker-\(id)")
        workers[id] = worker
        return worker
    }

    /// Starts workers "victim" and "survivor" (3 s leases), submits `campaign`, and kills the
    /// victim with SIGKILL once 40 % of its `devices` reached the simulator's `topic`;
    /// returns when it was killed (epoch ms).
    @discardableResult
    func killOneOfTwoAtFortyPercent(_ campaign: String, topic: String, devices count: Int) async throws -> Int64 {
        let victim = try startWorker("victim", lease: 3)
        try startWorker("survivor", lease: 3)
        try await submit(campaign)
        let reached = await Self.eventually(timeout: .seconds(60)) { delivered(topic: topic).count >= count * 4 / 10 }
        #expect(reached, "the campaign never reached 40%")
        let killedAt = Int64(Date().timeIntervalSince1970 * 1000)
        victim.signal(SIGKILL)
        _ = await victim.waitForExit()
        return killedAt
    }

    /// Waits until each worker of `ids` has been given tasks partitions and the sender group
    /// has been quiet for a second (a join takes one or two rebalance rounds), so that what a
    /// test measures next is not the group forming.
    func waitForSenderGroup(_ ids: [String]) async throws {
        func groupEvents(_ id: String) -> Int {
            (logged("kafka.assigned", workers: [id]) + logged("kafka.revoked", workers: [id]))
                .filter { $0["logger"] == "pushfan.worker.pushfan-workers" }.count
        }
        var last = -1
        var quietSince = ContinuousClock.now
        let settled = await Self.eventually(timeout: .seconds(60)) {
            let count = ids.reduce(0) { $0 + groupEvents($1) }
            if count != last { (last, quietSince) = (count, .now) }
            let owning = ids.allSatisfy { id in logged("kafka.assigned", workers: [id]).contains { $0["kafka.partitions"]?.contains("tasks[") == true } }
            return owning && ContinuousClock.now - quietSince >= .seconds(1)
        }
        if !settled { throw TestFailure("the sender group did not settle: \(groupTimeline(ids))") }
    }

    /// The workers' group and task events, in time order.
    func groupTimeline(_ ids: [String]) -> String {
        timeline(ids, matching: ["event=worker.started", "event=worker.stopped", "event=kafka.assigned", "event=kafka.revoked", "event=task.finished", "event=task.handed_back"])
    }

    /// The log lines of these workers that contain any of `fragments`, in time order, each as
    /// its time, the worker's id and the rest of its fields. A line is matched with a space
    /// after it, so `"=x "` finds a field `=x` at its end too.
    func timeline(_ ids: [String], matching fragments: [String]) -> String {
        ids.flatMap { id in
            (workers[id]?.standardError ?? "").split(separator: "\n").filter { line in fragments.contains { (line + " ").contains($0) } }.map { line in
                let fields = line.split(separator: " ")
                let time = fields.first { $0.hasPrefix("ts=") } ?? ""
                return "\(time) \(id) \(fields.filter { !$0.hasPrefix("ts=") && !$0.hasPrefix("level=") }.joined(separator: " "))"
            }
        }.sorted().joined(separator: "\n")
    }

    /// The fields (`key=value`, unquoted) of every `event` line these workers logged.
    func logged(_ event: String, workers ids: [String]) -> [[String: String]] {
        ids.flatMap { id in
            (workers[id]?.standardError ?? "").split(separator: "\n").filter { $0.contains("event=\(event) ") }.map { line in
                Dictionary(line.split(separator: " ").compactMap { field in
                    field.firstIndex(of: "=").map { (String(field[..<$0]), String(field[field.index(after: $0)...])) }
                }, uniquingKeysWith: { first, _ in first })
            }
        }
    }

    /// Submits a campaign with `pushfan submit` (validated by the CLI).
    func submit(_ json: String) async throws {
        let file = directory + "/campaign-\(UUID().uuidString.prefix(6)).json"
        try json.write(toFile: file, atomically: true, encoding: .utf8)
        try await run(["submit", file] + kafkaArguments)
    }

    /// Writes raw records to the campaigns topic (`pushfan produce`), bypassing validation.
    func produceRaw(_ lines: [String], key: String, topic: String = TopicNames.defaultCampaigns) async throws {
        try await run(["produce", "--topic", topic, "--key", key] + kafkaArguments, input: Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    /// Accepted notifications the simulator logged for `topic`.
    func delivered(topic: String) -> [[String: Any]] {
        sim.logLines().filter { ($0["topic"] as? String) == topic }
    }

    struct CampaignResults {
        /// The last result per device id.
        var devices: [String: DeviceResult] = [:]
        /// Device records read, duplicates included.
        var records = 0
        var events: [CampaignEvent] = []
        var completed: CampaignEvent? { events.last { $0.event == .completed } }
    }

    /// Reads the results topic from the start until `campaign` has completed and a result
    /// for every device of its audience has been read, or `timeout` passes; then records an
    /// issue that says what was seen and what the workers logged about the campaign.
    func results(of campaign: String, timeout: Duration = .seconds(120)) async throws -> CampaignResults {
        let results = try await readResults(of: campaign, timeout: timeout)
        if results.completed.map({ results.devices.count < $0.finished }) ?? true {
            Issue.record("campaign \(campaign) did not complete within \(timeout): \(stallReport(campaign, results))")
        }
        return results
    }

    /// What a campaign that did not complete left behind: its results so far, the workers'
    /// log lines that name it and their last warnings.
    func stallReport(_ campaign: String, _ results: CampaignResults) -> String {
        let outcomes = Dictionary(grouping: results.devices.values, by: \.outcome.rawValue).mapValues(\.count)
        let ids = workers.keys.sorted()
        let warnings = ids.flatMap { id in
            (workers[id]?.standardError ?? "").split(separator: "\n").filter { $0.contains("level=error") || $0.contains("level=warning") }.suffix(3).map { "\(id): \($0)" }
        }
        return """
            events \(results.events.map(\.event.rawValue)), \(results.devices.count) devices \(outcomes), \(results.records) records; \
            workers' lines on it:
            \(timeline(ids, matching: ["/\(campaign) ", "=\(campaign) "]).split(separator: "\n").suffix(20).joined(separator: "\n"))
            group: \(groupTimeline(ids).split(separator: "\n").suffix(12).joined(separator: "\n"))
            last warnings: \(warnings)
            """
    }

    private func readResults(of campaign: String, timeout: Duration) async throws -> CampaignResults {
        try await readTopic(TopicNames.defaultResults, timeout: timeout, into: CampaignResults()) { results, record in
            guard let decoded = try? MessageCodec.decode(ResultRecord.self, from: Data(record.value)), decoded.campaignKey.id == campaign else { return false }
            switch decoded {
            case .device(let device):
                results.devices[device.device] = device
                results.records += 1
            case .campaign(let event):
                results.events.append(event)
            }
            guard let completed = results.completed else { return false }
            return results.devices.count >= completed.finished
        }
    }

    /// Reads `topic` from the start with a private group until `done` says so.
    func readTopic<State: Sendable>(
        _ topic: String, timeout: Duration, into initial: State, _ done: @escaping (inout State, KafkaRecord) -> Bool
    ) async throws -> State {
        try await TopicReader.read(topic, bootstrapServers: cluster.bootstrapServers, timeout: timeout, into: initial, done)
    }

    /// Waits until `predicate` holds, polling; false after `timeout`.
    static func eventually(timeout: Duration, _ predicate: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if predicate() { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return predicate()
    }

    static func campaign(_ id: String, app: String, audience: String = #"{"segment":"locale in (en_US, de_DE, fr_FR)"}"#, options: String = "{}") -> String {
        #"{"v":1,"id":"\#(id)","app":"\#(app)","audience":\#(audience),"notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"},"locales":{"de":{"title":"Rabatt","body":"20 % auf alles"}}}},"options":\#(options)}"#
    }
}
