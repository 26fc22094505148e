import Foundation
import PushfanKafka
import PushfanMessages
import PushfanSupport
import Synchronization

/// Options shared by commands that talk to Kafka.
enum KafkaOptions {
    static let specs: [OptionSpec] = [
        .option("brokers", "HOST:PORT,...", "bootstrap servers (default: $PUSHFAN_KAFKA_BROKERS or the config file)"),
        .option("property", "KEY=VALUE", "a librdkafka property, passed through unchanged", repeatable: true),
    ]

    static func client(_ arguments: ParsedArguments, _ context: CommandContext) throws(UsageError) -> KafkaClientConfiguration {
        var properties = context.configuration.kafka.properties
        for pair in arguments.values("property") {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw UsageError("--property must look like key=value, got '\(pair)'")
            }
            properties[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        return KafkaClientConfiguration(bootstrapServers: arguments.value("brokers") ?? context.configuration.kafka.brokers, properties: properties)
    }
}

/// `pushfan produce`: one record per input line, like `kcat -P`.
struct ProduceCommand: Command {
    static let spec = CommandSpec(
        name: "produce",
        summary: "Produce one record per line of standard input (or --file) to a topic",
        discussion: """
            Waits when the local queue is full and reports every record that could not be
            delivered; exits 1 if any failed. A summary goes to standard error.
            """,
        options: [
            .option("topic", "TOPIC", "topic to write to (required)"),
            .option("file", "FILE", "read lines from FILE instead of standard input"),
            .option("key", "KEY", "the same key for every record"),
            .option("key-delimiter", "C", "split each line at the first C into key and value"),
            .option("partition", "N", "write to this partition instead of partitioning by key"),
        ] + KafkaOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let topic = try arguments.required("topic")
        let fixedKey = arguments.value("key").map { Array($0.utf8) }
        let delimiter = try arguments.value("key-delimiter").map { text throws(UsageError) -> UInt8 in
            guard text.utf8.count == 1 else { throw UsageError("--key-delimiter must be one byte") }
            return text.utf8.first!
        }
        let partition = try arguments.value("partition") == nil ? nil : Int32(arguments.int("partition", default: 0, range: 0...100_000))
        var descriptor: Int32 = 0
        if let file = arguments.value("file") {
            descriptor = open(file, O_RDONLY)
            guard descriptor >= 0 else { throw UsageError("cannot open \(file): \(String(cString: strerror(errno)))") }
        }
        defer { if descriptor > 0 { close(descriptor) } }

        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: KafkaOptions.client(arguments, context)), logger: context.logger)
        var reader = LineReader(descriptor: descriptor)
        var tickets: [DeliveryTicket] = []
        var batch = ProducerBatch(topic: topic, partition: partition, capacity: 10_000, bytesPerRecord: 256)
        var total = 0, delivered = 0
        var failures: [String] = []
        func settle(_ ticket: DeliveryTicket) async {
            let result = await ticket.delivery()
            delivered += result.delivered
            failures.append(contentsOf: result.failures.prefix(10).map { "\($0.error)" })
        }
        var tooLong = 0
        while reader.next({ input in
            guard case .text(let line) = input else {
                tooLong += 1
                return
            }
            if let delimiter, let split = line.firstIndex(of: delimiter) {
                batch.append(key: UnsafeRawBufferPointer(rebasing: line[..<split]), value: UnsafeRawBufferPointer(rebasing: line[(split + 1)...]))
            } else if let fixedKey {
                fixedKey.withUnsafeBytes { batch.append(key: $0, value: line) }
            } else {
                batch.append(key: nil, value: line)
            }
        }) {
            total += 1
            if batch.count == 10_000 {
                tickets.append(try await producer.enqueue(batch))
                batch.removeAll()
                // Keep a bounded number of batches in flight.
                if tickets.count > 8 { await settle(tickets.removeFirst()) }
            }
        }
        if !batch.isEmpty { tickets.append(try await producer.enqueue(batch)) }
        for ticket in tickets { await settle(ticket) }
        await producer.close()
        printError("produced \(delivered) of \(total) records to \(topic)")
        if tooLong > 0 { printError("  not produced: \(tooLong) lines longer than \(reader.maxLineBytes) bytes") }
        for failure in failures.prefix(10) { printError("  failed: \(failure)") }
        return delivered == total ? 0 : 1
    }
}

/// `pushfan consume`: prints records of a topic as a consumer-group member, like `kcat -C`/`-G`.
struct ConsumeCommand: Command {
    static let spec = CommandSpec(
        name: "consume",
        summary: "Print records of topics as a member of a consumer group",
        discussion: """
            Offsets are stored only after a record was written to standard output, and committed
            every second and on exit, so a restarted member continues after the last printed record.
            Formats: value (the value, one per line), json (topic, partition, offset, key, value).
            """,
        options: [
            .option("topic", "TOPIC", "topic to read (required)", repeatable: true),
            .option("group", "GROUP", "consumer group (default: pushfan-consume)"),
            .option("count", "N", "exit after N records"),
            .option("idle-exit", "SECONDS", "exit after this long without a record"),
            .option("format", "FORMAT", "value or json (default: value)"),
            .option("from", "WHERE", "earliest or latest: where a group without offsets starts (default earliest)"),
        ] + KafkaOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let topics = arguments.values("topic")
        guard !topics.isEmpty else { throw UsageError("--topic is required") }
        let limit = try arguments.int("count", default: Int.max, range: 1...Int.max)
        let idle = try arguments.double("idle-exit", default: 0, range: 0...86_400)
        let json: Bool
        switch arguments.value("format") ?? "value" {
        case "value": json = false
        case "json": json = true
        case let other: throw UsageError("--format must be value or json, got '\(other)'")
        }
        var configuration = KafkaConsumerConfiguration(client: try KafkaOptions.client(arguments, context), groupID: arguments.value("group") ?? "pushfan-consume")
        switch arguments.value("from") ?? "earliest" {
        case "earliest": configuration.offsetReset = .earliest
        case "latest": configuration.offsetReset = .latest
        case let other: throw UsageError("--from must be earliest or latest, got '\(other)'")
        }
        let consumer = try KafkaConsumer(configuration: configuration, logger: context.logger)
        try consumer.subscribe(topics: topics)
        let activity = ActivityClock()
        // Closing the consumer ends the event stream below; it is idempotent.
        ShutdownSignal.install { _ in Task { await consumer.close() } }
        let idleWatch = Task {
            guard idle > 0 else { return }
            while !Task.isCancelled, activity.secondsSinceLast() < idle {
                try? await Task.sleep(for: .milliseconds(100))
            }
            if !Task.isCancelled { await consumer.close() }
        }
        var printed = 0
        var output = OutputBuffer()
        var status: Int32 = 0
        loop: for await event in consumer.events {
            switch event {
            case .records(let records):
                activity.touch()
                let take = records.prefix(limit - printed)
                for index in take.indices {
                    if json {
                        output.append(jsonLine(take[index]))
                    } else {
                        take[index].withValueBytes { output.append($0) }
                        output.append(UInt8(ascii: "\n"))
                    }
                }
                guard output.flush() else { break loop }
                try consumer.storeOffsets(take)
                printed += take.count
                if printed >= limit { break loop }
            case .assigned, .revoked:
                activity.touch()
            case .error(let error):
                printError("pushfan consume: \(error)")
                if error.isFatal {
                    status = 1
                    break loop
                }
            }
        }
        idleWatch.cancel()
        await consumer.close()
        return status
    }

    private static func jsonLine(_ record: KafkaRecord) -> String {
        struct Line: Encodable {
            let topic: String, partition: Int32, offset: Int64, key: String?, value: String, timestamp: Int64?
        }
        let line = Line(
            topic: record.topic, partition: record.partition, offset: record.offset, key: record.keyString,
            value: String(decoding: record.value, as: UTF8.self), timestamp: record.timestamp)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return ((try? String(decoding: encoder.encode(line), as: UTF8.self)) ?? "{}") + "\n"
    }
}

/// When something last happened, readable from any thread.
final class ActivityClock: Sendable {
    private let last = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)
    func touch() { last.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed) }
    func secondsSinceLast() -> Double { Double(DispatchTime.now().uptimeNanoseconds - last.load(ordering: .relaxed)) / 1e9 }
}
