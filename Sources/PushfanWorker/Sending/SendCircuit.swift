import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport

/// A circuit breaker for one rate lane: when most recent answers are server failures (5xx,
/// connections lost or refused), sending at the full rate only burns the devices' retries
/// and APNs' patience. The circuit opens, waits, lets a small probe through, and closes
/// again when the probe mostly succeeds; each failed probe doubles the wait.
///
/// A pure state machine: the caller passes the time in and acts on the answer.
package struct SendCircuit: Sendable, Equatable {
    package struct Settings: Sendable, Equatable {
        /// Answers looked at: the most recent ones.
        package var window = 40
        /// Answers needed before the circuit may open, so one early failure does not.
        package var minimumAnswers = 20
        /// Share of server failures in the window that opens the circuit.
        package var failureShare = 0.5
        /// Sends a probe may make.
        package var probeSize = 5
        package var firstWait = Duration.seconds(1)
        package var longestWait = Duration.seconds(15)
        /// A probe without an answer after this long is given up and sent again.
        package var probeTimeout = Duration.seconds(15)

        package init() {}
    }

    package enum State: Sendable, Equatable {
        /// Sending freely; `recent` holds the last answers, true for a server failure.
        case closed(recent: [Bool])
        /// Nothing is sent until `until`; the next probe waits `wait` if it fails.
        case open(until: ContinuousClock.Instant, wait: Duration)
        /// One probe of `settings.probeSize` sends went out at `since`.
        case probing(since: ContinuousClock.Instant, wait: Duration)
    }

    /// What the lane may do now.
    package enum Admission: Sendable, Equatable {
        /// Send up to `limit` notifications (nil: no limit beyond the rate).
        case send(limit: Int?)
        /// Send nothing before this instant.
        case wait(until: ContinuousClock.Instant)
    }

    package let settings: Settings
    package private(set) var state: State = .closed(recent: [])

    package init(settings: Settings = Settings()) {
        self.settings = settings
    }

    package var isOpen: Bool {
        if case .closed = state { return false }
        return true
    }

    package mutating func admit(now: ContinuousClock.Instant) -> Admission {
        switch state {
        case .closed:
            return .send(limit: nil)
        case .open(let until, let wait):
            guard now >= until else { return .wait(until: until) }
            state = .probing(since: now, wait: wait)
            return .send(limit: settings.probeSize)
        case .probing(let since, let wait):
            // Until the probe answers, the lane holds still. A probe never answered (its task
            // was stopped) is replaced by another.
            guard now - since < settings.probeTimeout else {
                state = .probing(since: now, wait: wait)
                return .send(limit: settings.probeSize)
            }
            return .wait(until: now + .milliseconds(50))
        }
    }

    /// Records the answers of one batch: `failures` server failures among `total` answers.
    /// `probe` tells a batch admitted as the probe (`.send(limit:)` with a limit) from one
    /// admitted while closed: only the probe's answers decide a probe, however late the
    /// batches sent before the circuit opened answer.
    package mutating func record(failures: Int, total: Int, probe: Bool = false, now: ContinuousClock.Instant) {
        guard total > 0 else {
            // A probe none of whose requests reached the server (withdrawn unsent, no
            // credentials, a closing sender) tells nothing: probe again now.
            if probe { probeNotSent(now: now) }
            return
        }
        switch state {
        case .closed(var recent):
            recent += Array(repeating: true, count: failures) + Array(repeating: false, count: total - failures)
            if recent.count > settings.window { recent.removeFirst(recent.count - settings.window) }
            let failed = recent.count(where: { $0 })
            if recent.count >= settings.minimumAnswers, Double(failed) >= settings.failureShare * Double(recent.count) {
                state = .open(until: now + settings.firstWait, wait: min(settings.firstWait * 2, settings.longestWait))
            } else {
                state = .closed(recent: recent)
            }
        case .probing(_, let wait):
            guard probe else { return }
            if Double(failures) < settings.failureShare * Double(total) {
                state = .closed(recent: [])
            } else {
                state = .open(until: now + wait, wait: min(wait * 2, settings.longestWait))
            }
        case .open:
            // Answers of batches sent before the circuit opened: the decision is made.
            break
        }
    }

    /// The probe admitted last did not go out (its round stopped first, or its claims were
    /// another worker's): the next admission may probe at once instead of after the probe's
    /// timeout.
    package mutating func probeNotSent(now: ContinuousClock.Instant) {
        if case .probing(_, let wait) = state { state = .open(until: now, wait: wait) }
    }

    /// Answers that are neither success nor failure of the server: nothing was sent.
    package static func saysNothingAboutTheServer(_ result: APNsSendResult) -> Bool {
        if case .failed(let failure) = result { return [.senderClosed, .credentialsUnavailable, .withdrawn].contains(failure.cause) }
        return false
    }

    /// Whether an answer tells of trouble at the server rather than with the notification:
    /// 5xx and connections that failed. 429 is about one token, not the server.
    package static func isServerFailure(_ result: APNsSendResult) -> Bool {
        switch result {
        case .response(.accepted): return false
        case .response(.rejected(let status, _, _)): return status >= 500
        case .failed(let failure): return !saysNothingAboutTheServer(.failed(failure))
        }
    }
}

/// The circuits of one worker, one per (app, lane), shared by the lane's tasks.
package final class LaneCircuits: Sendable {
    private let circuits = Locked<[LaneKey: SendCircuit]>([:])
    private let settings: SendCircuit.Settings
    private let logger: Logger
    private let clock: any ServiceClock

    package init(settings: SendCircuit.Settings = SendCircuit.Settings(), logger: Logger, clock: any ServiceClock) {
        self.settings = settings
        self.logger = logger
        self.clock = clock
    }

    package func admit(_ key: LaneKey) -> SendCircuit.Admission {
        circuits.withLock { circuits in
            guard var circuit = circuits[key] else { return .send(limit: nil) }
            defer { circuits[key] = circuit }
            return circuit.admit(now: clock.now)
        }
    }

    /// The probe `admit` granted last on `key` did not go out (`SendCircuit.probeNotSent`).
    package func probeNotSent(_ key: LaneKey) {
        circuits.withLock { circuits in circuits[key]?.probeNotSent(now: clock.now) }
    }

    package func record(_ key: LaneKey, _ results: [APNsSendResult], probe: Bool) {
        // A closing sender or missing credentials says nothing about the server.
        let counted = results.filter { !SendCircuit.saysNothingAboutTheServer($0) }
        let failures = counted.count(where: SendCircuit.isServerFailure)
        let (was, now) = circuits.withLock { circuits -> (Bool, Bool) in
            var circuit = circuits[key] ?? SendCircuit(settings: settings)
            let was = circuit.isOpen
            circuit.record(failures: failures, total: counted.count, probe: probe, now: clock.now)
            circuits[key] = circuit
            return (was, circuit.isOpen)
        }
        if !was && now {
            logger.warning("lane.circuit_open", ["lane": key.description, "failures": String(failures), "answers": String(results.count)])
        } else if was && !now {
            logger.notice("lane.circuit_closed", ["lane": key.description])
        }
    }
}
