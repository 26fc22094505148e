import PushfanKafka

/// Records a worker or the API produced that Kafka did not acknowledge (results, events,
/// tasks): the work they describe is not done, so it runs again.
package struct NotDelivered: Error, CustomStringConvertible, Sendable {
    /// What was being produced, e.g. "results of c1 shard 3".
    package let what: String
    /// Kafka's reason, when one record's failure is known.
    package let cause: KafkaError?

    package init(_ what: String, cause: KafkaError? = nil) {
        self.what = what
        self.cause = cause
    }

    package var description: String { "\(what) were not delivered" + (cause.map { ": \($0)" } ?? "") }
}
