import Testing

@testable import PushfanMessages
@testable import PushfanStore

/// `pushfan audit`'s rules: a clean campaign passes with its duplicates counted, and each
/// kind of violation is found and named.
@Suite struct CampaignAuditTests {
    static func result(_ device: String, _ outcome: DeviceOutcome) -> DeviceResult {
        DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: device, outcome: outcome, attempts: outcome == .skipped ? 0 : 1, at: 1)
    }

    static let clean = CampaignAudit(
        campaign: "c", status: "completed",
        ledger: ["d1": .init(state: "delivered", attempts: 1), "d2": .init(state: "delivered", attempts: 2), "d3": .init(state: "skipped", attempts: 0)],
        results: ["d1": result("d1", .delivered), "d2": result("d2", .delivered), "d3": result("d3", .skipped)], resultRecords: 4,
        finalEvent: CampaignEvent(campaign: "c", app: "a", event: .completed, audience: 3, counts: ["delivered": 2, "skipped": 1], at: 2),
        accepted: ["d1": 1, "d2": 2])

    @Test func aCleanCampaignPassesWithItsDuplicatesCounted() {
        let report = Self.clean.check()
        #expect(report.violations.isEmpty, "\(report.violations)")
        #expect(report.devices == 3 && report.results == 3 && report.duplicateResults == 1 && report.apnsDuplicates == 1)
    }

    @Test("a device erased on request (its ledger row gone, its result and request recorded, its token now unknown) is no violation, erased after the final event or before it; the same gap without its tombstone is")
    func erasedDevicesStandInByTheirResults() {
        var audit = Self.clean
        audit.ledger["d2"] = nil
        audit.accepted = ["d1": 1, CampaignAudit.unmappedToken + "0a0b0c0d0e0f": 2]
        #expect(!audit.check().violations.isEmpty, "a ledger row missing without an erasure passed")
        // After the campaign: the completed event (at 2) counted it.
        audit.erased = ["d2": 5, "d-other": 1]
        var report = audit.check()
        #expect(report.violations.isEmpty, "\(report.violations)")
        #expect(report.devices == 2 && report.duplicateResults == 1)
        // While it ran: the event counts the ledger, which no longer has it.
        audit.erased["d2"] = 1
        audit.finalEvent?.counts = ["delivered": 1, "skipped": 1]
        audit.finalEvent?.audience = 2
        report = audit.check()
        #expect(report.violations.isEmpty, "\(report.violations)")
        audit.erased["d2"] = 5
        #expect(!audit.check().violations.isEmpty, "an event written before the erasure cannot have left the device out")
    }

    /// One broken promise each.
    enum Breakage: String, CaseIterable, Sendable {
        case stillClaimed, resultMissing, resultOfAStranger, contradiction, eventCountsOtherwise, eventMissesAudience, noFinalEvent
        case deliveredWithoutRequest, sentThoughNeverSent

        func apply(to audit: inout CampaignAudit) {
            switch self {
            case .stillClaimed: audit.ledger["d3"] = .init(state: "claimed", attempts: 0)
            case .resultMissing: audit.results["d2"] = nil
            case .resultOfAStranger: audit.results["d9"] = CampaignAuditTests.result("d9", .delivered)
            case .contradiction: audit.results["d1"] = CampaignAuditTests.result("d1", .failed)
            case .eventCountsOtherwise: audit.finalEvent?.counts = ["delivered": 3]
            case .eventMissesAudience: audit.finalEvent?.audience = 4
            case .noFinalEvent: audit.finalEvent = nil
            case .deliveredWithoutRequest: audit.accepted?["d1"] = nil
            case .sentThoughNeverSent: audit.accepted?["d3"] = 1
            }
        }

        var expected: String {
            switch self {
            case .stillClaimed: "1 devices still claimed in a completed campaign: d3"
            case .resultMissing: "1 devices final in the ledger without a result on the topic: d2"
            case .resultOfAStranger: "1 results for devices the ledger does not have: d9"
            case .contradiction: "1 results that contradict the ledger (outcome differs): d1"
            case .eventCountsOtherwise: "the completed event counts delivered 3, the ledger delivered 2, skipped 1"
            case .eventMissesAudience: "the completed event's counts add up to 3, its audience is 4"
            case .noFinalEvent: "no completed or cancelled event on the results topic"
            case .deliveredWithoutRequest: "1 devices delivered in the ledger without a request APNs accepted: d1"
            case .sentThoughNeverSent: "1 devices APNs accepted although their outcome says they were never sent: d3"
            }
        }
    }

    @Test("each broken promise is a violation that names its devices", arguments: Breakage.allCases)
    func violations(_ breakage: Breakage) {
        var audit = Self.clean
        breakage.apply(to: &audit)
        let report = audit.check()
        #expect(report.violations.contains(breakage.expected), "\(report.violations)")
    }
}
