import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

@testable import PushfanWorker

/// The lane's circuit breaker, the credentials pause with its limit, and the stop signal:
/// pure decisions driven with explicit instants.
@Suite struct SendCircuitTests {
    let start = ContinuousClock.now

    @Test("the circuit stays closed until most of at least 20 recent answers are server failures")
    func opensOnMostlyFailures() {
        var circuit = SendCircuit()
        circuit.record(failures: 15, total: 15, now: start)
        #expect(!circuit.isOpen, "too few answers to judge")
        #expect(circuit.admit(now: start) == .send(limit: nil))
        #expect(circuit.state == .closed(recent: Array(repeating: true, count: 15)))

        var mixed = SendCircuit()
        mixed.record(failures: 0, total: 20, now: start)
        mixed.record(failures: 19, total: 20, now: start)
        #expect(!mixed.isOpen, "19 failures of 40 is less than half")
        mixed.record(failures: 1, total: 1, now: start)
        #expect(mixed.isOpen, "20 of the last 40")
        circuit = mixed
        #expect(circuit.admit(now: start + .milliseconds(500)) == .wait(until: start + .seconds(1)))
    }

    @Test("an open circuit lets one small probe through after its wait; a good probe closes it")
    func probeCloses() {
        var circuit = SendCircuit()
        circuit.record(failures: 40, total: 40, now: start)
        #expect(circuit.admit(now: start + .seconds(1)) == .send(limit: 5))
        // While the probe is out nothing else goes.
        guard case .wait = circuit.admit(now: start + .milliseconds(1_010)) else {
            Issue.record("a second batch went out during the probe")
            return
        }
        // A batch sent before the circuit opened answers late: it does not decide the probe.
        circuit.record(failures: 0, total: 25, now: start + .milliseconds(1_050))
        #expect(circuit.isOpen)
        circuit.record(failures: 1, total: 5, probe: true, now: start + .milliseconds(1_100))
        #expect(!circuit.isOpen)
        #expect(circuit.admit(now: start + .milliseconds(1_100)) == .send(limit: nil))
    }

    @Test("a probe that did not go out, or whose every request was withdrawn unsent, lets the next admission probe at once instead of after the probe's timeout")
    func unsentProbeIsGivenBack() {
        var circuit = SendCircuit()
        circuit.record(failures: 40, total: 40, now: start)
        #expect(circuit.admit(now: start + .seconds(1)) == .send(limit: 5))
        #expect(circuit.admit(now: start + .seconds(2)) == .wait(until: start + .milliseconds(2_050)), "the probe holds the lane")
        circuit.probeNotSent(now: start + .seconds(2))
        #expect(circuit.admit(now: start + .seconds(2)) == .send(limit: 5))
        // Withdrawn answers are no answers: the same.
        circuit.record(failures: 0, total: 0, probe: true, now: start + .seconds(3))
        #expect(circuit.admit(now: start + .seconds(3)) == .send(limit: 5))
        // The wait a failed probe doubles is kept.
        circuit.record(failures: 5, total: 5, probe: true, now: start + .seconds(4))
        #expect(circuit.admit(now: start + .seconds(5)) == .wait(until: start + .seconds(6)))
        // Nothing changes for a closed circuit.
        var closed = SendCircuit()
        closed.probeNotSent(now: start)
        #expect(closed.state == .closed(recent: []))
    }

    @Test("each failed probe doubles the wait, up to the longest")
    func failedProbesBackOff() {
        var circuit = SendCircuit()
        circuit.record(failures: 40, total: 40, now: start)
        var now = start
        var waits: [Duration] = []
        for _ in 0..<7 {
            guard case .wait(let until) = circuit.admit(now: now) else {
                Issue.record("the circuit did not hold")
                return
            }
            waits.append(until - now)
            now = until
            #expect(circuit.admit(now: now) == .send(limit: 5))
            circuit.record(failures: 5, total: 5, probe: true, now: now)
        }
        #expect(waits == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(15), .seconds(15), .seconds(15)])
    }

    @Test("a probe that never answers is replaced after the probe timeout")
    func lostProbe() {
        var circuit = SendCircuit()
        circuit.record(failures: 40, total: 40, now: start)
        #expect(circuit.admit(now: start + .seconds(1)) == .send(limit: 5))
        #expect(circuit.admit(now: start + .seconds(16)) == .send(limit: 5))
    }

    @Test("server failures are 5xx and broken connections; 4xx, 429 and a closing sender are not")
    func whatCountsAsServerFailure() {
        #expect(SendCircuit.isServerFailure(.response(.rejected(status: 503, reason: .serviceUnavailable, timestamp: nil))))
        #expect(SendCircuit.isServerFailure(.response(.rejected(status: 500, reason: .internalServerError, timestamp: nil))))
        #expect(SendCircuit.isServerFailure(.failed(APNsTransportFailure(.connectionLost, detail: ""))))
        #expect(!SendCircuit.isServerFailure(.response(.accepted(apnsID: "x", uniqueID: nil))))
        #expect(!SendCircuit.isServerFailure(.response(.rejected(status: 429, reason: .tooManyRequests, timestamp: nil))))
        #expect(!SendCircuit.isServerFailure(.response(.rejected(status: 400, reason: .badDeviceToken, timestamp: nil))))
        #expect(!SendCircuit.isServerFailure(.failed(APNsTransportFailure(.senderClosed, detail: ""))))
        #expect(!SendCircuit.isServerFailure(.failed(APNsTransportFailure(.withdrawn, detail: ""))))
    }

    @Test("credentials: each campaign hears of a pause once; past the limit devices are given up until the app recovers")
    func credentialsPauseAndGiveUp() {
        let logger = Logger(label: "test", threshold: .error)
        let patient = AppPauses(logger: logger, giveUpAfter: .seconds(3_600), clock: ManualClock())
        #expect(patient.pause("shop", campaign: CampaignKey(app: "shop", id: "a"), for: .seconds(30), reason: "403") == .init(giveUp: false, announce: true))
        #expect(patient.pause("shop", campaign: CampaignKey(app: "shop", id: "a"), for: .seconds(30), reason: "403") == .init(giveUp: false, announce: false))
        #expect(patient.pause("shop", campaign: CampaignKey(app: "shop", id: "b"), for: .seconds(30), reason: "403") == .init(giveUp: false, announce: true))
        #expect(patient.resumeAt("shop") != nil && !patient.hasGivenUp("shop"))

        // The pause ends and the give-up limit comes as the clock moves.
        let clock = ManualClock()
        let timed = AppPauses(logger: logger, giveUpAfter: .seconds(60), clock: clock)
        #expect(!timed.pause("shop", campaign: CampaignKey(app: "shop", id: "a"), for: .seconds(30), reason: "403").giveUp)
        clock.advance(by: .seconds(30))
        #expect(timed.resumeAt("shop") == nil, "the pause is over")
        clock.advance(by: .seconds(30))
        #expect(timed.pause("shop", campaign: CampaignKey(app: "shop", id: "a"), for: .seconds(30), reason: "403") == .init(giveUp: true, announce: true))
        #expect(timed.hasGivenUp("shop"))

        let strict = AppPauses(logger: logger, giveUpAfter: .zero, clock: ManualClock())
        #expect(strict.pause("shop", campaign: CampaignKey(app: "shop", id: "a"), for: .seconds(30), reason: "403").giveUp)
        #expect(strict.hasGivenUp("shop"))
        strict.recovered("shop")
        #expect(!strict.hasGivenUp("shop") && strict.resumeAt("shop") == nil)
    }

    @Test("a sleep on the stop signal ends when the signal is raised", .timeLimit(.minutes(1)))
    func stopSignalWakesSleepers() async {
        let signal = StopSignal(clock: SystemClock())
        async let slept: Void = signal.sleep(for: .seconds(3_600))
        try? await Task.sleep(for: .milliseconds(100))
        signal.raise()
        await slept
        #expect(signal.isRaised)
    }
}
