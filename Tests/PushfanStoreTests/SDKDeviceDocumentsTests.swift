import Foundation
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

@testable import PushfanStore

/// Whether an app has SDK devices, the question every message and campaign asks: answered
/// from memory after the first read, and still right when devices come and go.
@Suite(.timeLimit(.minutes(2)))
struct SDKDeviceDocumentsTests {
    @Test("an app's first SDK device counts at once in the process that stored it and within a second in another; deleting it counts at once", arguments: Backend.enabled)
    func anyFollowsRegistrations(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        // Two processes on one clock the test moves: remembered answers age without waiting.
        let clock = ManualClock()
        let here = try await DeviceStore.open(url, logger: quietLogger, clock: clock)
        let elsewhere = try await DeviceStore.open(url, logger: quietLogger, clock: clock)
        try await here.addTestApp()
        #expect(try await !here.sdkDevices.any(app: "shop-ios"))
        #expect(try await !elsewhere.sdkDevices.any(app: "shop-ios"))

        try await here.sdkDevices.put(app: "shop-ios", deviceID: "d1", document: "{}", now: here.clock.wallMillis)
        #expect(try await here.sdkDevices.any(app: "shop-ios"))
        // The other process's remembered "no" lasts a second, no longer.
        clock.advance(by: .milliseconds(999))
        #expect(try await !elsewhere.sdkDevices.any(app: "shop-ios"), "a no is remembered for a second")
        clock.advance(by: .milliseconds(1))
        #expect(try await elsewhere.sdkDevices.any(app: "shop-ios"), "another process did not see the app's first SDK device after a second")

        #expect(try await here.sdkDevices.delete(app: "shop-ios", deviceID: "d1"))
        #expect(try await !here.sdkDevices.any(app: "shop-ios"))
        #expect(try await !here.sdkDevices.any(app: "other-app"))
    }
}
