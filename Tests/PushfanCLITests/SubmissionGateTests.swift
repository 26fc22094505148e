import PushfanMessages
import Testing

@testable import PushfanCLI

/// `submit --wait` follows its own submission: an earlier campaign's events under the same
/// id are passed over until the planner's answer, and a reader whose answer was dropped by
/// the topic's retention (its offsets jump) still follows the campaign instead of waiting
/// forever.
@Suite struct SubmissionGateTests {
    static let mine = CampaignEvent.Submission(partition: 0, offset: 42)
    static func event(_ kind: CampaignEvent.Event, answering submission: CampaignEvent.Submission? = nil) -> CampaignEvent {
        CampaignEvent(campaign: "c1", app: "shop", event: kind, submission: submission, at: 1)
    }

    @Test func passesOverAnEarlierRunUntilTheAnswer() {
        var gate = SubmissionGate(submission: Self.mine, since: 1_000)
        gate.saw(partition: 3, offset: 10, timestamp: 500)
        let admitted1 = gate.admits(Self.event(.completed), partition: 3)
        #expect(!admitted1, "an earlier run's completion ended the wait")
        gate.saw(partition: 3, offset: 11, timestamp: 500)
        let admitted2 = gate.admits(Self.event(.accepted, answering: .init(partition: 0, offset: 7)), partition: 3)
        #expect(!admitted2)
        gate.saw(partition: 3, offset: 12, timestamp: 500)
        let admitted3 = gate.admits(Self.event(.accepted, answering: Self.mine), partition: 3)
        #expect(admitted3)
        gate.saw(partition: 3, offset: 13, timestamp: 500)
        let admitted4 = gate.admits(Self.event(.progress), partition: 3)
        #expect(admitted4)
        gate.saw(partition: 3, offset: 14, timestamp: 500)
        let admitted5 = gate.admits(Self.event(.accepted, answering: .init(partition: 1, offset: 8)), partition: 3)
        #expect(!admitted5, "another record's answer")
    }

    @Test func followsTheCampaignWhenRetentionDroppedTheAnswer() {
        var gate = SubmissionGate(submission: Self.mine, since: 1_000)
        gate.saw(partition: 3, offset: 10, timestamp: 500)
        gate.saw(partition: 5, offset: 100, timestamp: 500)
        // Partition 5 jumped: records were dropped there, not on 3.
        gate.saw(partition: 5, offset: 900, timestamp: 500)
        gate.saw(partition: 3, offset: 11, timestamp: 500)
        let admitted6 = gate.admits(Self.event(.completed), partition: 3)
        #expect(!admitted6)
        gate.saw(partition: 3, offset: 5_000, timestamp: 500)
        let admitted7 = gate.admits(Self.event(.progress), partition: 3)
        #expect(admitted7)
        #expect(gate.answered)
    }

    @Test("a partition whose first record is newer than the submission lost what came before it, maybe the answer")
    func followsTheCampaignWhenRetentionDroppedTheStart() {
        var gate = SubmissionGate(submission: Self.mine, since: 1_000)
        // Older than the submission: nothing of ours can have gone before it.
        gate.saw(partition: 2, offset: 700, timestamp: 900)
        let old = gate.admits(Self.event(.completed), partition: 2)
        #expect(!old, "an earlier run's completion")
        // The first record read on partition 4 is newer: the answer may have been dropped.
        gate.saw(partition: 4, offset: 157_502, timestamp: 1_200)
        let admitted = gate.admits(Self.event(.completed), partition: 4)
        #expect(admitted && gate.answered)
    }
}
