import Foundation
import PushfanAPNsModel
import PushfanSupport

/// Where one batch's results are gathered. Written only by the pool's thread
/// once the batch is handed over (the hand-over goes through the pool's mutex,
/// which orders it), and read by the waiting caller after the last result.
final class ResultCollector: @unchecked Sendable {
    private var results: [APNsSendResult?]
    private var remaining: Int
    private let continuation: CheckedContinuation<[APNsSendResult], Never>
    /// Called once every request of the batch has been started on a stream (or has its
    /// result without one): what the caller may count as on the wire.
    private let onStarted: (@Sendable () -> Void)?
    private var started: [Bool]
    private var unstarted: Int
    /// Asked (on the pool's thread) just before each request goes on a stream: true when
    /// the caller no longer wants it sent.
    private let withdrawn: (@Sendable () -> Bool)?

    init(
        count: Int, continuation: CheckedContinuation<[APNsSendResult], Never>, onStarted: (@Sendable () -> Void)? = nil,
        withdrawn: (@Sendable () -> Bool)? = nil
    ) {
        results = Array(repeating: nil, count: count)
        remaining = count
        self.continuation = continuation
        self.onStarted = onStarted
        self.withdrawn = withdrawn
        started = onStarted == nil ? [] : Array(repeating: false, count: count)
        unstarted = count
    }

    /// Whether the caller withdrew the batch's requests not yet on a stream.
    var isWithdrawn: Bool { withdrawn?() ?? false }

    /// The request at `index` is on a stream; a resend of it counts once.
    func markStarted(_ index: Int) {
        guard let onStarted, !started[index] else { return }
        started[index] = true
        unstarted -= 1
        if unstarted == 0 { onStarted() }
    }

    func deliver(_ result: APNsSendResult, at index: Int) {
        markStarted(index)
        results[index] = result
        remaining -= 1
        if remaining == 0 { continuation.resume(returning: results.map { $0! }) }
    }
}

/// A notification waiting for, or on, the wire.
struct PendingRequest: Sendable {
    let notification: APNsNotification
    let collector: ResultCollector
    let index: Int
    /// Handed over `ahead` (a transactional message's): it travels on the pool's urgent
    /// connection, never behind a campaign's frames.
    var urgent = false
    /// Already resent once after ExpiredProviderToken with a fresh token.
    var resentWithFreshToken = false
    /// Times the server refused it unprocessed (REFUSED_STREAM, above GOAWAY's
    /// last-stream-id) and the pool sent it again.
    var unprocessedResends = 0

    func deliver(_ result: APNsSendResult) { collector.deliver(result, at: index) }
}

/// State shared between callers and the pool's thread.
struct SharedState {
    var incoming: [PendingRequest] = []
    /// Handed over ahead of everything waiting (a transactional message's requests).
    var urgent: [PendingRequest] = []
    /// Requests the thread holds that are not on the wire yet.
    var waitingInThread = 0
    var roomWaiters: [CheckedContinuation<Void, Never>] = []
    var closing = false
    var closed = false
    var closeWaiters: [CheckedContinuation<Void, Never>] = []

    var queued: Int { incoming.count + urgent.count + waitingInThread }
}

/// The mutex-guarded state, in a class so the pool and its thread share it.
final class SharedBox: Sendable {
    let state = Locked(SharedState())
}

/// Wakes the pool's thread from another thread (a thread-safe libcurl or pipe call).
struct Waker: @unchecked Sendable {
    let wake: () -> Void
}
