import Testing
@testable import PushfanKafka

@Suite struct DevClusterCommandTests {
    @Test(arguments: [
        ("broker down 2", DevClusterCommand.brokerDown(2)),
        ("broker up 1", .brokerUp(1)),
        ("rtt 3 250", .roundTripDelay(broker: 3, milliseconds: 250)),
        ("errors Produce 5 not_leader_for_partition", .requestErrors(api: .produce, count: 5, error: "NOT_LEADER_FOR_PARTITION")),
        ("clear-errors fetch", .clearRequestErrors(api: .fetch)),
        ("leader pushfan.tasks 0 2", .leader(topic: "pushfan.tasks", partition: 0, broker: 2)),
        ("topic extra 8", .createTopic(name: "extra", partitions: 8)),
    ])
    func parsesCommands(line: String, expected: DevClusterCommand) throws {
        #expect(try DevClusterCommand.parse(line) == expected)
    }

    @Test(arguments: [
        ("", "empty command"),
        ("reboot", "unknown command 'reboot'"),
        ("broker sideways 1", "expected 'broker down <id>'"),
        ("broker down", "needs 2 arguments"),
        ("rtt 1 soon", "delay must be a number"),
        ("rtt 1 -5", "must not be negative"),
        ("errors Teleport 1 X", "unknown API"),
        ("errors Produce 0 REQUEST_TIMED_OUT", "count must be"),
        ("topic t 0", "partitions must be positive"),
    ])
    func rejectsBadCommandsWithAReason(line: String, message: String) {
        #expect {
            try DevClusterCommand.parse(line)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test func knowsLibrdkafkaErrorNames() {
        #expect(KafkaDevCluster.errorCode(named: "NOT_LEADER_FOR_PARTITION") != nil)
        #expect(KafkaDevCluster.errorCode(named: "request_timed_out") != nil)
        #expect(KafkaDevCluster.errorCode(named: "NO_SUCH_ERROR") == nil)
    }
}
