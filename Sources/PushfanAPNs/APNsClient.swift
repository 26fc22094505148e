import Foundation
import PushfanAPNsModel
import PushfanSupport

/// Sends notifications to one APNs endpoint with one credential: the pool of
/// HTTP/2 connections for an (environment, team key) or an (environment,
/// certificate). `APNsClients` hands out one per pair.
///
/// A send returns APNs' answer or the transport failure as a value; it never
/// throws. Requests are checked when the `APNsNotification` is made (header
/// rules, payload size), so nothing malformed reaches the wire.
package final class APNsClient: Sendable {
    package let endpoint: APNsEndpoint
    package let credentials: APNsCredentials
    package let configuration: APNsClientConfiguration
    private let pool: APNsConnectionPool
    private let throttle = Locked(TooManyRequestsThrottle())

    /// Checks the configuration and, for token auth, signs a first provider
    /// token, so a broken key fails here and not on every notification.
    package init(
        endpoint: APNsEndpoint,
        credentials: APNsCredentials,
        configuration: APNsClientConfiguration = APNsClientConfiguration(),
        tokenCache: ProviderTokenCache = ProviderTokenCache(clock: SystemClock()),
        logger: Logger = Logger(label: "apns"),
        metrics: APNsMetrics? = nil
    ) throws(APNsSenderError) {
        let configuration = try configuration.validated()
        if case .token(let key) = credentials {
            do { _ = try tokenCache.token(for: key) } catch { throw .invalidCredentials(error.description) }
        }
        self.endpoint = endpoint
        self.credentials = credentials
        self.configuration = configuration
        pool = try APNsConnectionPool(
            endpoint: endpoint, credentials: credentials, configuration: configuration, tokenCache: tokenCache,
            logger: logger.child("apns"), metrics: metrics)
    }

    /// One attempt for one notification.
    package func send(_ notification: APNsNotification) async -> APNsSendResult {
        await pool.send([notification])[0]
    }

    /// One attempt for each notification, multiplexed; results in the same
    /// order. The throughput path: one hand-over and one resume per batch.
    /// `started`, if given, is called once every request is on a stream (or answered
    /// without one): the moment a caller pacing itself by the wire may hand more.
    /// `ahead`: before every request waiting in the pool (a transactional message's).
    /// `withdrawn`: asked just before each request goes on a stream; when true (an
    /// operator stopped the campaign meanwhile) the request comes back `withdrawn`, unsent.
    package func send(
        batch notifications: [APNsNotification], started: (@Sendable () -> Void)? = nil, ahead: Bool = false,
        withdrawn: (@Sendable () -> Bool)? = nil
    ) async -> [APNsSendResult] {
        await pool.send(notifications, started: started, ahead: ahead, withdrawn: withdrawn)
    }

    /// Sends until `policy` says stop: retryable rejections and transport
    /// failures come back after its backoff, 429 TooManyRequests waits per
    /// token, and nothing is resent after the notification's deadline.
    /// Returns the last result, the decision that ended it and the attempts made.
    package func send(
        _ notification: APNsNotification, retrying policy: RetryPolicy, clock: @Sendable () -> Date = { Date() }
    ) async -> (result: APNsSendResult, decision: RetryPolicy.Decision, attempts: Int) {
        let firstAttemptAt = clock()
        var attempt = 0
        while true {
            attempt += 1
            let result = await send(notification)
            let now = clock()
            // TooManyRequests is counted per device token; a broadcast's channel has none.
            let notBefore = notification.token.flatMap { token in
                throttle.withLock { throttle in
                    throttle.record(result, for: token, at: now)
                    return throttle.nextAllowedSend(for: token)
                }
            }
            let decision = policy.decide(
                result, attempt: attempt, now: now, expiration: notification.expiration, firstAttemptAt: firstAttemptAt,
                notBefore: notBefore)
            guard case .retry(let delay) = decision else { return (result, decision, attempt) }
            try? await Task.sleep(for: delay)
            if Task.isCancelled { return (result, .giveUp, attempt) }
        }
    }

    /// Stops the pool: queued notifications come back as `senderClosed`,
    /// requests on the wire get `shutdownGrace` to finish.
    package func shutdown() async {
        await pool.shutdown()
    }
}

/// One `APNsClient` per (endpoint, credential): connections are never shared
/// between signing keys or certificates (UnrelatedKeyIdInToken otherwise), and
/// every app using the same key shares its connections and its provider token.
package final class APNsClients: Sendable {
    private let configuration: APNsClientConfiguration
    private let tokenCache: ProviderTokenCache
    private let logger: Logger
    private let metrics: APNsMetrics?
    private let clients = Locked<[String: APNsClient]>([:])

    package init(
        configuration: APNsClientConfiguration = APNsClientConfiguration(),
        tokenCache: ProviderTokenCache = ProviderTokenCache(clock: SystemClock()),
        logger: Logger = Logger(label: "apns"),
        metrics: APNsMetrics? = nil
    ) {
        self.configuration = configuration
        self.tokenCache = tokenCache
        self.logger = logger
        self.metrics = metrics
    }

    package func client(endpoint: APNsEndpoint, credentials: APNsCredentials) throws(APNsSenderError) -> APNsClient {
        let key = endpoint.baseURL + " " + (endpoint.caFile ?? "") + " " + credentials.poolIdentity
        let result: Result<APNsClient, APNsSenderError> = clients.withLock { clients in
            if let existing = clients[key] { return .success(existing) }
            do throws(APNsSenderError) {
                let client = try APNsClient(
                    endpoint: endpoint, credentials: credentials, configuration: configuration, tokenCache: tokenCache,
                    logger: logger, metrics: metrics)
                clients[key] = client
                return .success(client)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    package func shutdown() async {
        let all = clients.withLock { clients in
            let all = Array(clients.values)
            clients.removeAll()
            return all
        }
        for client in all { await client.shutdown() }
    }
}
