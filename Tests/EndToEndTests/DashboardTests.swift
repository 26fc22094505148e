import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// The live dashboard as an operator uses it: a real browser (headless Chromium) loads it
/// during a campaign, curl follows its event stream, and its counts survive `kill -9` of the
/// API, checked against the results topic read independently with kcat.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct DashboardTests {
    static let adminToken = "dashboard-admin-token-0123456789"

    /// `pushfan api` with the admin token, for `pipeline`; the first start also adds app `shop`.
    static func startAPI(_ pipeline: Pipeline, first: Bool = true) async throws -> APITests.Server {
        try await APITests.start(pipeline, adminToken: adminToken, app: first ? "shop" : nil)
    }

    /// The dashboard's snapshot as the admin sees it.
    static func state(_ api: APITests.Server, campaign: String? = nil) async throws -> [String: Any] {
        let result = try await CommandLineTool.run("curl", ["-sf", "-u", "admin:\(adminToken)", api.url + "/dashboard/state" + (campaign.map { "?campaign=\($0)" } ?? "")])
        guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any] else {
            throw TestFailure("GET /dashboard/state failed (\(result.status)): \(result.output) \(result.error)")
        }
        return object
    }

    static func row(_ state: [String: Any], _ campaign: String) -> [String: Any]? {
        (state["campaigns"] as? [[String: Any]])?.first { $0["id"] as? String == campaign }
    }

    /// Waits until the dashboard's row of `campaign` (`<app>/<id>`, as the dashboard names it) satisfies `predicate`.
    static func waitForRow(_ api: APITests.Server, _ campaign: String, timeout: Duration = .seconds(90), _ predicate: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + timeout
        var last: [String: Any]?
        while ContinuousClock.now < deadline {
            last = row(try await state(api), campaign)
            if let last, predicate(last) { return last }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw TestFailure("the dashboard's row of \(campaign) never got there: \(String(describing: last))")
    }

    /// Headless Chromium's `--dump-dom` of the dashboard, logged in as the admin through the
    /// URL's credentials (as a user would answer the browser's prompt).
    static func dumpDOM(_ api: APITests.Server, directory: String, screenshot: String? = nil, query: String = "") async throws -> String {
        let url = api.url.replacingOccurrences(of: "http://", with: "http://admin:\(adminToken)@") + "/dashboard" + query
        var arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(directory)/chromium-\(UUID().uuidString.prefix(6))"]
        arguments += screenshot.map { ["--screenshot=\($0)", "--window-size=1280,1100", "--hide-scrollbars"] } ?? ["--dump-dom"]
        let result = try await CommandLineTool.run("chromium", arguments + [url])
        guard result.status == 0 else { throw TestFailure("chromium failed (\(result.status)): \(result.error.suffix(2000))") }
        return result.output
    }

    /// A campaign's row in a dumped DOM: its `data-` attributes.
    static func domRow(_ dom: String, _ campaign: String) -> [String: String]? {
        guard let start = dom.range(of: #"data-campaign="\#(campaign)""#) else { return nil }
        let tagStart = dom[..<start.lowerBound].range(of: "<tr", options: .backwards)?.lowerBound ?? start.lowerBound
        guard let tagEnd = dom[start.upperBound...].firstIndex(of: ">") else { return nil }
        var attributes: [String: String] = [:]
        let tag = String(dom[tagStart..<tagEnd])
        let pattern = try! NSRegularExpression(pattern: #"data-([a-z]+)="([^"]*)""#)
        for match in pattern.matches(in: tag, range: NSRange(tag.startIndex..., in: tag)) {
            attributes[String(tag[Range(match.range(at: 1), in: tag)!])] = String(tag[Range(match.range(at: 2), in: tag)!])
        }
        return attributes
    }

    @Test("a browser loads the dashboard during a campaign: the DOM shows it running and its progress moving; who may look is enforced")
    func browserSeesProgressMove() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        // 40 s of sending: a browser started while the whole suite runs can take seconds.
        // Results come a page at a time (two tasks of 500 devices: 2.5 s at this rate), so
        // the second load comes 3 s after the first.
        try await pipeline.addApp("dash", topic: "com.example.dash", rate: 400, devices: 16_000)
        let api = try await Self.startAPI(pipeline)
        defer { api.process.signal(SIGTERM) }
        try pipeline.startWorker("d1")
        try await pipeline.submit(Pipeline.campaign("dash-1", app: "dash"))
        _ = try await Self.waitForRow(api, "dash/dash-1") { ($0["done"] as? Int ?? 0) > 0 && $0["status"] as? String == "running" }

        let first = try #require(Self.domRow(try await Self.dumpDOM(api, directory: pipeline.directory), "dash/dash-1"))
        // Rendered again until the count has moved (the page is a new one each time).
        var dom = ""
        var second: [String: String] = [:]
        for _ in 0..<10 {
            dom = try await Self.dumpDOM(api, directory: pipeline.directory)
            second = try #require(Self.domRow(dom, "dash/dash-1"))
            if (Int(second["done"] ?? "") ?? -1) > (Int(first["done"] ?? "") ?? -1) { break }
        }
        #expect(first["status"] == "running" && second["status"] == "running", "\(first) \(second)")
        #expect(first["audience"] == "16000" && second["audience"] == "16000")
        let (before, after) = (Int(first["done"] ?? "") ?? -1, Int(second["done"] ?? "") ?? -1)
        #expect(before > 0 && after > before && after < 16_000, "progress moved: \(before) then \(after)")
        // What the script drew: the title of the chosen campaign's charts and the app's row.
        #expect(dom.contains("Send rate of dash/dash-1") && dom.contains(#"data-app="dash""#))
        #expect(dom.contains(#"<canvas id="rate-chart""#))

        let picture = pipeline.directory + "/dashboard.png"
        _ = try await Self.dumpDOM(api, directory: pipeline.directory, screenshot: picture)
        let png = try Data(contentsOf: URL(fileURLWithPath: picture))
        #expect(png.count > 10_000 && png.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]), "a PNG screenshot: \(png.count) bytes")

        // Who may look: nobody without credentials, not the application secret, the admin
        // token as a bearer too, and an app's master secret sees only its own campaigns.
        let anonymous = try await api.call("GET", "/dashboard")
        #expect(anonymous.status == 401 && anonymous.headers["www-authenticate"] == #"Basic realm="pushfan dashboard""#)
        #expect(anonymous.body.contains(#""code":"unauthorized""#) && anonymous.body.contains("admin token"))
        #expect(try await api.call("GET", "/dashboard/state", secret: api.application).status == 401)
        #expect(try await api.call("GET", "/dashboard/state", secret: "wrong-token-wrong-token", app: "admin").status == 401)
        let bearer = try await api.call("GET", "/dashboard/state", headers: ["Authorization: Bearer \(Self.adminToken)"])
        // The snapshot's JSON escapes `/` (it is also inlined into the page, where `</` must not appear).
        #expect(bearer.status == 200 && bearer.body.contains(#""id":"dash\/dash-1""#))
        // The page may not be framed, runs only its own scripts and never sends its address on.
        let page = try await api.call("GET", "/dashboard", headers: ["Authorization: Bearer \(Self.adminToken)"])
        #expect(page.headers["x-frame-options"] == "DENY" && page.headers["referrer-policy"] == "no-referrer" && page.headers["x-content-type-options"] == "nosniff")
        #expect(page.headers["content-security-policy"]?.contains("frame-ancestors 'none'") == true && page.headers["content-security-policy"]?.contains("script-src 'self'") == true)
        let shop = try await api.call("GET", "/dashboard/state", secret: api.master)
        #expect(shop.status == 200 && !shop.body.contains("dash-1") && shop.body.contains(#""deadLetters":[]"#), "\(shop.body)")
        // The scripts need no credentials; Chart.js is Debian's, served locally.
        let chart = try await api.call("GET", "/dashboard/chart.js")
        #expect(chart.status == 200 && chart.body.contains("Chart.js v"))
        #expect(try await api.call("GET", "/dashboard/dashboard.js").status == 200)
    }

    @Test("the event stream sends snapshots as progress moves and heartbeats when quiet; a client that leaves is noticed")
    func eventStream() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        // Results come a page at a time: about one page of each of two tasks per second.
        try await pipeline.addApp("live", topic: "com.example.live", rate: 1_000, devices: 15_000)
        let api = try await Self.startAPI(pipeline)
        defer { api.process.signal(SIGTERM) }
        try pipeline.startWorker("l1")
        try await pipeline.submit(Pipeline.campaign("live-1", app: "live"))
        _ = try await Self.waitForRow(api, "live/live-1") { ($0["done"] as? Int ?? 0) > 0 }

        // During the campaign: several snapshots, each one line of JSON, progress rising.
        let during = try await CommandLineTool.run("curl", ["-sN", "--max-time", "4", "-u", "admin:\(Self.adminToken)", api.url + "/dashboard/events?campaign=live/live-1"])
        let snapshots = during.output.split(separator: "\n").filter { $0.hasPrefix("data: ") }.compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any]
        }
        #expect(during.output.hasPrefix("retry: 2000\n\nevent: snapshot\ndata: "), "\(during.output.prefix(200))")
        let done = snapshots.compactMap { Self.row($0, "live/live-1")?["done"] as? Int }
        #expect(done.count >= 3 && done.last! > done.first!, "progress in the stream: \(done)")
        #expect(snapshots.last.flatMap { ($0["selected"] as? [String: Any])?["name"] as? String } == "live/live-1")
        // While it runs, the campaign is one of the few whose id is a metrics label.
        let running = try await api.call("GET", "/metrics").body
        #expect(running.contains(#"pushfan_campaign_audience_devices{campaign="live-1",app="live"} 15000"#), "\(running.suffix(1500))")
        #expect(running.contains(#"pushfan_campaign_done_devices{campaign="live-1",app="live"} "#))

        // Quiet: app shop has sent nothing, so its view does not change; heartbeats keep the
        // stream alive (one within 5 s of silence).
        let quiet = try await CommandLineTool.run("curl", ["-sN", "--max-time", "7", "-u", "shop:\(api.master)", api.url + "/dashboard/events"])
        #expect(quiet.output.components(separatedBy: "event: snapshot").count == 2, "one snapshot, then silence: \(quiet.output.prefix(300))")
        #expect(quiet.output.hasSuffix("\n\n: heartbeat\n\n"), "\(quiet.output.suffix(300))")

        // A listener that is killed stops being counted once a write to it fails.
        func streamsOpen() async throws -> Int {
            let metrics = try await api.call("GET", "/metrics")
            let line = metrics.body.split(separator: "\n").first { $0.hasPrefix("pushfan_dashboard_streams ") }
            return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? -1
        }
        func waitForStreams(_ expected: Int, timeout: Duration) async throws -> Int {
            let deadline = ContinuousClock.now + timeout
            var open = try await streamsOpen()
            while open != expected && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                open = try await streamsOpen()
            }
            return open
        }
        let listener = try ManagedProcess("curl", ["-sN", "-u", "admin:\(Self.adminToken)", api.url + "/dashboard/events"], name: "listener")
        #expect(try await waitForStreams(1, timeout: .seconds(10)) == 1)
        listener.signal(SIGKILL)
        #expect(try await waitForStreams(0, timeout: .seconds(20)) == 0, "the dead client is dropped")
    }

    @Test("after kill -9 and a restart of the API, the dashboard's counts equal the results topic read independently")
    func countsSurviveKillAndRestart() async throws {
        let rules = pipelineRules()
        let pipeline = try await Pipeline(simArguments: ["--rules", rules])
        defer { pipeline.stop() }
        let count = 3_000
        try await pipeline.addApp("tally", topic: "com.example.tally", rate: 300, devices: count) { index in
            index % 20 == 3 ? "0bad" : index % 20 == 7 ? "dea0" : ""
        }
        var api = try await Self.startAPI(pipeline)
        try pipeline.startWorker("t1")
        try await pipeline.submit(Pipeline.campaign("tally-1", app: "tally"))
        _ = try await Self.waitForRow(api, "tally/tally-1") { ($0["done"] as? Int ?? 0) > 600 }
        api.process.signal(SIGKILL)
        _ = await api.process.waitForExit(timeout: .seconds(10))
        try await Task.sleep(for: .seconds(2))
        api = try await Self.startAPI(pipeline, first: false)
        defer { api.process.signal(SIGTERM) }

        // Settled: completed, and two reads a second apart agree.
        var row = try await Self.waitForRow(api, "tally/tally-1") { $0["status"] as? String == "completed" }
        while true {
            try await Task.sleep(for: .seconds(1))
            let again = try #require(Self.row(try await Self.state(api), "tally/tally-1"))
            if NSDictionary(dictionary: again).isEqual(to: row) { break }
            row = again
        }

        // The independent reader: kcat over the whole results topic.
        let dump = try await CommandLineTool.run("kcat", ["-C", "-b", pipeline.cluster.bootstrapServers, "-t", TopicNames.defaultResults, "-o", "beginning", "-e", "-q", "-f", "%s\\n"])
        #expect(dump.status == 0, "\(dump.error)")
        var outcomes: [String: Int] = [:]
        var reasons: [String: Int] = [:]
        for line in dump.output.split(separator: "\n") {
            guard let record = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  record["type"] as? String == "device", record["campaign"] as? String == "tally-1", let outcome = record["outcome"] as? String
            else { continue }
            outcomes[outcome, default: 0] += 1
            if let reason = record["reason"] as? String { reasons["\(outcome)/\(reason)", default: 0] += 1 }
        }
        #expect(outcomes.values.reduce(0, +) >= count)
        #expect(outcomes["invalid_token"] ?? 0 > 0)
        #expect(row["outcomes"] as? [String: Int] == outcomes, "dashboard \(row["outcomes"] ?? "") vs kcat \(outcomes)")
        let shown = (row["reasons"] as? [[String: Any]] ?? []).reduce(into: [String: Int]()) { sum, reason in
            sum["\(reason["outcome"] as? String ?? "")/\(reason["reason"] as? String ?? "")"] = reason["count"] as? Int
        }
        #expect(shown == reasons, "dashboard \(shown) vs kcat \(reasons)")
        #expect(row["done"] as? Int == count && row["audience"] as? Int == count)
    }

    /// Simulator rules: tokens starting `0bad` are refused as BadDeviceToken, `dea0` as Unregistered.
    func pipelineRules() -> String {
        let rules = FileManager.default.temporaryDirectory.appendingPathComponent("dashboard-rules-\(UUID().uuidString.prefix(6)).json").path
        try? #"{"prefixes": {"dea0": "Unregistered", "0bad": "BadDeviceToken"}}"#.write(toFile: rules, atomically: true, encoding: .utf8)
        return rules
    }
}
