import Foundation
import PushfanCore
import PushfanStore
import PushfanTestSupport
import Testing

@testable import PushfanWorker

/// The planner's later steps, in the test's own process (`PlanningCoreHarness`). The process
/// suites (EndToEndTests) check the whole planner through real workers.
@Suite(.timeLimit(.minutes(2)))
struct PlanningCoreTests {
    static let key = CampaignKey(app: "shop", id: "c1")

    @Test("a parked campaign dispatched after its saved segment was edited: counted and sharded with the expression it was accepted with")
    func dispatchReadsTheSegmentAsAccepted() async throws {
        let harness = try await PlanningCoreHarness(devices: 30)
        do {
            try await harness.store.audience.saveSegment(app: "shop", name: "english", expression: "locale in (en_US)")
            let sendAt = harness.clock.wallMillis + 3_600_000
            let json = #"{"v":1,"id":"c1","app":"shop","audience":{"named":"english"},"notification":{"content":{"default":{"body":"Hi"}}},"options":{"send_at":\#(sendAt)}}"#
            let row = try await harness.parked(json, audience: 22, sendAt: sendAt)
            try await harness.store.audience.saveSegment(app: "shop", name: "english", expression: "locale in (xx_XX)")
            try await harness.planner.dispatch(row)
            let dispatched = try #require(try await harness.store.campaigns.get(Self.key))
            #expect(dispatched.audience == 22, "counted with the edited segment, not the one it was accepted with")
            #expect(dispatched.shards > 0 && dispatched.status != .scheduled)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }
}
