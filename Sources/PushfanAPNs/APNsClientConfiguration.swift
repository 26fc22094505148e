import PushfanSupport

/// Settings of one connection pool (one endpoint and one credential).
package struct APNsClientConfiguration: Sendable, Hashable {
    /// An HTTP proxy to tunnel through (`http://host:port`, as libcurl's `CURLOPT_PROXY`
    /// takes it). nil: libcurl reads `https_proxy`, `HTTPS_PROXY` and `no_proxy`.
    package var proxy: String?
    /// Most HTTP/2 connections the pool opens. The pool opens them as the requests
    /// waiting for the wire need them (Little's law: the caller's rate times the round
    /// trip is what is in flight), each carrying up to the stream limit the server has
    /// shown, and closes those left idle. Default 16. Apple's advice: several connections
    /// for throughput, kept open. Urgent requests (transactional messages) have one more
    /// connection of their own, opened when the first comes.
    package var connections: Int = 16
    /// Most concurrent streams Pushfan runs on one connection. The server's
    /// current SETTINGS_MAX_CONCURRENT_STREAMS lowers it (APNs: 1 after a
    /// rejection, 1 for a new token-auth connection, then 500–1,500). Default 1,000.
    package var streamsPerConnection: Int = 1_000
    /// Notifications accepted but not yet written before `send` waits for room:
    /// the back-pressure toward the caller. Default 10,000.
    package var maxQueued: Int = 10_000
    /// TCP and TLS handshake limit per connection. Default 10 s.
    package var connectTimeout: Duration = .seconds(10)
    /// Limit for one request from its start to the end of the response, waiting
    /// for a stream included. Default 30 s.
    package var requestTimeout: Duration = .seconds(30)
    /// A connection unused for this long is closed rather than kept; the next
    /// request opens a new one. Default 60 s (as Pushy).
    package var idleTimeout: Duration = .seconds(60)
    /// HTTP/2 PING interval on connections while the pool has transfers running,
    /// so a dead peer is noticed before a request times out. Default 15 s (as apns2).
    package var pingInterval: Duration = .seconds(15)
    /// First delay before connecting again after a connection attempt failed;
    /// doubled per consecutive failure up to `reconnectMaxDelay`, with full
    /// jitter, so a fleet of workers never storms Apple with connects. Default 100 ms.
    package var reconnectBaseDelay: Duration = .milliseconds(100)
    /// Default 30 s.
    package var reconnectMaxDelay: Duration = .seconds(30)
    /// How long `shutdown` lets requests on the wire finish. Default 10 s.
    package var shutdownGrace: Duration = .seconds(10)

    package init() {}

    /// Requests the pool keeps on the wire at once.
    package var maxInFlight: Int { connections * streamsPerConnection }

    func validated() throws(APNsSenderError) -> APNsClientConfiguration {
        guard (1...64).contains(connections) else {
            throw .invalidConfiguration("connections must be 1 to 64; found \(connections)")
        }
        guard (1...10_000).contains(streamsPerConnection) else {
            throw .invalidConfiguration("streams per connection must be 1 to 10000; found \(streamsPerConnection)")
        }
        guard maxQueued >= 1 else { throw .invalidConfiguration("max queued must be at least 1; found \(maxQueued)") }
        for (name, value) in [
            ("connect timeout", connectTimeout), ("request timeout", requestTimeout), ("idle timeout", idleTimeout),
            ("ping interval", pingInterval), ("reconnect base delay", reconnectBaseDelay),
            ("reconnect max delay", reconnectMaxDelay),
        ] where value <= .zero {
            throw .invalidConfiguration("\(name) must be positive; found \(value)")
        }
        return self
    }
}
