import Synchronization

/// Metrics in the Prometheus text exposition format: counters, gauges and histograms with
/// labels, registered once and rendered on every scrape. Counting is a short lock per call;
/// callers on hot paths count per batch, not per item.
///
/// Names follow Prometheus' conventions: one `pushfan_` prefix, base units (seconds),
/// `_total` for counters. Label values must come from bounded sets (an app key, an outcome,
/// a route pattern), never from device or campaign ids.
package final class MetricsRegistry: Sendable {
    private let families = Mutex<[any MetricFamily]>([])

    package init() {}

    package func counter(_ name: String, _ help: String, labels: [String] = []) -> Counter {
        register(Counter(name: name, help: help, labels: labels))
    }

    package func gauge(_ name: String, _ help: String, labels: [String] = []) -> Gauge {
        register(Gauge(name: name, help: help, labels: labels))
    }

    package func histogram(_ name: String, _ help: String, labels: [String] = [], bounds: [Double] = Histogram.secondsBounds) -> Histogram {
        register(Histogram(name: name, help: help, labels: labels, bounds: bounds))
    }

    /// A gauge read at each scrape from `read` (label values, value), for state another
    /// type already keeps (tasks running, apps paused).
    package func collected(_ name: String, _ help: String, labels: [String] = [], read: @escaping @Sendable () -> [([String], Double)]) {
        _ = register(CollectedGauge(name: name, help: help, labels: labels, read: read))
    }

    private func register<Family: MetricFamily>(_ family: Family) -> Family {
        families.withLock { $0.append(family) }
        return family
    }

    /// The exposition text of every family, in registration order.
    package func render() -> String {
        var lines: [String] = []
        for family in families.withLock({ $0 }) {
            lines.append("# HELP \(family.name) \(family.help)")
            lines.append("# TYPE \(family.name) \(family.type)")
            family.render(into: &lines)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `{a="x",b="y"}` (empty without labels), values escaped as the format asks.
    static func labelText(_ names: [String], _ values: [String], extra: String? = nil) -> String {
        var pairs = zip(names, values).map { name, value in
            "\(name)=\"\(value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n"))\""
        }
        if let extra { pairs.append(extra) }
        return pairs.isEmpty ? "" : "{" + pairs.joined(separator: ",") + "}"
    }

    static func number(_ value: Double) -> String {
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}

protocol MetricFamily: Sendable {
    var name: String { get }
    var help: String { get }
    var type: String { get }
    func render(into lines: inout [String])
}

/// A value that only goes up, per label set.
package final class Counter: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    var type: String { "counter" }
    private let values = Mutex<[[String]: Double]>([:])

    init(name: String, help: String, labels: [String]) {
        (self.name, self.help, self.labels) = (name, help, labels)
    }

    package func add(_ amount: Double = 1, _ labelValues: [String] = []) {
        values.withLock { $0[labelValues, default: 0] += amount }
    }

    /// The current value for these labels (tests, and the dashboard's own use).
    package func value(_ labelValues: [String] = []) -> Double { values.withLock { $0[labelValues] ?? 0 } }

    func render(into lines: inout [String]) {
        for (labelValues, value) in values.withLock({ $0 }).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            lines.append("\(name)\(MetricsRegistry.labelText(labels, labelValues)) \(MetricsRegistry.number(value))")
        }
    }
}

/// A value that goes up and down, per label set.
package final class Gauge: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    var type: String { "gauge" }
    private let values = Mutex<[[String]: Double]>([:])

    init(name: String, help: String, labels: [String]) {
        (self.name, self.help, self.labels) = (name, help, labels)
    }

    package func set(_ value: Double, _ labelValues: [String] = []) { values.withLock { $0[labelValues] = value } }
    package func add(_ amount: Double, _ labelValues: [String] = []) { values.withLock { $0[labelValues, default: 0] += amount } }
    package func value(_ labelValues: [String] = []) -> Double { values.withLock { $0[labelValues] ?? 0 } }

    func render(into lines: inout [String]) {
        for (labelValues, value) in values.withLock({ $0 }).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            lines.append("\(name)\(MetricsRegistry.labelText(labels, labelValues)) \(MetricsRegistry.number(value))")
        }
    }
}

/// A gauge whose samples are read when scraped.
final class CollectedGauge: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    let read: @Sendable () -> [([String], Double)]
    var type: String { "gauge" }

    init(name: String, help: String, labels: [String], read: @escaping @Sendable () -> [([String], Double)]) {
        (self.name, self.help, self.labels, self.read) = (name, help, labels, read)
    }

    func render(into lines: inout [String]) {
        for (labelValues, value) in read().sorted(by: { $0.0.lexicographicallyPrecedes($1.0) }) {
            lines.append("\(name)\(MetricsRegistry.labelText(labels, labelValues)) \(MetricsRegistry.number(value))")
        }
    }
}

/// Observations in cumulative buckets, with their sum and count, per label set.
package final class Histogram: MetricFamily {
    /// Bucket bounds for durations from a millisecond to ten seconds.
    package static let secondsBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct Series {
        var count = 0
        var sum = 0.0
        var buckets: [Int]
    }

    let name: String
    let help: String
    let labels: [String]
    let bounds: [Double]
    var type: String { "histogram" }
    private let series = Mutex<[[String]: Series]>([:])

    init(name: String, help: String, labels: [String], bounds: [Double]) {
        (self.name, self.help, self.labels, self.bounds) = (name, help, labels, bounds)
    }

    package func observe(_ value: Double, _ labelValues: [String] = []) {
        series.withLock { all in
            var entry = all[labelValues] ?? Series(buckets: [Int](repeating: 0, count: bounds.count))
            entry.count += 1
            entry.sum += value
            // Buckets are counted per bound here and summed when rendered.
            if let index = bounds.firstIndex(where: { value <= $0 }) { entry.buckets[index] += 1 }
            all[labelValues] = entry
        }
    }

    package func count(_ labelValues: [String] = []) -> Int { series.withLock { $0[labelValues]?.count ?? 0 } }

    func render(into lines: inout [String]) {
        for (labelValues, entry) in series.withLock({ $0 }).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            var cumulative = 0
            for (index, bound) in bounds.enumerated() {
                cumulative += entry.buckets[index]
                lines.append("\(name)_bucket\(MetricsRegistry.labelText(labels, labelValues, extra: "le=\"\(bound)\"")) \(cumulative)")
            }
            lines.append("\(name)_bucket\(MetricsRegistry.labelText(labels, labelValues, extra: "le=\"+Inf\"")) \(entry.count)")
            lines.append("\(name)_sum\(MetricsRegistry.labelText(labels, labelValues)) \(entry.sum)")
            lines.append("\(name)_count\(MetricsRegistry.labelText(labels, labelValues)) \(entry.count)")
        }
    }
}
