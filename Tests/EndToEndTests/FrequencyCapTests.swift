import Foundation
import PushfanCore
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
        try await Task.sleep(for: .seconds(11))  // the workers' catalog refresh
        try await pipeline.submit(Pipeline.campaign("cap-5", app: "cap"))
        #expect(try await pipeline.results(of: "cap-5").completed?.count(of: .delivered) == devices)
        let refused = try await CommandLineTool.run(TestBinaries.pushfan, ["apps", "set-caps", "--database", pipeline.database, "--app", "cap", "--caps", "2/1w"])
        #expect(refused.status != 0 && refused.error.contains("--caps: window \"1w\" has unit \"w\"; use m, h or d"), "\(refused.error)")
    }
}
