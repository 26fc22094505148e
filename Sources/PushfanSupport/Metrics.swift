/// Metrics in the Prometheus text exposition format: counters, gauges and histograms with
/// labels, registered once and rendered on every scrape. Counting is a short lock per call;
/// callers on hot paths count per batch, not per item.
///
/// Names follow Prometheus' conventions: one `pushfan_` prefix, base units (seconds),
/// `_total` for counters. Label values must come from bounded sets (an app key, an outcome,
/// a route pattern), never from device or campaign ids.
package final class MetricsRegistry: Sendable {
    private let families = Locked<[any MetricFamily]>([])

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

    /// A counter read at each scrape from `read`, for totals another type already keeps.
    package func collectedCounter(_ name: String, _ help: String, labels: [String] = [], read: @escaping @Sendable () -> [([String], Double)]) {
        _ = register(CollectedGauge(name: name, help: help, labels: labels, counter: true, read: read))
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

extension MetricFamily {
    /// One sample line per label set, in label order.
    func appendSamples(_ samples: [([String], Double)], labels: [String], into lines: inout [String]) {
        for (labelValues, value) in samples.sorted(by: { $0.0.lexicographicallyPrecedes($1.0) }) {
            lines.append("\(name)\(MetricsRegistry.labelText(labels, labelValues)) \(MetricsRegistry.number(value))")
        }
    }
}

/// A value per label set, under a lock: what counters and gauges keep.
final class LabeledValues: Sendable {
    private let values = Locked<[[String]: Double]>([:])

    func add(_ amount: Double, _ labelValues: [String]) { values.withLock { $0[labelValues, default: 0] += amount } }
    func set(_ value: Double, _ labelValues: [String]) { values.withLock { $0[labelValues] = value } }
    func value(_ labelValues: [String]) -> Double { values.withLock { $0[labelValues] ?? 0 } }
    var samples: [([String], Double)] { values.withLock { $0.map { ($0.key, $0.value) } } }
}

/// A value that only goes up, per label set.
package final class Counter: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    var type: String { "counter" }
    private let values = LabeledValues()

    init(name: String, help: String, labels: [String]) {
        (self.name, self.help, self.labels) = (name, help, labels)
    }

    package func add(_ amount: Double = 1, _ labelValues: [String] = []) { values.add(amount, labelValues) }

    /// The current value for these labels.
    package func value(_ labelValues: [String] = []) -> Double { values.value(labelValues) }

    func render(into lines: inout [String]) { appendSamples(values.samples, labels: labels, into: &lines) }
}

/// A value that goes up and down, per label set.
package final class Gauge: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    var type: String { "gauge" }
    private let values = LabeledValues()

    init(name: String, help: String, labels: [String]) {
        (self.name, self.help, self.labels) = (name, help, labels)
    }

    package func set(_ value: Double, _ labelValues: [String] = []) { values.set(value, labelValues) }
    package func add(_ amount: Double, _ labelValues: [String] = []) { values.add(amount, labelValues) }
    package func value(_ labelValues: [String] = []) -> Double { values.value(labelValues) }

    func render(into lines: inout [String]) { appendSamples(values.samples, labels: labels, into: &lines) }
}

/// A gauge whose samples are read when scraped.
final class CollectedGauge: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    let read: @Sendable () -> [([String], Double)]
    let counter: Bool
    var type: String { counter ? "counter" : "gauge" }

    init(name: String, help: String, labels: [String], counter: Bool = false, read: @escaping @Sendable () -> [([String], Double)]) {
        (self.name, self.help, self.labels, self.counter, self.read) = (name, help, labels, counter, read)
    }

    func render(into lines: inout [String]) { appendSamples(read(), labels: labels, into: &lines) }
}

/// Observations in cumulative buckets, with their sum and count, per label set.
package final class Histogram: MetricFamily {
    /// Bucket bounds for durations from a millisecond to ten seconds.
    package static let secondsBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// Observations gathered without a lock (by one thread, on a hot path) and added to
    /// the histogram together with `add`.
    package struct Batch: Sendable {
        let bounds: [Double]
        package private(set) var count = 0
        var sum = 0.0
        /// Per bound, not cumulative: summed when rendered.
        var buckets: [Int]

        init(bounds: [Double]) {
            self.bounds = bounds
            buckets = [Int](repeating: 0, count: bounds.count)
        }

        package mutating func observe(_ value: Double) {
            count += 1
            sum += value
            if let index = bounds.firstIndex(where: { value <= $0 }) { buckets[index] += 1 }
        }

        mutating func merge(_ other: Batch) {
            count += other.count
            sum += other.sum
            for index in buckets.indices { buckets[index] += other.buckets[index] }
        }
    }

    let name: String
    let help: String
    let labels: [String]
    let bounds: [Double]
    var type: String { "histogram" }
    private let series = Locked<[[String]: Batch]>([:])

    init(name: String, help: String, labels: [String], bounds: [Double]) {
        (self.name, self.help, self.labels, self.bounds) = (name, help, labels, bounds)
    }

    package func observe(_ value: Double, _ labelValues: [String] = []) {
        series.withLock { all in
            var entry = all[labelValues] ?? Batch(bounds: bounds)
            entry.observe(value)
            all[labelValues] = entry
        }
    }

    /// An empty batch with this histogram's bounds.
    package func batch() -> Batch { Batch(bounds: bounds) }

    /// Adds a batch's observations under one lock.
    package func add(_ batch: Batch, _ labelValues: [String] = []) {
        guard batch.count > 0 else { return }
        series.withLock { all in
            var entry = all[labelValues] ?? Batch(bounds: bounds)
            entry.merge(batch)
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
