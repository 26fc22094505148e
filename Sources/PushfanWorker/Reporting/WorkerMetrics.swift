import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport

/// What a worker counts for Prometheus (`pushfan worker --metrics-port`): final outcomes by
/// app, outcome and reason (counted per recorded page, not per device), retries by cause,
/// time spent waiting for an app's rate, engagement events counted, tasks running and queued, apps paused for credentials, and the APNs
/// pools' request durations and connections.
package final class WorkerMetrics: Sendable {
    package let registry: MetricsRegistry
    package let apns: APNsMetrics
    let notifications: Counter
    let retries: Counter
    let rateLimitWait: Counter
    let events: Counter

    package init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        notifications = registry.counter(
            "pushfan_notifications_total", "Devices whose outcome is final, by app, outcome (delivered, rejected, failed, expired, skipped, cancelled) and reason.",
            labels: ["app", "outcome", "reason"])
        retries = registry.counter(
            "pushfan_retries_total", "Sends tried again, by app and cause (APNs' reason, or the transport failure).", labels: ["app", "cause"])
        rateLimitWait = registry.counter(
            "pushfan_rate_limit_wait_seconds_total", "Time sends waited for the app's rate budget, summed over concurrent batches.", labels: ["app"])
        events = registry.counter(
            "pushfan_engagement_events_total", "Engagement events this worker counted for the first time, by app and kind (a replayed event is not counted again).",
            labels: ["app", "kind"])
        apns = APNsMetrics(registry: registry)
    }

    /// Counts one send that will be tried again, by what came back.
    func retried(app: String, after result: APNsSendResult) {
        let cause: String =
            switch result {
            case .response(.rejected(_, let reason, _)): reason.rawValue
            case .response(.accepted): "accepted"
            case .failed(let failure): failure.cause.rawValue
            }
        retries.add(1, [app, cause])
    }

    /// Counts one recorded page of final outcomes.
    func recorded(app: String, _ results: [DeviceResult]) {
        var counts: [[String]: Int] = [:]
        for result in results { counts[[app, result.outcome.rawValue, result.reason ?? ""], default: 0] += 1 }
        for (labels, count) in counts { notifications.add(Double(count), labels) }
    }
}
