import PushfanSupport

/// What the sender's connection pools count, in a process's metrics registry. Counted on
/// the pools' threads: answer times are gathered per loop turn and added in one lock.
package final class APNsMetrics: Sendable {
    let requestDuration: Histogram
    let connectionsOpen: Gauge
    let connectionsOpened: Counter
    let inFlight: Gauge
    let streamLimit: Gauge

    package init(registry: MetricsRegistry) {
        requestDuration = registry.histogram(
            "pushfan_apns_request_duration_seconds", "Time from a request's submission on its connection to APNs' answer.")
        connectionsOpen = registry.gauge("pushfan_apns_connections", "HTTP/2 connections to APNs open now, with their session ready.")
        connectionsOpened = registry.counter("pushfan_apns_connections_opened_total", "HTTP/2 connections to APNs opened (made and their SETTINGS received).")
        inFlight = registry.gauge("pushfan_apns_in_flight", "Requests on the wire to APNs now, waiting for their answers.")
        streamLimit = registry.gauge(
            "pushfan_apns_stream_limit", "Highest SETTINGS_MAX_CONCURRENT_STREAMS APNs has announced on a connection (its temporary 1 left out), capped by the configured streams per connection.")
    }
}
