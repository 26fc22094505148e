import Dispatch
import Testing

@testable import PushfanMessages
@testable import PushfanSupport

@Suite struct LockedTests {
    @Test("increments from many threads at once are all counted")
    func contendedIncrements() {
        let counter = Locked(0)
        // Eight threads at once, each reading and writing back: without mutual exclusion
        // increments are lost (and under ThreadSanitizer each is reported as a race).
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<20_000 {
                counter.withLock { value in
                    let read = value
                    value = read + 1
                }
            }
        }
        #expect(counter.withLock { $0 } == 160_000)
    }

    @Test("a thrown error leaves the lock free and the value as the body left it")
    func throwingBodyUnlocks() {
        struct Refused: Error {}
        let names = Locked(["a"])
        #expect(throws: Refused.self) {
            try names.withLock { (value: inout [String]) throws(Refused) in
                value.append("b")
                throw Refused()
            }
        }
        #expect(names.withLock { $0 } == ["a", "b"])
    }
}
