// `pushfan-shifted-clock SECONDS <command> [options]`: `pushfan`, its wall clock shifted by
// SECONDS, for tests and benchmarks of moments hours away (a local-time wave at its zone's
// 09:00, quiet hours) without waiting for them. Test-only: the product has no such setting.
// The simulator's clock must be shifted alike (`clock_offset_s`), or provider tokens look
// expired or from the future.
@preconcurrency import Glibc
import Foundation
import PushfanCLI
import PushfanSupport

/// The system's monotonic clock and waits, and its wall clock `offset` seconds away.
struct ShiftedClock: ServiceClock {
    let offset: TimeInterval
    let system = SystemClock()
    var now: ContinuousClock.Instant { system.now }
    var wall: Date { system.wall.addingTimeInterval(offset) }
    func sleep(until deadline: ContinuousClock.Instant) async throws { try await system.sleep(until: deadline) }
}

/// A year each way: enough for any date a test names.
let maxOffset = 366 * 86_400
var arguments = Array(CommandLine.arguments.dropFirst())
guard let first = arguments.first, let offset = Int(first), abs(offset) <= maxOffset, arguments.count > 1 else {
    fputs("usage: pushfan-shifted-clock SECONDS <pushfan command> [options]  (SECONDS: -\(maxOffset)...\(maxOffset))\n", stderr)
    exit(2)
}
arguments.removeFirst()
let status = await PushfanMain.run(arguments, clock: ShiftedClock(offset: TimeInterval(offset)))
fflush(stdout)
fflush(stderr)
_exit(status)
