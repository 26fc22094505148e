import Foundation
import PushfanKafka
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics
import Testing

@testable import PushfanAPI

/// A device on Notificare's SDK linked to a user by the app's server: the SDK's later calls,
/// which send the user of its own document each time, keep that link until the SDK itself
/// names another user.
@Suite struct NotificareUserLinkTests {
    @Test("the server links the SDK's device to bob; the SDK's next update (still naming alice) keeps bob; the SDK's own login as carol moves it")
    func serverLinkOutlivesTheSDKsStaleUser() async throws {
        let api = try await InProcessService()
        let (store, secrets) = (api.store, api.secrets)
        func call(_ method: String, _ path: String, _ secret: String, _ body: String) async -> HTTPResponse {
            await api.call(method, path, secret: secret, body: body)
        }
        func user() async throws -> JSONValue? { try await store.devices.get(app: "shop", deviceID: token)?.attributes["user_id"] }
        let token = String(repeating: "ab", count: 32)

        #expect(await call("POST", "/device", secrets.application, #"{"deviceID":"\#(token)","transport":"APNS","userID":"alice","language":"en"}"#).status == 200)
        #expect(try await user() == "alice")
        let linked = await call("PUT", "/v1/apps/shop/users/bob/devices/\(token)", secrets.master, "{}")
        #expect(linked.status == 200, "\(String(decoding: linked.body, as: UTF8.self))")
        #expect(try await user() == "bob")
        // The SDK on its next launch: its document still says alice.
        #expect(await call("PUT", "/device/\(token)", secrets.application, #"{"timeZoneOffset":1,"language":"de"}"#).status == 200)
        #expect(try await user() == "bob", "the SDK's stale user undid the server's link")
        #expect(try await store.devices.get(app: "shop", deviceID: token)?.locale == "de")
        // The SDK registering again with the user it has (as on every launch) keeps bob too.
        #expect(await call("POST", "/device", secrets.application, #"{"deviceID":"\#(token)","transport":"APNS","userID":"alice"}"#).status == 200)
        #expect(try await user() == "bob")
        // A login in the app: the SDK names another user, which is the device's to say.
        #expect(await call("PUT", "/device/\(token)", secrets.application, #"{"userID":"carol"}"#).status == 200)
        #expect(try await user() == "carol")
        await api.stop()
    }
}
