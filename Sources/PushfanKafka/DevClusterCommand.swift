/// Kafka protocol API keys that fault injection can target.
package enum KafkaAPIKey: Int16, Sendable, CaseIterable {
    case produce = 0, fetch = 1, listOffsets = 2, metadata = 3, offsetCommit = 8, offsetFetch = 9
    case findCoordinator = 10, joinGroup = 11, heartbeat = 12, leaveGroup = 13, syncGroup = 14
    case initProducerID = 22

    package var name: String {
        switch self {
        case .produce: "Produce"
        case .fetch: "Fetch"
        case .listOffsets: "ListOffsets"
        case .metadata: "Metadata"
        case .offsetCommit: "OffsetCommit"
        case .offsetFetch: "OffsetFetch"
        case .findCoordinator: "FindCoordinator"
        case .joinGroup: "JoinGroup"
        case .heartbeat: "Heartbeat"
        case .leaveGroup: "LeaveGroup"
        case .syncGroup: "SyncGroup"
        case .initProducerID: "InitProducerId"
        }
    }

    package init?(name: String) {
        guard let key = KafkaAPIKey.allCases.first(where: { $0.name.lowercased() == name.lowercased() }) else { return nil }
        self = key
    }
}

/// One line of the dev cluster's control channel. Grammar (one command per line):
///
///     broker down <id>            take a broker off the network (connections refused)
///     broker up <id>
///     rtt <broker> <ms>           add round-trip delay to a broker's responses
///     errors <Api> <n> <ERROR>    fail the next n requests of an API with an error name
///     clear-errors <Api>
///     leader <topic> <partition> <broker>
///     topic <name> <partitions>   create a topic
package enum DevClusterCommand: Sendable, Equatable {
    case brokerDown(Int32)
    case brokerUp(Int32)
    case roundTripDelay(broker: Int32, milliseconds: Int)
    case requestErrors(api: KafkaAPIKey, count: Int, error: String)
    case clearRequestErrors(api: KafkaAPIKey)
    case leader(topic: String, partition: Int32, broker: Int32)
    case createTopic(name: String, partitions: Int)

    package static let usage = """
        broker down <id> | broker up <id> | rtt <broker> <ms> | errors <Api> <count> <ERROR_NAME> | \
        clear-errors <Api> | leader <topic> <partition> <broker> | topic <name> <partitions>
        """

    /// Parses one line; the error says what was wrong and shows the grammar.
    package static func parse(_ line: String) throws(DevClusterCommandError) -> DevClusterCommand {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        func int(_ index: Int, _ what: String) throws(DevClusterCommandError) -> Int {
            guard index < words.count, let value = Int(words[index]) else {
                throw DevClusterCommandError("\(what) must be a number in '\(line)'")
            }
            return value
        }
        func api(_ index: Int) throws(DevClusterCommandError) -> KafkaAPIKey {
            guard index < words.count, let key = KafkaAPIKey(name: words[index]) else {
                throw DevClusterCommandError("unknown API in '\(line)'; known: \(KafkaAPIKey.allCases.map(\.name).joined(separator: ", "))")
            }
            return key
        }
        func expect(_ count: Int) throws(DevClusterCommandError) {
            guard words.count == count else { throw DevClusterCommandError("'\(line)' needs \(count - 1) arguments; usage: \(usage)") }
        }
        switch words.first?.lowercased() {
        case "broker":
            try expect(3)
            let broker = Int32(clamping: try int(2, "broker id"))
            switch words[1].lowercased() {
            case "down": return .brokerDown(broker)
            case "up": return .brokerUp(broker)
            default: throw DevClusterCommandError("expected 'broker down <id>' or 'broker up <id>', got '\(line)'")
            }
        case "rtt":
            try expect(3)
            let milliseconds = try int(2, "delay")
            guard milliseconds >= 0 else { throw DevClusterCommandError("delay must not be negative in '\(line)'") }
            return .roundTripDelay(broker: Int32(clamping: try int(1, "broker id")), milliseconds: milliseconds)
        case "errors":
            try expect(4)
            let count = try int(2, "count")
            guard (1...100_000).contains(count) else { throw DevClusterCommandError("count must be 1...100000 in '\(line)'") }
            return .requestErrors(api: try api(1), count: count, error: words[3].uppercased())
        case "clear-errors":
            try expect(2)
            return .clearRequestErrors(api: try api(1))
        case "leader":
            try expect(4)
            return .leader(topic: words[1], partition: Int32(clamping: try int(2, "partition")), broker: Int32(clamping: try int(3, "broker id")))
        case "topic":
            try expect(3)
            let partitions = try int(2, "partitions")
            guard partitions > 0 else { throw DevClusterCommandError("partitions must be positive in '\(line)'") }
            return .createTopic(name: words[1], partitions: partitions)
        case nil:
            throw DevClusterCommandError("empty command; usage: \(usage)")
        default:
            throw DevClusterCommandError("unknown command '\(words[0])'; usage: \(usage)")
        }
    }
}

package struct DevClusterCommandError: Error, CustomStringConvertible, Equatable {
    package let description: String
    init(_ description: String) { self.description = description }
}
