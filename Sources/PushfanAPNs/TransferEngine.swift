import Foundation
import PushfanAPNsModel
import PushfanSupport

/// The pool thread's loop and everything both transports share: the queue of
/// requests not yet on the wire, provider tokens, the resend after
/// ExpiredProviderToken, the backoff after failed connection attempts, and
/// shutdown. Subclasses move requests over the wire (`start`, `performIO`).
///
/// Used only on the pool's thread.
class TransferEngine {
    struct Context: Sendable {
        let endpoint: APNsEndpoint
        let credentials: APNsCredentials
        let configuration: APNsClientConfiguration
        let tokenCache: ProviderTokenCache
        let logger: Logger
        let shared: SharedBox
        let metrics: APNsMetrics?
    }

    let endpoint: APNsEndpoint
    let credentials: APNsCredentials
    let configuration: APNsClientConfiguration
    let tokenCache: ProviderTokenCache
    let logger: Logger
    let metrics: APNsMetrics?
    private let shared: SharedBox

    /// Requests on the wire; subclasses count them.
    var active = 0
    /// Requests not on the wire yet, oldest first from `waitingHead`.
    private var waiting: [PendingRequest] = []
    private var waitingHead = 0
    /// No new connection is attempted before this (reconnect backoff).
    private(set) var blockedUntil = ContinuousClock.now
    private var consecutiveConnectFailures = 0

    init(context: Context) {
        endpoint = context.endpoint
        credentials = context.credentials
        configuration = context.configuration
        tokenCache = context.tokenCache
        logger = context.logger
        metrics = context.metrics
        shared = context.shared
    }

    // MARK: what a transport provides

    /// Wakes `run` from another thread.
    var waker: Waker { fatalError("subclass") }
    /// Requests allowed on the wire now.
    var inFlightLimit: Int { configuration.maxInFlight }
    /// Puts `request` on the wire; false when there is no room now (the request
    /// stays first in line).
    func start(_ request: PendingRequest, token: ProviderToken?) -> Bool { fatalError("subclass") }
    /// Waits up to `timeout` milliseconds for I/O, moves bytes, and reports
    /// finished requests through `finish`.
    func performIO(timeout: Int32) { fatalError("subclass") }
    /// Ends every request on the wire with `failure` (shutdown after its grace).
    func abortActive(_ failure: APNsTransportFailure) { fatalError("subclass") }
    /// Closes connections and frees the transport; the last call on the thread.
    func closeTransport() {}
    /// After ExpiredProviderToken: later requests go over new connections.
    func reconnectForNewToken() {}
    /// Periodic work (PINGs, idle connections, request timeouts).
    func housekeeping() {}

    // MARK: the loop

    /// Requests handed over that are not on the wire yet.
    var waitingCount: Int { waiting.count - waitingHead }

    final func run() {
        // A write to a connection the server already closed raises SIGPIPE in
        // the writing thread (OpenSSL writes with plain write()); blocked here,
        // the write fails with EPIPE instead of ending the process.
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
        var closing = false
        var closeDeadline: ContinuousClock.Instant?
        let senderClosed = APNsTransportFailure(.senderClosed, detail: "the sender shut down before this was sent")
        while true {
            let taken = shared.state.withLock { state in
                let requests = state.incoming
                let urgent = state.urgent
                state.incoming = []
                state.urgent = []
                state.waitingInThread = waitingCount + requests.count + urgent.count
                var waiters: [CheckedContinuation<Void, Never>] = []
                if !state.roomWaiters.isEmpty && (state.queued < configuration.maxQueued || state.closing) {
                    waiters = state.roomWaiters
                    state.roomWaiters = []
                }
                return (requests: requests, urgent: urgent, closing: state.closing, roomWaiters: waiters)
            }
            waiting.append(contentsOf: taken.requests)
            if !taken.urgent.isEmpty { waiting.insert(contentsOf: taken.urgent, at: waitingHead) }
            for waiter in taken.roomWaiters { waiter.resume() }
            if taken.closing && !closing {
                closing = true
                closeDeadline = .now + configuration.shutdownGrace
            }
            if closing {
                failWaiting(senderClosed)
            } else {
                startWaiting()
            }
            performIO(timeout: pollTimeout())
            housekeeping()
            if closing {
                failWaiting(senderClosed)
                if active == 0 { break }
                if let closeDeadline, ContinuousClock.now >= closeDeadline {
                    abortActive(APNsTransportFailure(.connectionLost, detail: "the sender shut down with this request on the wire"))
                    break
                }
            }
        }
        closeTransport()
        let waiters = shared.state.withLock { state in
            state.closed = true
            let waiters = state.closeWaiters + state.roomWaiters
            state.closeWaiters = []
            state.roomWaiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func startWaiting() {
        let limit = inFlightLimit
        guard waitingCount > 0, active < limit else { return }
        var token: ProviderToken?
        if case .token(let key) = credentials {
            do {
                token = try tokenCache.token(for: key)
            } catch {
                failWaiting(APNsTransportFailure(.credentialsUnavailable, detail: error.description))
                return
            }
        }
        while active < limit, waitingHead < waiting.count {
            let request = waiting[waitingHead]
            if request.collector.isWithdrawn {
                waitingHead += 1
                request.deliver(.failed(Self.withdrawnFailure))
                continue
            }
            guard start(request, token: token) else { break }
            request.collector.markStarted(request.index)
            waitingHead += 1
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 4096 && waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    private func pollTimeout() -> Int32 {
        var timeout = 100
        if waitingCount > 0 && (active < inFlightLimit) && (blockedUntil > ContinuousClock.now) {
            timeout = min(timeout, max(0, Int((blockedUntil - ContinuousClock.now).milliseconds)))
        }
        return Int32(timeout)
    }

    // MARK: results

    /// Puts a request back first in line: it was not processed, or it is resent
    /// with a new provider token.
    final func requeue(_ request: PendingRequest) {
        waiting.insert(request, at: waitingHead)
    }

    /// A request's attempt is over: resend after ExpiredProviderToken (once),
    /// back off after a failed connection attempt, else deliver the result.
    final func finish(_ request: PendingRequest, _ result: APNsSendResult, token: ProviderToken?) {
        var request = request
        switch result {
        case .failed(let failure) where failure.cause == .connectFailed:
            noteConnectFailure(failure)
        case .response:
            consecutiveConnectFailures = 0
        default:
            break
        }
        // ExpiredProviderToken: refresh once, reconnect and resend, unless the
        // token is too young to replace (then the caller's retry waits).
        if case .response(.rejected(_, .expiredProviderToken, _)) = result, !request.resentWithFreshToken,
           case .token(let key) = credentials, let token
        {
            switch tokenCache.invalidate(token, for: key) {
            case .refreshNow:
                logger.notice("apns.token.expired", ["key_id": key.keyID, "action": "refresh_and_reconnect"])
                request.resentWithFreshToken = true
                reconnectForNewToken()
                requeue(request)
                return
            case .alreadyReplaced:
                // Another answer already replaced the token and moved sends to new
                // connections: a late 403 of the same token only goes again, so the many
                // answers of one expiry drain the connections once, not once each.
                request.resentWithFreshToken = true
                requeue(request)
                return
            case .refreshAt(let date):
                logger.warning("apns.token.expired", ["key_id": key.keyID, "action": "too_young_to_refresh", "refresh_at": "\(date)"])
            }
        }
        if case .failed(let failure) = result {
            logger.debug("apns.transfer.failed", ["cause": failure.cause.rawValue, "detail": failure.detail])
        }
        request.deliver(result)
    }

    /// Backs off connection attempts: one step per failed round (requests
    /// that failed together count once), doubling up to `reconnectMaxDelay`.
    final func noteConnectFailure(_ failure: APNsTransportFailure) {
        let now = ContinuousClock.now
        guard now >= blockedUntil else { return }
        consecutiveConnectFailures += 1
        let exponent = Double(min(consecutiveConnectFailures - 1, 30))
        let ceiling = min(configuration.reconnectMaxDelay.seconds, configuration.reconnectBaseDelay.seconds * pow(2, exponent))
        let delay = Duration.seconds(Double.random(in: (ceiling / 2)...ceiling))
        blockedUntil = now + delay
        logger.warning("apns.connect.failed", [
            "endpoint": endpoint.baseURL, "error": failure.detail, "attempt": "\(consecutiveConnectFailures)",
            "retry_in_ms": "\(delay.milliseconds)",
        ])
    }

    /// What a request withdrawn before it went on a stream gets.
    static let withdrawnFailure = APNsTransportFailure(.withdrawn, detail: "withdrawn by the caller before it was sent")

    /// Fails every request not yet on the wire.
    final func failWaiting(_ failure: APNsTransportFailure) {
        while waitingHead < waiting.count {
            let request = waiting[waitingHead]
            waitingHead += 1
            request.deliver(.failed(failure))
        }
        waiting.removeAll(keepingCapacity: true)
        waitingHead = 0
    }

    /// The response headers APNs sends, read into an outcome. A 200 needs no
    /// parsing beyond the two ids.
    static func outcome(status: Int, apnsID: String?, uniqueID: String?, body: [UInt8], request: PendingRequest) -> APNsOutcome {
        if status == 200 {
            return .accepted(apnsID: apnsID?.lowercased() ?? request.notification.apnsIDString, uniqueID: uniqueID)
        }
        var headers: [(String, String)] = []
        if let apnsID { headers.append(("apns-id", apnsID)) }
        return APNsOutcome(status: status, headers: headers, body: body, requestAPNsID: request.notification.apnsIDString)
    }
}
