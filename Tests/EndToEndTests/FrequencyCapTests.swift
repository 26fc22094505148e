import Foundation
import PushfanMessages
import PushfanTestSupport
import Testing

/// Frequency caps through the whole stack: three campaigns at once on three workers under
/// "2 per day", a transactional campaign that bypasses the caps, and the caps set through
/// the CLI.
@Suite(.serialized, .timeLimit(.minutes(4))) struct FrequencyCapPipelineTests {
    /// A zone where it is about noon now, so that no local midnight falls inside the test.
    static var noonZone: String {
        let hour = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(secondsFromGMT: 0)!, from: Date()).hour ?? 0
        var offset = 12 - hour
        if offset > 14 { offset -= 24 }
        // Etc/GMT names count the other way: Etc/GMT-3 is three hours ahead of UTC.
        return offset >= 0 ? "Etc/GMT-\(offset)" : "Etc/GMT+\(-offset)"
    }

    @Test("under 2 per day, each device of three simultaneous campaigns receives two and one ends frequency_cap; a transactional send goes to all")
    func twoPerDayAcrossWorkers() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let devices = 300
        let zone = Self.noonZone
        try await pipeline.addApp("cap", topic: "com.example.cap", rate: 3_000, devices: devices, appArguments: ["--frequency-caps", "2/1d"],
                                  fields: { _ in #""timezone":"\#(zone)""# })
        let shown = try await pipeline.run(["apps", "show", "--database", pipeline.database, "--app", "cap"])
        #expect(shown.output.contains("caps         2/1d"), "\(shown.output)")
        for worker in ["w1", "w2", "w3"] { try pipeline.startWorker(worker) }
        for campaign in ["cap-1", "cap-2", "cap-3"] {
            try await pipeline.submit(Pipeline.campaign(campaign, app: "cap"))
        }
        var perDevice: [String: [DeviceOutcome]] = [:]
        var reasons: [String: Int] = [:]
        for campaign in ["cap-1", "cap-2", "cap-3"] {
            let results = try await pipeline.results(of: campaign)
            #expect(results.completed?.finished == devices)
            for (device, result) in results.devices {
                perDevice[device, default: []].append(result.outcome)
                if result.outcome == .skipped { reasons[result.reason ?? "", default: 0] += 1 }
            }
        }
        #expect(perDevice.count == devices)
        let wrong = perDevice.filter { $0.value.filter { $0 == .delivered }.count != 2 || $0.value.filter { $0 == .skipped }.count != 1 }
        #expect(wrong.isEmpty, "every device: two delivered, one skipped; not so: \(wrong.prefix(5))")
        #expect(reasons == [Campaign.frequencyCapReason: devices], "\(reasons)")
        let received = Dictionary(grouping: pipeline.delivered(topic: "com.example.cap"), by: { $0["token"] as? String ?? "" }).mapValues(\.count)
        #expect(received.count == devices && received.values.allSatisfy { $0 == 2 }, "APNs saw two pushes per device: \(Set(received.values))")

        // Transactional: not held back (and not counted); an ordinary fourth one is.
        try await pipeline.submit(Pipeline.campaign("cap-receipt", app: "cap", options: #"{"ignore_frequency_caps":true}"#))
        #expect(try await pipeline.results(of: "cap-receipt").completed?.count(of: .delivered) == devices)
        try await pipeline.submit(Pipeline.campaign("cap-4", app: "cap"))
        let fourth = try await pipeline.results(of: "cap-4")
        #expect(fourth.completed?.count(of: .skipped) == devices)

        // Caps removed: the next campaign reaches everyone again.
        let set = try await pipeline.run(["apps", "set-caps", "--database", pipeline.database, "--app", "cap", "--caps", "none"])
        #expect(set.output.contains("frequency caps none"))
        try await pipeline.submit(Pipeline.campaign("cap-5", app: "cap"))
        #expect(try await pipeline.results(of: "cap-5").completed?.count(of: .delivered) == devices)
        let refused = try await CommandLineTool.run(TestBinaries.pushfan, ["apps", "set-caps", "--database", pipeline.database, "--app", "cap", "--caps", "2/1w"])
        #expect(refused.status != 0 && refused.error.contains("--caps: window \"1w\" has unit \"w\"; use m, h or d"), "\(refused.error)")
    }

    @Test("counted per user under 1 per hour: each user of three devices receives one campaign push on one device, the others end frequency_cap; a device without a user counts alone; a transactional message reaches all three")
    func perUser() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        // 30 users of three devices each, and 10 devices without a user.
        try await pipeline.addApp("fam", topic: "com.example.fam", rate: 3_000, devices: 100, fields: { index in
            index < 90 ? #""attributes":{"user_id":"u\#(index / 3)"}"# : nil
        })
        let set = try await pipeline.run(["apps", "set-caps", "--database", pipeline.database, "--app", "fam", "--caps", "1/1h", "--per", "user"])
        #expect(set.output.contains("frequency caps user:1/1h"), "\(set.output)")
        let shown = try await pipeline.run(["apps", "show", "--database", pipeline.database, "--app", "fam"])
        #expect(shown.output.contains("caps         1/1h (alert pushes per user, across its devices)"), "\(shown.output)")
        try pipeline.startWorker("w1")
        try pipeline.startWorker("w2")
        try await pipeline.submit(Pipeline.campaign("fam-1", app: "fam"))
        let first = try await pipeline.results(of: "fam-1")
        #expect(first.completed?.finished == 100)
        for user in 0..<30 {
            let outcomes = (0..<3).map { first.devices["fam-\(user * 3 + $0)"] }
            let delivered = outcomes.filter { $0?.outcome == .delivered }.count
            let capped = outcomes.filter { $0?.outcome == .skipped && $0?.reason == Campaign.frequencyCapReason }.count
            #expect(delivered == 1 && capped == 2, "user u\(user): \(outcomes.map { "\($0?.outcome.rawValue ?? "none")/\($0?.reason ?? "")" })")
        }
        #expect((90..<100).allSatisfy { first.devices["fam-\($0)"]?.outcome == .delivered }, "devices without a user count alone")
        #expect(pipeline.delivered(topic: "com.example.fam").count == 40, "APNs saw one push per user and one per userless device")

        // A transactional send is exempt: all three of a user's devices get it.
        try await pipeline.submit(Pipeline.campaign("fam-receipt", app: "fam", audience: #"{"devices":["fam-0","fam-1","fam-2"]}"#, options: #"{"ignore_frequency_caps":true}"#))
        #expect(try await pipeline.results(of: "fam-receipt").completed?.count(of: .delivered) == 3)
        // Within the hour nobody gets another campaign push.
        try await pipeline.submit(Pipeline.campaign("fam-2", app: "fam"))
        let second = try await pipeline.results(of: "fam-2")
        #expect(second.completed?.count(of: .skipped) == 100)
    }
}
