import PushfanMessages
import PushfanSupport
import Testing

/// The Prometheus text format as the registry writes it.
@Suite struct MetricsRegistryTests {
    @Test("counters, gauges, histograms and collected gauges render with their labels, escaped, in a stable order")
    func rendersEveryKind() {
        let registry = MetricsRegistry()
        let sent = registry.counter("pushfan_test_sent_total", "Sent.", labels: ["app", "outcome"])
        sent.add(2, ["b", "delivered"])
        sent.add(1, ["a", "rejected"])
        sent.add(1, ["a", "rejected"])
        let open = registry.gauge("pushfan_test_open", "Open.")
        open.add(3)
        open.add(-1)
        let durations = registry.histogram("pushfan_test_seconds", "Durations.", bounds: [0.1, 1])
        durations.observe(0.05)
        durations.observe(0.5)
        durations.observe(7)
        registry.collected("pushfan_test_paused", "Paused.", labels: ["app"]) { [(["say \"hi\"\\"], 1)] }
        #expect(registry.render() == """
            # HELP pushfan_test_sent_total Sent.
            # TYPE pushfan_test_sent_total counter
            pushfan_test_sent_total{app="a",outcome="rejected"} 2
            pushfan_test_sent_total{app="b",outcome="delivered"} 2
            # HELP pushfan_test_open Open.
            # TYPE pushfan_test_open gauge
            pushfan_test_open 2
            # HELP pushfan_test_seconds Durations.
            # TYPE pushfan_test_seconds histogram
            pushfan_test_seconds_bucket{le="0.1"} 1
            pushfan_test_seconds_bucket{le="1.0"} 2
            pushfan_test_seconds_bucket{le="+Inf"} 3
            pushfan_test_seconds_sum 7.55
            pushfan_test_seconds_count 3
            # HELP pushfan_test_paused Paused.
            # TYPE pushfan_test_paused gauge
            pushfan_test_paused{app="say \\"hi\\"\\\\"} 1

            """)
        #expect(sent.value(["a", "rejected"]) == 2 && durations.count() == 3)
    }
}
