import Foundation
import PushfanAPNsModel
import PushfanSupport

/// One endpoint and one credential: HTTP/2 connections driven on a dedicated
/// thread (never the cooperative pool) by a `TransferEngine`.
///
/// Callers hand over batches; the thread keeps up to `maxInFlight` requests on
/// the wire, queues the rest (callers wait when `maxQueued` are queued) and
/// resumes each batch's caller once, when all its results are in.
final class APNsConnectionPool: Sendable {
    private let shared = SharedBox()
    private let waker: Waker
    private let maxQueued: Int

    init(
        endpoint: APNsEndpoint, credentials: APNsCredentials, configuration: APNsClientConfiguration,
        tokenCache: ProviderTokenCache, logger: Logger, metrics: APNsMetrics?
    ) throws(APNsSenderError) {
        let context = TransferEngine.Context(
            endpoint: endpoint, credentials: credentials, configuration: configuration, tokenCache: tokenCache,
            logger: logger, shared: shared, metrics: metrics)
        let engine = try HTTP2TransferEngine(context)
        waker = engine.waker
        maxQueued = configuration.maxQueued
        // The engine is handed to its thread and used only there from now on.
        let handOver = UncheckedBox(engine)
        let thread = Thread { handOver.value.run() }
        thread.name = "pushfan-apns"
        thread.start()
    }

    /// Sends `notifications` and returns their results in the same order. Waits
    /// first while the pool's queue is full. `started`, if given, is called (on the pool's
    /// thread) once every one of them is on a stream or answered. `ahead`: they neither wait
    /// for room nor queue behind what is waiting; they take the next free streams (a
    /// transactional message beside a campaign that keeps the queue full), on the pool's
    /// urgent connection when it has room (`HTTP2TransferEngine.start`). `withdrawn`, if
    /// given, is asked before each request goes on a stream (and after the wait for room):
    /// when it says true, the request comes back `withdrawn` unsent.
    func send(
        _ notifications: [APNsNotification], started: (@Sendable () -> Void)? = nil, ahead: Bool = false,
        withdrawn: (@Sendable () -> Bool)? = nil
    ) async -> [APNsSendResult] {
        guard !notifications.isEmpty else {
            started?()
            return []
        }
        if !ahead { await waitForRoom() }
        return await withCheckedContinuation { continuation in
            let collector = ResultCollector(count: notifications.count, continuation: continuation, onStarted: started, withdrawn: withdrawn)
            if collector.isWithdrawn {
                for index in notifications.indices { collector.deliver(.failed(TransferEngine.withdrawnFailure), at: index) }
                return
            }
            let accepted = shared.state.withLock { state in
                guard !state.closing else { return false }
                let requests = notifications.enumerated().map {
                    PendingRequest(notification: $1, collector: collector, index: $0, urgent: ahead)
                }
                if ahead { state.urgent += requests } else { state.incoming += requests }
                return true
            }
            if accepted {
                waker.wake()
            } else {
                let closed = APNsSendResult.failed(APNsTransportFailure(.senderClosed, detail: "the sender is shutting down"))
                for index in notifications.indices { collector.deliver(closed, at: index) }
            }
        }
    }

    private func waitForRoom() async {
        let maxQueued = self.maxQueued
        while shared.state.withLock({ !$0.closing && $0.queued >= maxQueued }) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let parked = shared.state.withLock { state in
                    guard !state.closing, state.queued >= maxQueued else { return false }
                    state.roomWaiters.append(continuation)
                    return true
                }
                if !parked { continuation.resume() }
            }
        }
    }

    /// Stops taking work: queued requests fail as `senderClosed` (never sent),
    /// requests on the wire get `shutdownGrace` to finish, then the thread exits.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = shared.state.withLock { state in
                state.closing = true
                if state.closed { return true }
                state.closeWaiters.append(continuation)
                return false
            }
            waker.wake()
            if done { continuation.resume() }
        }
    }
}

/// Moves a non-Sendable value to the thread that will own it.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
