import Foundation
import PushfanKafka
import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import PushfanTopics
import Testing

@testable import PushfanAPI

/// The failed-authentication throttle in the whole service, on a clock the test moves: the
/// window it reports in Retry-After is the one it keeps, with no wait for real time.
@Suite struct ThrottleWindowTests {
    @Test("ten failures answer 429 with Retry-After; the right secret works again once that many seconds have passed, not before")
    func retryAfterIsTheWindowLeft() async throws {
        let api = try await InProcessService(throttle: AuthThrottle(limit: 10, window: .seconds(60)))
        let (clock, secrets) = (api.clock, api.secrets)
        func get(_ secret: String) async -> HTTPResponse { await api.call("GET", "/v1/apps/shop/devices/d", secret: secret) }

        for attempt in 0..<10 {
            #expect(await get("guess-\(attempt)").status == 401)
            clock.advance(by: .seconds(1))
        }
        let blocked = await get(secrets.master)
        #expect(blocked.status == 429 && String(decoding: blocked.body, as: UTF8.self).contains(#""code":"too_many_failures""#))
        // The first failure was 10 s ago: 50 s of the window are left.
        #expect(blocked.headers["Retry-After"] == "50")
        clock.advance(by: .seconds(49))
        #expect(await get(secrets.master).status == 429, "a second before the window ends")
        clock.advance(by: .seconds(1))
        #expect(await get(secrets.master).status == 404, "the window has passed: the right secret reaches the route (no such device)")
        await api.stop()
    }
}
