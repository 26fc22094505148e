// swift-tools-version:6.0
import PackageDescription

// Strict concurrency is the Swift 6 language mode default; CI adds -warnings-as-errors.
let package = Package(
    name: "pushfan",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushfan", targets: ["pushfan"]),
    ],
    targets: [
        // Thin C shims: one per library, each imported privately by exactly one Swift module.
        .systemLibrary(name: "CRdkafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLibpq", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        // Linux epoll and eventfd (not exported by Swift's Glibc module), for the simulator's event loop.
        .systemLibrary(name: "CEpoll"),

        // What every module shares: configuration, logging, metrics, the clock, locks, JSON values.
        .target(name: "PushfanSupport"),
        // The segment language: parser, expression tree, reference evaluator (its SQL is the store's).
        .target(name: "PushfanSegments", dependencies: ["PushfanSupport"]),
        // Personalised texts' placeholder language.
        .target(name: "PushfanTemplates", dependencies: ["PushfanSupport"]),
        // The APNs model: tokens, payloads, requests and their rules, reasons and outcomes,
        // retry policy, provider tokens. What the sender and the simulator share.
        .target(name: "PushfanAPNsModel", dependencies: ["PushfanSupport"]),
        // Local time, quiet hours and frequency caps as pure rules.
        .target(name: "PushfanSchedule", dependencies: ["PushfanSupport"]),
        // Pure domain: the topic messages and the campaign they carry, the campaign lifecycle.
        // No C, no I/O beyond stderr.
        .target(name: "PushfanMessages", dependencies: ["PushfanSupport", "PushfanSegments", "PushfanTemplates", "PushfanAPNsModel", "PushfanSchedule"]),
        // Kafka producer, consumer group and development cluster over librdkafka.
        .target(name: "PushfanKafka", dependencies: ["PushfanSupport", "PushfanMessages", "CRdkafka"]),
        // Hashing, randomness, ES256 keys and signatures (and TLS for the simulator) over OpenSSL.
        .target(name: "PushfanCrypto", dependencies: ["COpenSSL"]),
        // Device store: SQLite and PostgreSQL behind one interface, segments, expansion, ledger.
        .target(name: "PushfanStore", dependencies: ["PushfanSupport", "PushfanSegments", "PushfanTemplates", "PushfanMessages", "PushfanSchedule", "PushfanAPNsModel", "PushfanCrypto", "CSQLite", "CLibpq"]),
        // HTTP/2 sessions over nghttp2, client or server, over any byte channel: the only
        // importer of CNghttp2, shared by the sender and the simulator.
        .target(name: "PushfanHTTP2", dependencies: ["CNghttp2"]),
        // APNs sender: connections made and carried by libcurl (connect-only), HTTP/2 from
        // PushfanHTTP2; token and certificate auth.
        .target(name: "PushfanAPNs", dependencies: ["PushfanSupport", "PushfanAPNsModel", "PushfanCrypto", "PushfanHTTP2", "CCurl"]),
        // The APNs simulator: an HTTP/2 server (PushfanHTTP2, TLS from PushfanCrypto) that behaves like APNs.
        .target(name: "PushfanAPNsSim", dependencies: ["PushfanSupport", "PushfanAPNsModel", "PushfanCrypto", "PushfanHTTP2", "CEpoll"]),
        // What a worker and the API both produce: results, campaign events with the store's
        // counts, dead letters, engagement events, operators' commands.
        .target(name: "PushfanTopics", dependencies: ["PushfanSupport", "PushfanMessages", "PushfanKafka", "PushfanStore", "PushfanCrypto"]),
        // The pipeline: planner, sender and events roles of `pushfan worker`.
        .target(name: "PushfanWorker", dependencies: ["PushfanSupport", "PushfanSegments", "PushfanMessages", "PushfanSchedule", "PushfanAPNsModel", "PushfanKafka", "PushfanStore", "PushfanTopics", "PushfanAPNs", "PushfanCrypto"]),
        // `pushfan api`: the HTTP API (its HTTP/1.1 server on epoll, router, routes), with
        // docs/openapi.json built in (`OpenAPIDocument.json`).
        .target(
            name: "PushfanAPI", dependencies: ["PushfanSupport", "PushfanSegments", "PushfanTemplates", "PushfanMessages", "PushfanSchedule", "PushfanAPNsModel", "PushfanKafka", "PushfanStore", "PushfanTopics", "PushfanAPNs", "CEpoll"],
            plugins: ["EmbedOpenAPIDocument"]),
        // A text file as a Swift string literal, at build time (the OpenAPI document's way into the binary).
        .executableTarget(name: "EmbedText"),
        .plugin(name: "EmbedOpenAPIDocument", capability: .buildTool(), dependencies: ["EmbedText"]),
        // Subcommands and argument parsing; the executable only dispatches into it.
        .target(name: "PushfanCLI", dependencies: ["PushfanSupport", "PushfanSegments", "PushfanMessages", "PushfanSchedule", "PushfanAPNsModel", "PushfanKafka", "PushfanStore", "PushfanAPNs", "PushfanAPNsSim", "PushfanCrypto", "PushfanTopics", "PushfanWorker", "PushfanAPI"]),
        .executableTarget(name: "pushfan", dependencies: ["PushfanCLI", "PushfanSupport"]),
        // Fuzz targets for every parser of outside bytes (`FuzzTarget`), and the executable
        // scripts/fuzz builds with libFuzzer (`-sanitize=fuzzer,address -DFUZZING`).
        .target(name: "PushfanFuzzing", dependencies: ["PushfanSegments", "PushfanTemplates", "PushfanMessages", "PushfanAPNsModel", "PushfanStore", "PushfanAPNsSim", "PushfanAPI", "PushfanSupport"]),
        .executableTarget(name: "pushfan-fuzz", dependencies: ["PushfanFuzzing"]),

        // `pushfan` with its wall clock shifted, for tests and benchmarks of moments hours away.
        .executableTarget(name: "pushfan-shifted-clock", dependencies: ["PushfanCLI", "PushfanSupport"], path: "Tests/ShiftedClock"),

        // Starting and stopping real processes (kafka-dev, simulators) for the suites below.
        .target(name: "PushfanTestSupport", dependencies: ["PushfanSupport", "PushfanKafka"], path: "Tests/PushfanTestSupport"),
        .target(name: "SegmentTestSupport", dependencies: ["PushfanSupport", "PushfanSegments", "PushfanTestSupport"], path: "Tests/SegmentTestSupport"),
        .testTarget(name: "PushfanMessagesTests", dependencies: ["PushfanSupport", "PushfanSegments", "PushfanTemplates", "PushfanMessages", "PushfanSchedule", "PushfanAPNsModel", "PushfanTestSupport", "SegmentTestSupport"]),
        .testTarget(name: "PushfanKafkaTests", dependencies: ["PushfanKafka", "PushfanSupport", "PushfanMessages", "PushfanTestSupport"]),
        .testTarget(name: "PushfanCLITests", dependencies: ["PushfanCLI", "PushfanMessages", "PushfanStore"]),
        .testTarget(name: "PushfanAPITests", dependencies: ["PushfanAPI", "PushfanSupport", "PushfanMessages", "PushfanSchedule", "PushfanStore", "PushfanKafka", "PushfanTopics", "PushfanTestSupport"]),
        .testTarget(name: "PushfanCryptoTests", dependencies: ["PushfanCrypto", "PushfanTestSupport"]),
        .testTarget(name: "PushfanAPNsTests", dependencies: ["PushfanAPNs", "PushfanSupport", "PushfanMessages", "PushfanAPNsModel", "PushfanCrypto", "PushfanTestSupport"]),
        .testTarget(name: "PushfanStoreTests", dependencies: ["PushfanStore", "PushfanSupport", "PushfanSegments", "PushfanMessages", "PushfanSchedule", "PushfanTestSupport", "SegmentTestSupport"]),
        .testTarget(name: "PushfanAPNsSimTests", dependencies: ["PushfanAPNsSim", "PushfanMessages", "PushfanAPNsModel", "PushfanCrypto", "PushfanTestSupport"]),
        .testTarget(name: "PushfanWorkerTests", dependencies: ["PushfanWorker", "PushfanTopics", "PushfanAPNs", "PushfanSupport", "PushfanSegments", "PushfanMessages", "PushfanAPNsModel", "PushfanSchedule", "PushfanStore", "PushfanKafka", "PushfanTestSupport"]),
        .testTarget(name: "PushfanFuzzingTests", dependencies: ["PushfanFuzzing"]),
        .testTarget(name: "EndToEndTests", dependencies: ["PushfanSupport", "PushfanMessages", "PushfanAPNsModel", "PushfanKafka", "PushfanTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
