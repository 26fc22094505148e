import Foundation
import PushfanMessages
import PushfanSupport

/// The device store, on SQLite (embedded default) or PostgreSQL (at scale), with the same
/// behaviour on both. It opens the database, applies migrations and hands out one type per
/// concern, all over the same connections:
///
/// - `apps`: apps and credentials (`AppDirectory`)
/// - `devices`: registration, import, unregistering, token hygiene (`DeviceDirectory`)
/// - `audience`: saved segments, counts, shards and pages (`AudienceReader`)
/// - `campaigns`: campaign rows and their lifecycle (`CampaignRegistry`)
/// - `waves`: tasks parked until their time: zone waves and quiet-hours holds (`CampaignWaves`)
/// - `idempotency`: API requests' idempotency keys and their answers (`IdempotencyKeys`)
/// - `sdkDevices`: devices as a client SDK describes them, as JSON (`SDKDeviceDocuments`)
/// - `ledger`: claims and final outcomes per device (`DeliveryLedger`)
/// - `templates`: apps' stored notification templates (`NotificationTemplates`)
/// - `frequency`: pushes admitted under apps' frequency caps, and the admission (`FrequencyLedger`)
/// - `providerTokens`: APNs provider tokens shared by workers (`ProviderTokenStore`)
/// - `operatorLog`: the append-only record of operator calls (`OperatorLog`)
/// - `adminKeys`: scoped keys for operators and tools (`AdminKeys`)
/// - `dashboard`: the live dashboard's tallies and their results-topic offsets (`DashboardTallies`)
/// - `tokens`: devices' tokens of other kinds than alert: VoIP, Live Activity… (`DeviceTokens`)
/// - `channels`: apps' broadcast channels (`BroadcastChannels`)
///
/// Every call runs on the store's own serial queues, never on Swift's cooperative pool,
/// because SQLite and libpq calls block. Dialect differences live in `SQLiteBackend` and
/// `PostgresBackend` only.
package final class DeviceStore: Sendable {
    private let executor: StoreExecutor
    /// Where the store lives, with any password removed (safe to log).
    package let location: String
    package let apps: AppDirectory
    package let devices: DeviceDirectory
    package let audience: AudienceReader
    package let campaigns: CampaignRegistry
    package let waves: CampaignWaves
    package let idempotency: IdempotencyKeys
    package let sdkDevices: SDKDeviceDocuments
    package let ledger: DeliveryLedger
    package let frequency: FrequencyLedger
    package let templates: NotificationTemplates
    package let providerTokens: ProviderTokenStore
    package let operatorLog: OperatorLog
    package let adminKeys: AdminKeys
    package let dashboard: DashboardTallies
    package let tokens: DeviceTokens
    package let engagement: EngagementTallies
    package let channels: BroadcastChannels
    package let users: Users
    /// Export and erasure of what is kept about a person.
    package let personalData: PersonalData

    /// Opens `sqlite:PATH` or a `postgres://` / `postgresql://` URL and applies migrations.
    /// Rows are stamped with `clock`'s wall time unless a call says its own `now`.
    package static func open(_ url: String, logger: Logger, clock: any ServiceClock) async throws(StoreError) -> DeviceStore {
        let backend: any SQLBackend
        let location: String
        if url.hasPrefix("sqlite:") {
            // sqlite:PATH[?busy_timeout_ms=N]
            let parts = url.dropFirst("sqlite:".count).split(separator: "?", maxSplits: 1)
            let path = parts.first.map(String.init) ?? ""
            guard !path.isEmpty else { throw StoreError.invalidInput("database URL 'sqlite:' needs a path, e.g. sqlite:pushfan.db") }
            var busyTimeout = Duration.seconds(5)
            if parts.count == 2 {
                guard parts[1].hasPrefix("busy_timeout_ms="), let millis = Int(parts[1].dropFirst("busy_timeout_ms=".count)), millis >= 0 else {
                    throw StoreError.invalidInput("the only SQLite option is busy_timeout_ms=N, got '\(parts[1])'")
                }
                busyTimeout = .milliseconds(millis)
            }
            backend = SQLiteBackend(path: path, busyTimeout: busyTimeout)
            location = url
        } else if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            backend = PostgresBackend(url: url, logger: logger)
            location = PostgresConnection.redact(url)
        } else {
            // Not echoed whole: a mistyped scheme may still carry a password.
            throw StoreError.invalidInput("database must be sqlite:PATH or a postgres:// URL, got one starting '\(url.prefix { $0 != ":" }.prefix(20))'")
        }
        let store = DeviceStore(executor: try await StoreExecutor.make(backend: backend, clock: clock), location: location)
        let applied = try await store.migrate()
        if !applied.isEmpty { logger.notice("store.migrated", ["store.versions": applied.map(String.init).joined(separator: ","), "store.location": store.location]) }
        return store
    }

    private init(executor: StoreExecutor, location: String) {
        self.executor = executor
        self.location = location
        apps = AppDirectory(executor: executor)
        devices = DeviceDirectory(executor: executor)
        audience = AudienceReader(executor: executor)
        campaigns = CampaignRegistry(executor: executor)
        waves = CampaignWaves(executor: executor)
        idempotency = IdempotencyKeys(executor: executor)
        sdkDevices = SDKDeviceDocuments(executor: executor)
        ledger = DeliveryLedger(executor: executor)
        frequency = FrequencyLedger(executor: executor)
        templates = NotificationTemplates(executor: executor)
        providerTokens = ProviderTokenStore(executor: executor)
        operatorLog = OperatorLog(executor: executor)
        adminKeys = AdminKeys(executor: executor)
        dashboard = DashboardTallies(executor: executor)
        tokens = DeviceTokens(executor: executor)
        engagement = EngagementTallies(executor: executor)
        channels = BroadcastChannels(executor: executor)
        users = Users(executor: executor)
        personalData = PersonalData(executor: executor)
    }

    /// The store's clock, for callers that stamp what they pass to it.
    package var clock: any ServiceClock { executor.clock }

    /// Times every store call and counts its errors in `registry`, by call
    /// (`pushfan_store_call_duration_seconds`, `pushfan_store_errors_total`). Once per process.
    package func exportMetrics(to registry: MetricsRegistry) {
        let metrics = StoreCallMetrics(
            durations: registry.histogram(
                "pushfan_store_call_duration_seconds", "Device store calls, from queued to answered, by call (the concern and its method).", labels: ["call"]),
            errors: registry.counter("pushfan_store_errors_total", "Device store calls that failed, by call and error code (unavailable, database, ...).", labels: ["call", "code"]))
        executor.metrics.withLock { $0 = metrics }
    }

    /// Applies pending migrations; returns the versions applied now.
    @discardableResult
    package func migrate() async throws(StoreError) -> [Int] {
        let backend = executor.backend
        let now = executor.clock.wallMillis
        return try await executor.run { connection throws(StoreError) in try Schema.migrate(connection, backend, now: now) }
    }

    package func schemaVersion() async throws(StoreError) -> Int {
        try await executor.run { connection throws(StoreError) in
            let version: Int64?? = try connection.queryOne("SELECT MAX(version) FROM schema_migrations") { $0.int(0) }
            return Int((version ?? nil) ?? 0)
        }
    }
}
