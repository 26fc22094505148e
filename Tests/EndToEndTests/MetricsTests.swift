import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// Metrics as an operator collects them: a real Prometheus server (Debian's) scrapes a
/// worker's `--metrics-port` and the API's `/metrics` during a campaign, and PromQL through
/// its HTTP API reads the counts back.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct MetricsTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy").path
    /// A Prometheus server scraping `targets` every second, on a free port.
    final class PrometheusProcess: @unchecked Sendable {
        let url: String
        let process: ManagedProcess

        init(targets: [String], directory: String) async throws {
            let port = try FreePort.pick()
            let configuration = directory + "/prometheus.yml"
            let list = targets.map { "'\($0)'" }.joined(separator: ", ")
            try """
                global:
                  scrape_interval: 1s
                  scrape_timeout: 1s
                scrape_configs:
                  - job_name: pushfan
                    static_configs:
                      - targets: [\(list)]
                """.write(toFile: configuration, atomically: true, encoding: .utf8)
            process = try ManagedProcess("prometheus", [
                "--config.file", configuration, "--storage.tsdb.path", directory + "/tsdb", "--web.listen-address", "127.0.0.1:\(port)",
            ])
            url = "http://127.0.0.1:\(port)"
            for _ in 0..<100 {
                if (try? await CommandLineTool.run("curl", ["-sf", url + "/-/ready"]))?.status == 0 { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw TestFailure("prometheus did not get ready: \(process.standardError.suffix(2000))")
        }

        /// An instant query's samples as (labels, value).
        func query(_ promql: String) async throws -> [([String: String], Double)] {
            let result = try await CommandLineTool.run("curl", ["-sf", "-G", url + "/api/v1/query", "--data-urlencode", "query=\(promql)"])
            guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any],
                  let data = object["data"] as? [String: Any], let samples = data["result"] as? [[String: Any]]
            else { throw TestFailure("query \(promql) failed: \(result.output) \(result.error)") }
            return samples.map { sample in
                let labels = sample["metric"] as? [String: String] ?? [:]
                let value = ((sample["value"] as? [Any])?.last as? String).flatMap(Double.init) ?? .nan
                return (labels, value)
            }
        }

        func stop() { process.signal(SIGTERM) }
    }

    @Test("Prometheus scrapes a worker and the API during a campaign: delivered equals the simulator's accepted count")
    func prometheusScrapesWorkerAndAPI() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        try await pipeline.addApp("metrics", topic: "com.example.metrics", rate: 1_000, devices: 600)
        let worker = try pipeline.startWorker("m1", extra: ["--metrics-port", "0"])
        guard let output = await worker.waitForOutput(timeout: .seconds(20), { $0.contains("worker metrics on ") }),
              let line = output.split(separator: "\n").first(where: { $0.hasPrefix("worker metrics on ") }),
              let workerTarget = line.split(separator: "/").dropFirst(1).first.map(String.init)
        else { throw TestFailure("the worker printed no metrics address: \(worker.standardOutput) \(worker.standardError.suffix(1000))") }
        let api = try await APITests.start(pipeline)
        defer { api.process.signal(SIGTERM) }
        _ = try await api.call("GET", "/healthz")
        let apiTarget = String(api.url.dropFirst("http://".count))
        let prometheus = try await PrometheusProcess(targets: [workerTarget, apiTarget], directory: pipeline.directory)
        defer { prometheus.stop() }

        try await pipeline.submit(Pipeline.campaign("metrics-1", app: "metrics"))
        let results = try await pipeline.results(of: "metrics-1")
        #expect(results.completed != nil)
        let accepted = try await pipeline.sim.stats()["accepted"] as? Int ?? -1
        #expect(accepted == 600)

        // Prometheus scrapes every second: its view catches up within a few seconds.
        func eventually(_ promql: String, _ good: ([([String: String], Double)]) -> Bool) async throws -> [([String: String], Double)] {
            var samples: [([String: String], Double)] = []
            for _ in 0..<60 {
                samples = try await prometheus.query(promql)
                if good(samples) { break }
                try await Task.sleep(for: .milliseconds(250))
            }
            return samples
        }
        let delivered = try await eventually(#"sum(pushfan_notifications_total{app="metrics",outcome="delivered"})"#) { $0.first?.1 == Double(accepted) }
        #expect(delivered.first?.1 == Double(accepted), "Prometheus saw \(delivered) delivered, the simulator accepted \(accepted)")
        let up = try await eventually("up") { $0.count == 2 && $0.allSatisfy { $0.1 == 1 } }
        #expect(up.count == 2 && up.allSatisfy { $0.1 == 1 }, "both targets are scraped: \(up)")
        let answers = try await prometheus.query("sum(pushfan_apns_request_duration_seconds_count)").first?.1 ?? 0
        #expect(answers >= Double(accepted), "every accepted notification had an APNs answer timed: \(answers)")
        #expect(try await prometheus.query("pushfan_apns_connections_opened_total").first?.1 ?? 0 >= 1)
        #expect(try await prometheus.query(#"pushfan_worker_tasks{state="running"}"#).count == 1)
        // Consumer lag from librdkafka's statistics (every 5 s), per group, topic and partition.
        let isTasksLag: (([String: String], Double)) -> Bool = { $0.0["group"] == "pushfan-workers" && $0.0["topic"] == TopicNames.defaultTasks }
        let lag = try await eventually("pushfan_kafka_consumer_lag") { $0.contains(where: isTasksLag) }
        #expect(lag.contains(where: isTasksLag), "\(lag)")
        #expect(try await prometheus.query("pushfan_kafka_producer_queue").count == 1)
        // The worker's exposition, as promtool (Prometheus' own linter) reads it.
        let text = try await CommandLineTool.run("curl", ["-sf", "http://\(workerTarget)/metrics"]).output
        let file = pipeline.directory + "/worker-metrics.txt"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let lint = try await CommandLineTool.run("sh", ["-c", "promtool check metrics < \(file)"])
        #expect(lint.status == 0, "promtool: \(lint.output) \(lint.error)")
        #expect(text.contains(#"pushfan_notifications_total{app="metrics",outcome="delivered",reason=""} 600"#), "\(text.prefix(800))")
        // Each lane's budget use: the sends its budget granted add up to the sends made, and
        // its budget is the app's rate over its lanes.
        func samples(_ prefix: String) -> [Double] {
            text.split(separator: "\n").filter { $0.hasPrefix(prefix) }.compactMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(samples(#"pushfan_lane_sends_granted_total{app="metrics","#).reduce(0, +) == 600)
        let budgets = samples(#"pushfan_lane_budget_per_second{app="metrics","#)
        #expect(!budgets.isEmpty && budgets.allSatisfy { $0 > 0 && $0 <= 1_000 }, "\(budgets)")
        // Store calls are timed and named by their concern and method.
        #expect((samples(#"pushfan_store_call_duration_seconds_count{call="DeliveryLedger.claim"}"#).first ?? 0) > 0)
        #expect((samples(#"pushfan_store_call_duration_seconds_count{call="DeliveryLedger.record"}"#).first ?? 0) > 0)
        // Every query of the Grafana dashboard evaluates against what was scraped, and every
        // metric the dashboard and the alert rules name is one a worker or the API exports.
        let apiText = try await CommandLineTool.run("curl", ["-sf", api.url + "/metrics"]).output
        let exported = Set((text + apiText).split(separator: "\n").compactMap { line -> String? in
            line.hasPrefix("# TYPE ") ? line.split(separator: " ").dropFirst(2).first.map(String.init) : nil
        })
        let dashboard = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.deploy + "/grafana/pushfan.json"))) as? [String: Any])
        let expressions = (dashboard["panels"] as? [[String: Any]] ?? []).flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
        #expect(expressions.count >= 14)
        for expression in expressions { _ = try await prometheus.query(expression) }
        let rules = try String(contentsOfFile: Self.deploy + "/prometheus/alerts.yml", encoding: .utf8)
        let named = Set((expressions.joined(separator: " ") + rules).matches(of: /pushfan_[a-z_]+/).map { match -> String in
            let name = String(match.output)
            for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && !exported.contains(name) { return String(name.dropLast(suffix.count)) }
            return name
        })
        #expect(named.subtracting(exported).isEmpty, "named but not exported: \(named.subtracting(exported).sorted())")
        let healthz = try await eventually(#"pushfan_api_requests_total{route="/healthz"}"#) { ($0.first?.1 ?? 0) >= 1 }
        #expect((healthz.first?.1 ?? 0) >= 1, "the API's own requests are scraped too: \(healthz)")
    }

    @Test("the alert rules pass promtool's check, and its unit tests show each alert firing and staying quiet")
    func alertRules() async throws {
        let check = try await CommandLineTool.run("promtool", ["check", "rules", Self.deploy + "/prometheus/alerts.yml"])
        #expect(check.status == 0, "\(check.output) \(check.error)")
        #expect(check.output.contains("SUCCESS: 4 rules found"), "\(check.output)")
        let tests = try await CommandLineTool.run("sh", ["-c", "cd '\(Self.deploy)/prometheus' && promtool test rules alerts.test.yml"])
        #expect(tests.status == 0 && tests.output.contains("SUCCESS"), "\(tests.output) \(tests.error)")
    }

    @Test("retries are counted by cause: a simulator answering 10% with 503, each 503 retried unless it was a device's fifth")
    func retriesByCause() async throws {
        let pipeline = try await Pipeline(simArguments: ["--p503", "0.1"])
        defer { pipeline.stop() }
        try await pipeline.addApp("flaky", topic: "com.example.flaky", rate: 1_000, devices: 200)
        let worker = try pipeline.startWorker("r1", extra: ["--metrics-port", "0"])
        guard let output = await worker.waitForOutput(timeout: .seconds(20), { $0.contains("worker metrics on ") }),
              let line = output.split(separator: "\n").first(where: { $0.hasPrefix("worker metrics on ") })
        else { throw TestFailure("the worker printed no metrics address: \(worker.standardError.suffix(1000))") }
        try await pipeline.submit(Pipeline.campaign("flaky-1", app: "flaky"))
        let results = try await pipeline.results(of: "flaky-1")
        // A device answered 503 five times in a row (one in 100,000) fails instead.
        let failed = results.completed?.count(of: .failed) ?? 0
        #expect((results.completed?.count(of: .delivered) ?? 0) + failed == 200)
        let text = try await CommandLineTool.run("curl", ["-sf", String(line.dropFirst("worker metrics on ".count))]).output
        let retried = text.split(separator: "\n").first { $0.hasPrefix(#"pushfan_retries_total{app="flaky",cause="ServiceUnavailable"}"#) }
        let count = retried.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } ?? 0
        let served503 = try await pipeline.sim.stats()["status"] as? [String: Any]
        #expect(count > 0 && Double((served503?["503"] as? Int ?? -1) - failed) == count, "retries \(count), 503s \(served503 ?? [:]), failed \(failed)")
    }
}
