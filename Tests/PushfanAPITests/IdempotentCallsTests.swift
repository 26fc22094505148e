import Foundation
import PushfanStore
import PushfanSupport
import PushfanTestSupport
import Testing

@testable import PushfanAPI

/// `Idempotency-Key` when the store fails after the work was done: the answer is the work's.
@Suite struct IdempotentCallsTests {
    @Test("work done whose answer cannot be kept (the store fails after it) is answered as done, not as an error inviting the retry that does it twice")
    func doneWorkIsAnsweredWhenItsAnswerCannotBeKept() async throws {
        let api = try await InProcessService()
        let (store, directory, clock) = (api.store, api.directory.path, api.clock)
        // The answer's retries wait on the test's clock: it moves whenever they sleep.
        let driver = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(2))
                if clock.sleeping > 0 { clock.advanceToNextDeadline() }
            }
        }
        defer { driver.cancel() }
        let request = HTTPRequest(method: "POST", path: "/v1/apps/shop/messages", headers: ["idempotency-key": "order-1"])
        var runs = 0
        let answer = try await IdempotentCalls.run(request, store: store, app: "shop", body: Array("{}".utf8)) {
            runs += 1
            // Sent; then the store loses the table its answer goes to.
            _ = try await CommandLineTool.run("sqlite3", ["\(directory)/store.db", "ALTER TABLE api_idempotency RENAME TO api_idempotency_gone;"])
            return .json(202, ["message": "msg-1"])
        }
        #expect(runs == 1)
        #expect(answer.status == 202 && String(decoding: answer.body, as: UTF8.self).contains("msg-1"))
        await api.stop()
    }
}
