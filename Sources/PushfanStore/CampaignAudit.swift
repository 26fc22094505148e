import PushfanMessages

/// The check `pushfan audit` makes of one campaign, from three independent records of it:
/// the ledger (the store's one row per device), the results topic (read from its start, the
/// last record per key winning) and, optionally, the APNs side (requests the simulator
/// accepted, per device). A pure function of what was read, so every rule is a unit test.
///
/// Violations (any one fails the audit): a finished campaign with devices still claimed; a
/// final event whose counts are not the ledger's, or do not add up to its audience; a ledger
/// device without a result on the topic, a result for a device the ledger does not have, a
/// result that contradicts the ledger; with the APNs side, a device delivered without an
/// accepted request, or sent although its outcome says it never was. Duplicates (a result
/// written twice, a request accepted twice for one device) are counted, not failed: sends
/// are at least once, and crashes are allowed to cost a page per lane. A device erased on
/// request has no ledger row left; its result stands in for it (`erased`).
package struct CampaignAudit: Sendable {
    /// A device's final (or pending) state in the ledger.
    package struct LedgerFact: Sendable, Equatable {
        package var state: String
        package var attempts: Int

        package init(state: String, attempts: Int) { (self.state, self.attempts) = (state, attempts) }
    }

    package var campaign: String
    /// The store's status of the campaign (`completed`, `cancelled`, `running`...).
    package var status: String
    /// Device id → its ledger row.
    package var ledger: [String: LedgerFact]
    /// Device id → the last result on the topic.
    package var results: [String: DeviceResult]
    /// Device records on the topic, duplicates included.
    package var resultRecords: Int
    /// The campaign's last `completed` or `cancelled` event, if any.
    package var finalEvent: CampaignEvent?
    /// Device id → requests APNs (the simulator) accepted for it; nil without the log.
    package var accepted: [String: Int]?
    /// Devices of the app erased on request, with when (the tombstones on the topic): erasure
    /// took their ledger rows, so their results and requests are not held against the
    /// ledger. A final event written before the erasure counted them as their results say;
    /// one written after did not (it counts the ledger).
    package var erased: [String: Int64]

    /// Requests the APNs side names by a token no device of the store has now (an erased
    /// device's, among others), under this prefix and the token's start.
    package static let unmappedToken = "token:"

    package init(campaign: String, status: String, ledger: [String: LedgerFact], results: [String: DeviceResult], resultRecords: Int,
                 finalEvent: CampaignEvent?, accepted: [String: Int]? = nil, erased: [String: Int64] = [:]) {
        (self.campaign, self.status, self.ledger, self.results, self.resultRecords) = (campaign, status, ledger, results, resultRecords)
        (self.finalEvent, self.accepted, self.erased) = (finalEvent, accepted, erased)
    }

    package struct Report: Sendable, Equatable, Codable {
        package var campaign: String
        package var status: String
        package var devices: Int
        package var results: Int
        /// Result records beyond one per device.
        package var duplicateResults: Int
        /// Requests accepted beyond one per device (nil without the APNs side).
        package var apnsDuplicates: Int?
        package var violations: [String]

        private enum CodingKeys: String, CodingKey {
            case campaign, status, devices, results, duplicateResults = "duplicate_results", apnsDuplicates = "apns_duplicates", violations
        }
    }

    /// At most this many device ids are named per kind of violation.
    static let examples = 5

    package func check() -> Report {
        var violations: [String] = []
        func violation(devices: [String], _ what: String) {
            guard !devices.isEmpty else { return }
            let named = devices.sorted().prefix(Self.examples).joined(separator: ", ")
            violations.append("\(devices.count) \(what): \(named)\(devices.count > Self.examples ? ", …" : "")")
        }
        let finished = status == "completed" || status == "cancelled"
        if finished {
            violation(devices: ledger.filter { $0.value.state == "claimed" }.map(\.key), "devices still claimed in a \(status) campaign")
        }
        var ledgerCounts: [String: Int] = [:]
        for fact in ledger.values where fact.state != "claimed" { ledgerCounts[fact.state, default: 0] += 1 }
        let gone = results.filter { erased[$0.key] != nil && ledger[$0.key] == nil }
        let countedGone = gone.filter { device, _ in finalEvent.map { erased[device] ?? 0 >= $0.at } ?? false }
        for result in countedGone.values { ledgerCounts[result.outcome.rawValue, default: 0] += 1 }
        let results = results.filter { gone[$0.key] == nil }
        // An erased device's token maps to no device now: as many unmapped tokens as erased
        // devices with a result are taken for theirs.
        var accepted = accepted?.filter { erased[$0.key] == nil || ledger[$0.key] != nil }
        if let requests = accepted, !gone.isEmpty {
            let unmapped = requests.keys.filter { $0.hasPrefix(Self.unmappedToken) }.sorted().prefix(gone.count)
            accepted = requests.filter { !unmapped.contains($0.key) }
        }
        if let event = finalEvent {
            if event.counts.filter({ $0.value != 0 }) != ledgerCounts {
                let erasedNote = countedGone.isEmpty ? "" : " (with \(countedGone.count) erased devices as their results say)"
                violations.append("the \(event.event.rawValue) event counts \(Self.describe(event.counts)), the ledger\(erasedNote) \(Self.describe(ledgerCounts))")
            }
            let total = event.counts.values.reduce(0, +)
            if let audience = event.audience, audience != total {
                violations.append("the \(event.event.rawValue) event's counts add up to \(total), its audience is \(audience)")
            }
        } else if finished {
            violations.append("no completed or cancelled event on the results topic")
        }
        let finals = ledger.filter { $0.value.state != "claimed" }
        violation(devices: finals.keys.filter { results[$0] == nil }, "devices final in the ledger without a result on the topic")
        violation(devices: results.keys.filter { ledger[$0] == nil }, "results for devices the ledger does not have")
        violation(devices: results.compactMap { device, result in
            guard let fact = finals[device], fact.state != result.outcome.rawValue else { return nil }
            return device
        }, "results that contradict the ledger (outcome differs)")
        var apnsDuplicates: Int?
        if let accepted {
            apnsDuplicates = accepted.values.reduce(0) { $0 + max(0, $1 - 1) }
            violation(devices: finals.filter { $0.value.state == "delivered" && (accepted[$0.key] ?? 0) == 0 }.map(\.key),
                      "devices delivered in the ledger without a request APNs accepted")
            violation(devices: finals.filter { $0.value.attempts == 0 && (accepted[$0.key] ?? 0) > 0 }.map(\.key),
                      "devices APNs accepted although their outcome says they were never sent")
            violation(devices: accepted.keys.filter { ledger[$0] == nil }, "devices APNs accepted that the ledger does not have")
        }
        return Report(
            campaign: campaign, status: status, devices: ledger.count, results: results.count,
            duplicateResults: max(0, resultRecords - self.results.count), apnsDuplicates: apnsDuplicates, violations: violations)
    }

    static func describe(_ counts: [String: Int]) -> String {
        let shown = counts.filter { $0.value != 0 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        return shown.isEmpty ? "nothing" : shown.joined(separator: ", ")
    }
}
