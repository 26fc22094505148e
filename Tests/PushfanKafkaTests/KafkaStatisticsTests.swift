import Foundation
import Testing
@testable import PushfanKafka

/// Reading consumer lag out of librdkafka's statistics JSON.
@Suite struct KafkaStatisticsTests {
    @Test("lag per topic and partition; unknown lag (-1), the internal partition and malformed JSON are left out")
    func consumerLag() {
        let json = """
            {"name":"rdkafka#consumer-1","type":"consumer","topics":{
              "pushfan.tasks":{"topic":"pushfan.tasks","partitions":{
                "0":{"partition":0,"consumer_lag":12},"1":{"partition":1,"consumer_lag":-1},"-1":{"partition":-1,"consumer_lag":-1}}},
              "pushfan.campaigns":{"partitions":{"3":{"partition":3,"consumer_lag":0}}}}}
            """
        #expect(KafkaStatistics.consumerLag(Data(json.utf8)) == ["pushfan.tasks": [0: 12], "pushfan.campaigns": [3: 0]])
        #expect(KafkaStatistics.consumerLag(Data("{not json".utf8)).isEmpty)
        #expect(KafkaStatistics.consumerLag(Data(#"{"topics":[]}"#.utf8)).isEmpty)
    }
}
