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

        try await here.sdkDevices.put(app: "shop-ios", deviceID: "d1", document: "{}", user: nil, now: here.clock.wallMillis)
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

    @Test("a document naming a user with no device row of that user behind it (a temporary device, or one since registered to another user) is the user's: its export shows it and its erasure removes it, also for a document written before migration 28", arguments: Backend.enabled)
    func temporaryDevicesBelongToTheirUser(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        // Written before migration 28: the document alone names the user.
        _ = try await store.ledger.executor.run { connection throws(StoreError) in
            try connection.executeScript("DROP INDEX sdk_devices_by_user; ALTER TABLE sdk_devices DROP COLUMN user_id;")
            try connection.execute("DELETE FROM schema_migrations WHERE version = 28")
            return try connection.execute("""
                INSERT INTO sdk_devices (app, device_id, document, updated_at) VALUES ('shop-ios', 'tmp-old', '{"deviceID":"tmp-old","userID":"42","userName":"Ada\\u0000","userData":{"note":"\\\\u0000"}}', 1)
                """)
        }
        #expect(try await store.migrate() == [28])
        try await store.sdkDevices.put(app: "shop-ios", deviceID: "tmp-new", document: #"{"deviceID":"tmp-new","userID":"42"}"#, user: "42", now: 2)
        try await store.sdkDevices.put(app: "shop-ios", deviceID: "tmp-other", document: #"{"deviceID":"tmp-other","userID":"7"}"#, user: "7", now: 2)
        // A device the SDK registered for 42 whose row was then registered to 7 through the
        // native API: its document still names 42, so it is 42's to export and erase.
        var moved = DeviceRegistration(deviceID: "moved", token: String(format: "%064x", 5))
        moved.attributes["user_id"] = "7"
        _ = try await store.devices.register(app: "shop-ios", moved)
        try await store.sdkDevices.put(app: "shop-ios", deviceID: "moved", document: #"{"deviceID":"moved","userID":"42","userName":"Ada"}"#, user: "42", now: 2)
        #expect(try await store.sdkDevices.names(app: "shop-ios", user: "42"))

        let exported = try #require(try await store.personalData.export(app: "shop-ios", user: "42"))
        #expect(exported.devices.isEmpty && exported.temporaryDevices.map(\.deviceID) == ["moved", "tmp-new", "tmp-old"])
        #expect(exported.temporaryDevices.last?.document.contains("Ada") == true)
        let erased = try await store.personalData.eraseUser(app: "shop-ios", id: "42")
        #expect(erased == PersonalData.Erased(user: "42", devices: []))
        #expect(try await store.sdkDevices.get(app: "shop-ios", deviceID: "tmp-old") == nil)
        #expect(try await store.sdkDevices.get(app: "shop-ios", deviceID: "tmp-new") == nil)
        #expect(try await store.sdkDevices.get(app: "shop-ios", deviceID: "tmp-other") != nil)
        #expect(try await store.sdkDevices.get(app: "shop-ios", deviceID: "moved") == nil, "the document naming 42 is gone")
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "moved") != nil, "7's device stays")
        #expect(try await store.personalData.export(app: "shop-ios", user: "42") == nil)
        #expect(try await !store.sdkDevices.names(app: "shop-ios", user: "42"))
    }
}
