import Foundation
import PushfanAPNsModel
import PushfanAPNsSim
import PushfanMessages
import Testing

@Suite("Device rules")
struct DeviceRulesTests {
    static let a = String(repeating: "a", count: 64)
    static let b = String(repeating: "b", count: 64)
    static let c = String(repeating: "c", count: 64)

    func parse(_ json: String) throws -> DeviceRules {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        return try DeviceRules.parse(object, source: "rules.json")
    }

    @Test("exact tokens, unregistered timestamps, prefixes, topics")
    func outcomes() throws {
        let rules = try parse("""
            {"tokens": {"\(Self.a)": "BadDeviceToken", "\(Self.b.uppercased())": {"topic": "com.example.app"},
                        "\(Self.c)": {"reason": "Gone", "status": 410}},
             "unregistered": {"dd\(String(repeating: "0", count: 62))": 1700000000000},
             "prefixes": {"ee": "ExpiredToken", "eeff": {"reason": "TooManyRequests"}, "12": {"reason": "Unregistered", "timestamp": 5}}}
            """)
        let now: Int64 = 1_800_000_000_000
        #expect(rules.outcome(token: Self.a, bundleID: "x", nowMillis: now) == SimRejection(.badDeviceToken))
        #expect(rules.outcome(token: Self.b, bundleID: "com.example.app", nowMillis: now) == nil)
        #expect(rules.outcome(token: Self.b, bundleID: "com.other", nowMillis: now) == SimRejection(.deviceTokenNotForTopic))
        #expect(rules.outcome(token: Self.c, bundleID: "x", nowMillis: now) == SimRejection(APNsReason(rawValue: "Gone"), status: 410, timestampMillis: now))
        #expect(rules.outcome(token: "dd" + String(repeating: "0", count: 62), bundleID: "x", nowMillis: now)
            == SimRejection(.unregistered, timestampMillis: 1_700_000_000_000))
        // ExpiredToken without a timestamp says "now"; the longest prefix wins.
        #expect(rules.outcome(token: "ee00" + String(repeating: "0", count: 60), bundleID: "x", nowMillis: now)
            == SimRejection(.expiredToken, timestampMillis: now))
        #expect(rules.outcome(token: "eeff" + String(repeating: "0", count: 60), bundleID: "x", nowMillis: now) == SimRejection(.tooManyRequests))
        #expect(rules.outcome(token: "12" + String(repeating: "0", count: 62), bundleID: "x", nowMillis: now)
            == SimRejection(.unregistered, timestampMillis: 5))
        #expect(rules.outcome(token: "99" + String(repeating: "0", count: 62), bundleID: "x", nowMillis: now) == nil)
    }

    @Test("mistakes in a rules file are named", arguments: [
        (#"{"devices": {}}"#, #"rules.json: unknown member "devices"; expected tokens, unregistered, prefixes"#),
        (#"{"tokens": {"xyz": "BadDeviceToken"}}"#, #"rules.json: tokens: "xyz" is not an even-length hex device token of 16 to 200 bytes"#),
        (#"{"prefixes": {"zz": "BadDeviceToken"}}"#, #"rules.json: prefixes: "zz" must be hex digits"#),
        (#"{"prefixes": {"aa": {"reason": "Nope"}}}"#, #"rules.json: prefixes[aa]: "Nope" is not one of Apple's reasons; give its "status" too"#),
        (#"{"prefixes": {"aa": {"status": 200, "reason": "X"}}}"#, #"rules.json: prefixes[aa]: "status" must be 400...599"#),
        (#"{"prefixes": {"aa": {}}}"#, #"rules.json: prefixes[aa] needs a "reason" or a "topic""#),
        (#"{"prefixes": {"aa": 5}}"#, #"rules.json: prefixes[aa] must be a reason string or an object with reason, status, timestamp, topic"#),
        (#"{"unregistered": {"aa": "yesterday"}}"#, #"rules.json: unregistered[aa…] must be a timestamp in ms since the epoch"#),
    ])
    func errors(_ json: String, _ message: String) throws {
        #expect(throws: SimConfigurationError(message)) { try parse(json) }
    }
}

@Suite("Faults")
struct FaultsTests {
    @Test("latency specs", arguments: [
        ("0", LatencyModel.none), ("5", .fixed(milliseconds: 5)), ("2.5", .fixed(milliseconds: 2.5)),
        ("5-20", .uniform(low: 5, high: 20)), ("exp:10", .exponential(mean: 10)), ("apns", .apns),
    ])
    func latency(_ spec: String, _ model: LatencyModel) throws {
        #expect(try LatencyModel(spec: spec) == model)
        #expect(try LatencyModel(spec: model.description) == model)
    }

    @Test("latency samples")
    func samples() {
        var random = FastRandom(seed: 7)
        #expect(LatencyModel.fixed(milliseconds: 7).sample(&random) == 7)
        let uniform = (0..<1_000).map { _ in LatencyModel.uniform(low: 10, high: 20).sample(&random) }
        #expect(uniform.allSatisfy { (10..<20).contains($0) })
        let exponential = (0..<100_000).map { _ in LatencyModel.exponential(mean: 10).sample(&random) }
        #expect(abs(exponential.reduce(0, +) / 100_000 - 10) < 0.2)
        #expect(LatencyModel.none.connectionFactor(&random) == 1)
    }

    /// The `apns` profile as documented: median 80 ms, p99 about 300 ms, 0.2 % of requests
    /// stalled 1-3 s, connections about 10 % apart. Seeded, so the figures are exact here.
    @Test("the apns profile's distribution")
    func apnsProfile() {
        var random = FastRandom(seed: 42)
        let count = 200_000
        let samples = (0..<count).map { _ in LatencyModel.apns.sample(&random) }.sorted()
        let median = samples[count / 2], p99 = samples[count * 99 / 100]
        #expect(abs(median - 80) < 2, "median \(median)")
        #expect((280...330).contains(p99), "p99 \(p99)")
        let stalls = samples.filter { $0 >= 1_000 }.count
        #expect((300...500).contains(stalls), "\(stalls) stalls of \(count)")
        #expect(samples.last! <= 3_000)
        let factors = (0..<10_000).map { _ in LatencyModel.apns.connectionFactor(&random) }.sorted()
        #expect(abs(factors[5_000] - 1) < 0.01 && factors[500] > 0.8 && factors[9_500] < 1.2, "\(factors[500]) \(factors[9_500])")
        // A slower connection's requests are slower by its factor.
        var a = FastRandom(seed: 9), b = FastRandom(seed: 9)
        let slow = (0..<1_000).map { _ in LatencyModel.apns.sample(&a, connectionFactor: 1.2) }.sorted()[500]
        let plain = (0..<1_000).map { _ in LatencyModel.apns.sample(&b) }.sorted()[500]
        #expect(abs(slow / plain - 1.2) < 0.01)
    }

    @Test("bad latency specs", arguments: ["", "fast", "20-5", "-5", "exp:", "1e9"])
    func badLatency(_ spec: String) {
        #expect(throws: SimConfigurationError.self) { try LatencyModel(spec: spec) }
    }

    @Test("control JSON changes only the members given")
    func apply() throws {
        var settings = FaultSettings()
        try settings.apply(json: ["p503": 0.25, "latency": "5-10", "goaway_after": 3, "start_at_one": false,
                                  "throttle_tokens": [String(repeating: "AB", count: 32)], "clock_offset_s": -30])
        #expect(settings.p503 == 0.25)
        #expect(settings.p500 == 0)
        #expect(settings.latency == .uniform(low: 5, high: 10))
        #expect(settings.goawayAfter == 3)
        #expect(!settings.startAtOne)
        #expect(settings.throttledTokens == [String(repeating: "ab", count: 32)])
        #expect(settings.clockOffsetSeconds == -30)
        try settings.apply(json: ["latency": 0, "max_concurrent_streams": 5])
        #expect(settings.latency == .none)
        #expect(settings.p503 == 0.25)
        #expect(settings.maxConcurrentStreams == 5)
    }

    @Test("bad control JSON is refused and changes nothing", arguments: [
        (#"{"p500": 1.5}"#, #""p500" must be a probability from 0 to 1"#),
        (#"{"p500": 0.5, "goaway_after": -1}"#, #""goaway_after" must be a whole number in 0...2147483647"#),
        (#"{"max_concurrent_streams": 0}"#, #""max_concurrent_streams" must be a whole number in 1...2147483647"#),
        (#"{"start_at_one": "yes"}"#, #""start_at_one" must be true or false"#),
        (#"{"throttle_tokens": ["xyz"]}"#, #""throttle_tokens": "xyz" is not a hex device token"#),
        (#"{"latency": [1]}"#, #""latency" must be like "5", "5-20", "exp:10" (milliseconds) or "apns""#),
        (#"{"p5OO": 1}"#, "unknown control member \"p5OO\"; known: p500, p503, p429, throttle_tokens, latency, goaway_after, refuse_fraction, drop_after, max_concurrent_streams, start_at_one, drop_to_one_after_rejection, clock_offset_s"),
    ])
    func badControl(_ json: String, _ message: String) throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        var settings = FaultSettings()
        #expect(throws: SimConfigurationError(message)) { try settings.apply(json: object) }
        #expect(settings == FaultSettings())
    }

    @Test("fault decisions from fixed draws")
    func decisions() {
        let token = String(repeating: "ab", count: 32)
        var settings = FaultSettings()
        #expect(FaultDecision.decide(settings, token: token, draws: (0, 0, 0)) == .proceed)
        settings.p500 = 0.1
        settings.p503 = 0.2
        #expect(FaultDecision.decide(settings, token: token, draws: (0, 0.05, 0.9)) == .reject(SimRejection(.internalServerError)))
        #expect(FaultDecision.decide(settings, token: token, draws: (0, 0.25, 0.9)) == .reject(SimRejection(.serviceUnavailable)))
        #expect(FaultDecision.decide(settings, token: token, draws: (0, 0.35, 0.9)) == .proceed)
        settings.refuseFraction = 0.5
        #expect(FaultDecision.decide(settings, token: token, draws: (0.4, 0.05, 0.9)) == .refuse)
        settings.throttledTokens = [token]
        #expect(FaultDecision.decide(settings, token: token, draws: (0.9, 0.9, 0.9)) == .reject(SimRejection(.tooManyRequests)))
        settings.throttledTokens = []
        settings.p429 = 0.3
        #expect(FaultDecision.decide(settings, token: token, draws: (0.9, 0.9, 0.2)) == .reject(SimRejection(.tooManyRequests)))
        #expect(SimRejection(.tooManyRequests).status == 429)
        #expect(SimRejection(.serviceUnavailable).status == 503)
    }
}

@Suite("Stats")
struct SimStatsTests {
    @Test("threads merge: distinct tokens, duplicates by token and collapse id, connections")
    func merge() {
        var first = ThreadStats(), second = ThreadStats()
        first.recordAccepted(token: "t1", topic: "a", pushType: .alert, collapseID: "c")
        first.recordAccepted(token: "t1", topic: "a", pushType: .alert, collapseID: nil)
        second.recordAccepted(token: "t1", topic: "a.voip", pushType: .voip, collapseID: "c")
        second.recordAccepted(token: "t2", topic: "a", pushType: .alert, collapseID: "c")
        second.recordRejected(SimRejection(.badDeviceToken))
        second.recordRefused()
        first.connectionsAccepted = 2
        first.connectionsClosed = 1
        let snapshot = SimStatsSnapshot(merging: [first, second], jwtChanges: ["T.K": 1])
        #expect(snapshot.requests == 6)
        #expect(snapshot.accepted == 4)
        #expect(snapshot.statuses == [200: 4, 400: 1])
        #expect(snapshot.reasons == ["BadDeviceToken": 1])
        #expect(snapshot.topics == ["a": 3, "a.voip": 1])
        #expect(snapshot.pushTypes == ["alert": 3, "voip": 1])
        #expect(snapshot.distinctTokensAccepted == 2)
        #expect(snapshot.duplicateAcceptances == 1)
        #expect(snapshot.refusedStreams == 1)
        #expect(snapshot.connectionsOpen == 1)
        let json = snapshot.jsonObject
        #expect(json["status"] as? [String: Int] == ["200": 4, "400": 1])
        #expect(json["jwt_changes"] as? [String: Int] == ["T.K": 1])
    }
}
