internal import CEpoll
import Foundation
import PushfanCrypto
import PushfanSupport
import Synchronization

/// How the simulator authenticates providers.
package enum SimAuthMode: Sendable {
    /// Token auth: JWTs checked by the authority (registered keys, or any key).
    case token(ProviderAuthority)
    /// No provider authentication at all (`--no-auth`). Certificate auth is separate:
    /// `SimConfiguration.clientCAFile`.
    case none
}

/// How clients connect.
package enum SimTransport: Sendable {
    /// TLS with a generated CA and certificate for localhost.
    case generatedTLS
    /// TLS with a certificate chain and key from PEM files.
    case tlsFiles(certificate: String, key: String)
    /// Cleartext HTTP/2 with prior knowledge (h2c).
    case h2c
}

/// Everything fixed at start.
package struct SimConfiguration: Sendable {
    /// IPv4 or IPv6 address to listen on; "localhost" means 127.0.0.1.
    package var host = "127.0.0.1"
    /// 0 picks a free port.
    package var port = 0
    /// Event-loop threads; default one per core.
    package var threads = ProcessInfo.processInfo.activeProcessorCount
    package var transport: SimTransport = .generatedTLS
    package var auth: SimAuthMode = .none
    /// Certificate auth: CAs (PEM file) that sign provider certificates. A connection with a
    /// verified client certificate may push to the certificate's topic (its subject UID)
    /// without a JWT; connections without one are judged by `auth`. TLS only.
    package var clientCAFile: String?
    package var rules = DeviceRules()
    /// Append one NDJSON line per accepted notification here.
    package var logFile: String?
    /// Each log line also carries the request body, as a JSON string (`payload`): what a
    /// device would get, for tests that check content on the wire.
    package var logPayloads = false
    /// Sandbox (development) mode adds `apns-unique-id` to successful responses, as Apple's
    /// sandbox does. Default on.
    package var sandbox = true
    package var faults = FaultSettings()

    package init() {}
}

/// An HTTP/2 server that behaves like APNs' provider API (see docs/apns-sim.md).
///
/// Threads: `threads` event loops, each an epoll instance on a dedicated thread (never
/// Swift's cooperative pool). The first loop also owns the listening socket and hands new
/// connections to the loops in turn, so a few long-lived connections (as APNs clients use)
/// spread evenly. Everything a loop touches per request is its own (connections, token
/// cache, counters, log buffer); shared state is the provider authority (locked only for a
/// token not seen before on that loop), the fault settings (copied by each loop when their
/// version changes) and the statistics (each loop's behind its own lock, merged on read).
package final class APNsSimulator: Sendable {
    package let configuration: SimConfiguration
    /// The CA clients must trust with the generated certificate (nil otherwise).
    package let certificateAuthorityPEM: String?
    /// The port actually listened on.
    package let port: Int
    /// Broadcast channels (iOS 18), shared by the loops.
    package let channels = SimChannels()

    let tls: TLSServerContext?
    let loops: [EventLoop]
    let logDescriptor: Int32
    private let faults: Locked<FaultSettings>
    let faultsVersion = Atomic<Int>(0)
    private let threadsDone: [DispatchSemaphore]
    private let stopped = Atomic<Bool>(false)

    /// Binds and starts the loops; returns once the port accepts connections.
    package init(configuration: SimConfiguration) throws(SimConfigurationError) {
        self.configuration = configuration
        // A write to a connection the client already closed must be an error (EPIPE) for
        // that connection, not SIGPIPE for the process. OpenSSL writes to the socket itself,
        // so MSG_NOSIGNAL alone would not cover TLS.
        signal(SIGPIPE, SIG_IGN)
        switch configuration.transport {
        case .h2c:
            tls = nil
        case .generatedTLS:
            do { tls = try TLSServerContext() } catch { throw SimConfigurationError("TLS: \(error.description)") }
        case .tlsFiles(let certificate, let key):
            do { tls = try TLSServerContext(certificateFile: certificate, keyFile: key) } catch { throw SimConfigurationError("TLS: \(error.description)") }
        }
        if let clientCAFile = configuration.clientCAFile {
            guard let tls else { throw SimConfigurationError("certificate auth needs TLS; leave out --h2c") }
            do { try tls.verifyClientCertificates(caFile: clientCAFile) } catch { throw SimConfigurationError("TLS: \(error.description)") }
        }
        certificateAuthorityPEM = tls?.certificateAuthorityPEM
        if let logFile = configuration.logFile {
            let fd = open(logFile, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw SimConfigurationError("cannot open the log file \(logFile) (errno \(errno))") }
            logDescriptor = fd
        } else {
            logDescriptor = -1
        }
        let listener = try Self.listen(host: configuration.host, port: configuration.port)
        port = listener.port
        faults = Locked(configuration.faults)
        let count = max(1, configuration.threads)
        var loops: [EventLoop] = []
        do {
            for index in 0..<count { loops.append(try EventLoop(index: index, listener: index == 0 ? listener.fd : -1)) }
        } catch {
            close(listener.fd)
            throw error
        }
        self.loops = loops
        threadsDone = loops.map { _ in DispatchSemaphore(value: 0) }
        for (loop, done) in zip(loops, threadsDone) {
            loop.simulator = self
            LoopThread.start(name: "pushfan.apns-sim.\(loop.index)", done: done) { loop.run() }
        }
    }

    /// Stops the loops, closes every connection and the listener, and waits for the threads.
    package func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for loop in loops { loop.requestStop() }
        for done in threadsDone { done.wait() }
        if logDescriptor >= 0 { close(logDescriptor) }
    }

    deinit { stop() }

    // MARK: - Shared state

    package var faultSettings: FaultSettings { faults.withLock { $0 } }

    /// Applies control JSON (see `FaultSettings.apply`) and returns the new settings.
    @discardableResult
    package func applyControl(_ object: [String: Any]) throws(SimConfigurationError) -> FaultSettings {
        let result: Result<FaultSettings, SimConfigurationError> = faults.withLock { settings in
            do throws(SimConfigurationError) {
                try settings.apply(json: object)
                return .success(settings)
            } catch {
                return .failure(error)
            }
        }
        let settings = try result.get()
        faultsVersion.add(1, ordering: .releasing)
        for loop in loops { loop.wake() }
        return settings
    }

    /// The merged statistics.
    package func stats() -> SimStatsSnapshot {
        let threads = loops.map { $0.stats.withLock { $0 } }
        var changes: [String: Int] = [:]
        if case .token(let authority) = configuration.auth { changes = authority.tokenChanges() }
        var snapshot = SimStatsSnapshot(merging: threads, jwtChanges: changes)
        snapshot.channels = channels.count
        return snapshot
    }

    /// Clears the statistics (open connections stay counted).
    package func resetStats() {
        for loop in loops {
            loop.stats.withLock { stats in
                let open = stats.connectionsAccepted - stats.connectionsClosed
                stats = ThreadStats()
                stats.connectionsAccepted = open
            }
        }
        if case .token(let authority) = configuration.auth { authority.resetCounters() }
    }

    // MARK: - Listening

    private static func listen(host: String, port: Int) throws(SimConfigurationError) -> (fd: Int32, port: Int) {
        switch TCPListener.open(host: host, port: port) {
        case .success(let listener): return listener
        case .failure(let error): throw SimConfigurationError("--host \(error.description)")
        }
    }

    /// Hands an accepted socket to the next loop (round robin).
    private let nextLoop = Atomic<Int>(0)
    func assign(_ fd: Int32) {
        let index = nextLoop.add(1, ordering: .relaxed).oldValue % loops.count
        loops[index].adopt(fd)
    }
}
