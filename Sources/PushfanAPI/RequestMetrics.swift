import Synchronization

/// Requests by method, route (the pattern, never the path: a bounded set of labels) and
/// status, with a duration histogram, in the Prometheus text format at `GET /metrics`.
package final class RequestMetrics: Sendable {
    struct Key: Hashable {
        let method: String
        let route: String
        let status: Int
    }

    struct Series {
        var count = 0
        var seconds = 0.0
        var buckets = [Int](repeating: 0, count: RequestMetrics.bounds.count)
    }

    /// Upper bounds of the duration buckets, in seconds.
    static let bounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    private let series = Mutex<[Key: Series]>([:])
    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

    package init() {}

    package func record(method given: String, route: String, status: Int, seconds: Double) {
        // Clients choose the method: any they could invent would be a label of its own.
        let method = Self.methods.contains(given) ? given : "other"
        series.withLock { all in
            var entry = all[Key(method: method, route: route, status: status), default: Series()]
            entry.count += 1
            entry.seconds += seconds
            for (index, bound) in Self.bounds.enumerated() where seconds <= bound { entry.buckets[index] += 1 }
            all[Key(method: method, route: route, status: status)] = entry
        }
    }

    /// The exposition text.
    package func render() -> String {
        let all = series.withLock { $0 }.sorted { ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status) }
        func labels(_ key: Key, status: Bool = true) -> String {
            "method=\"\(key.method)\",route=\"\(escape(key.route))\"" + (status ? ",status=\"\(key.status)\"" : "")
        }
        var lines = [
            "# HELP pushfan_api_requests_total API requests answered, by method, route and status.",
            "# TYPE pushfan_api_requests_total counter",
        ]
        for (key, entry) in all { lines.append("pushfan_api_requests_total{\(labels(key))} \(entry.count)") }
        lines += [
            "# HELP pushfan_api_request_duration_seconds Time from a request's body read to its answer, by method, route and status.",
            "# TYPE pushfan_api_request_duration_seconds histogram",
        ]
        for (key, entry) in all {
            for (index, bound) in Self.bounds.enumerated() {
                lines.append("pushfan_api_request_duration_seconds_bucket{\(labels(key)),le=\"\(bound)\"} \(entry.buckets[index])")
            }
            lines.append("pushfan_api_request_duration_seconds_bucket{\(labels(key)),le=\"+Inf\"} \(entry.count)")
            lines.append("pushfan_api_request_duration_seconds_sum{\(labels(key))} \(entry.seconds)")
            lines.append("pushfan_api_request_duration_seconds_count{\(labels(key))} \(entry.count)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
