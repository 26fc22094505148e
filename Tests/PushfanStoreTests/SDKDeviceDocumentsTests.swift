import Foundation
import PushfanCore
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
        let here = try await DeviceStore.open(url, logger: quietLogger)
        let elsewhere = try await DeviceStore.open(url, logger: quietLogger)
        try await here.addTestApp()
        #expect(try await !here.sdkDevices.any(app: "shop-ios"))
        #expect(try await !elsewhere.sdkDevices.any(app: "shop-ios"))

        try await here.sdkDevices.put(app: "shop-ios", deviceID: "d1", document: "{}")
        #expect(try await here.sdkDevices.any(app: "shop-ios"))
        // The other process's remembered "no" lasts a second at most.
        let seen = try await eventually(within: .seconds(5)) { try await elsewhere.sdkDevices.any(app: "shop-ios") }
        #expect(seen, "another process never saw the app's first SDK device")

        #expect(try await here.sdkDevices.delete(app: "shop-ios", deviceID: "d1"))
        #expect(try await !here.sdkDevices.any(app: "shop-ios"))
        #expect(try await !here.sdkDevices.any(app: "other-app"))
    }

    /// Polls `condition` until it holds or `limit` passes.
    private func eventually(within limit: Duration, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }
}
