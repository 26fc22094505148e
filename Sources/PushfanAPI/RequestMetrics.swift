import PushfanMessages
import PushfanSupport

/// Requests by method, route (the pattern, never the path: a bounded set of labels) and
/// status, with a duration histogram, in the Prometheus text format at `GET /metrics`.
package final class RequestMetrics: Sendable {
    package let registry: MetricsRegistry
    private let requests: Counter
    private let durations: Histogram
    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

    package init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        requests = registry.counter("pushfan_api_requests_total", "API requests answered, by method, route and status.", labels: ["method", "route", "status"])
        durations = registry.histogram(
            "pushfan_api_request_duration_seconds", "Time from a request's body read to its answer, by method, route and status.",
            labels: ["method", "route", "status"])
    }

    package func record(method given: String, route: String, status: Int, seconds: Double) {
        // Clients choose the method: any they could invent would be a label of its own.
        let labels = [Self.methods.contains(given) ? given : "other", route, String(status)]
        requests.add(1, labels)
        durations.observe(seconds, labels)
    }

    /// The exposition text.
    package func render() -> String { registry.render() }
}
