import Foundation

/// What Pushfan reads from librdkafka's statistics JSON (`statistics.interval.ms`).
enum KafkaStatistics {
    /// Consumer lag per topic and partition, for partitions whose lag librdkafka knows
    /// (assigned and fetched; -1 otherwise, left out). Malformed JSON gives nothing.
    static func consumerLag(_ json: Data) -> [String: [Int32: Int64]] {
        guard let root = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
              let topics = root["topics"] as? [String: Any]
        else { return [:] }
        var lag: [String: [Int32: Int64]] = [:]
        for (topic, value) in topics {
            guard let partitions = (value as? [String: Any])?["partitions"] as? [String: Any] else { continue }
            for (key, partition) in partitions {
                guard let number = Int32(key), number >= 0, let fields = partition as? [String: Any],
                      let value = (fields["consumer_lag"] as? NSNumber)?.int64Value, value >= 0
                else { continue }
                lag[topic, default: [:]][number] = value
            }
        }
        return lag
    }
}
