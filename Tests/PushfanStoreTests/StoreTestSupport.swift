import Foundation
import PushfanMessages
import PushfanSegments
@testable import PushfanStore
import PushfanSupport
import PushfanTestSupport
import Testing

/// The backends every store test runs on. PostgreSQL needs a server: scripts/test starts a
/// private one (scripts/with-postgres) and sets PUSHFAN_TEST_POSTGRES. When the test script
/// requires it (PUSHFAN_REQUIRE_POSTGRES=1), a missing server fails the tests instead of
/// skipping them.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres

    var testDescription: String { rawValue }

    static var enabled: [Backend] {
        let environment = ProcessInfo.processInfo.environment
        if environment["PUSHFAN_TEST_POSTGRES"] != nil || environment["PUSHFAN_REQUIRE_POSTGRES"] == "1" { return [.sqlite, .postgres] }
        return [.sqlite]
    }

    /// A fresh, empty database of this kind, as a URL for `DeviceStore.open`.
    func freshDatabase() throws -> String {
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return "sqlite:" + directory.appendingPathComponent("devices.db").path
        case .postgres:
            guard let maintenance = ProcessInfo.processInfo.environment["PUSHFAN_TEST_POSTGRES"] else {
                throw TestFailure("PUSHFAN_TEST_POSTGRES is not set: run the tests through scripts/test (scripts/with-postgres)")
            }
            let name = "pushfan_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
            let connection = try PostgresConnection(url: maintenance, logger: quietLogger)
            try connection.executeScript("CREATE DATABASE \(name)")
            var components = URLComponents(string: maintenance)!
            components.path = "/\(name)"
            return components.string!
        }
    }

    func openFresh() async throws -> DeviceStore {
        try await DeviceStore.open(try freshDatabase(), logger: quietLogger, clock: SystemClock())
    }

    /// A number read straight from the database at `url`, past the store's API: for checks
    /// the API cannot make, such as "no tag row outlived its device".
    func rawCount(_ url: String, _ sql: String) throws -> Int {
        let connection: any SQLConnection = switch self {
        case .sqlite: try SQLiteConnection(path: String(url.dropFirst("sqlite:".count)))
        case .postgres: try PostgresConnection(url: url, logger: quietLogger)
        }
        return Int(try connection.queryOne(SQLStatement(stringLiteral: sql)) { $0.int(0) ?? -1 } ?? -1)
    }
}

let quietLogger = Logger(label: "test", threshold: .error)



/// A synthetic device in two forms: what is registered, and what the reference evaluator sees.
struct SyntheticDevice {
    let registration: DeviceRegistration
    let reference: SegmentDevice
}

enum Synthetic {
    static let locales = ["en_US", "en_GB", "de_DE", "de_AT", "fr_FR", "ja_JP", nil]
    static let timezones = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", nil]
    static let tags = ["sports", "news", "sale-alerts", "vip", "beta"]
    static let appVersions = ["2.3", "2.3.0", "2.9.1", "2.10", "3.0.0-beta", nil]
    static let osVersions = ["16.7", "17.4.1", "17.5", "18.0", nil]
    static let plans = ["free", "pro", "team"]

    static func token(_ index: Int) -> String { String(format: "%064x", index + 1) }

    static func devices(count: Int, seed: UInt64 = 42, now: Int64) -> [SyntheticDevice] {
        var random = SeededGenerator(seed: seed)
        return (0..<count).map { index in
            var registration = DeviceRegistration(deviceID: "device-\(index)", token: token(index))
            registration.environment = Bool.random(using: &random) ? .production : (index % 5 == 0 ? .sandbox : .production)
            registration.locale = locales.randomElement(using: &random)!
            registration.timezone = timezones.randomElement(using: &random)!
            registration.appVersion = appVersions.randomElement(using: &random)!
            registration.osVersion = osVersions.randomElement(using: &random)!
            registration.tags = tags.filter { _ in Int.random(in: 0..<3, using: &random) == 0 }
            var attributes: [String: JSONValue] = [:]
            if Bool.random(using: &random) { attributes["plan"] = .string(plans.randomElement(using: &random)!) }
            if Bool.random(using: &random) { attributes["visits"] = .int(Int64.random(in: 0..<50, using: &random)) }
            if index % 7 == 0 { attributes["score"] = .number(Double(index % 13) / 2) }
            if index % 11 == 0 { attributes["visits"] = .string("many") }
            registration.attributes = attributes
            registration.seenAt = now - Int64.random(in: 0..<(60 * 86_400_000), using: &random)
            let reference = SegmentDevice(
                tags: Set(registration.tags), locale: registration.locale, timezone: registration.timezone,
                environment: registration.environment.rawValue, appVersion: registration.appVersion, osVersion: registration.osVersion,
                attributes: attributes, lastSeenAt: registration.seenAt!)
            return SyntheticDevice(registration: registration, reference: reference)
        }
    }
}

extension DeviceStore {
    /// Registers a test app with token credentials.
    func addTestApp(_ app: String = "shop-ios", rate: Int = 1000) async throws {
        _ = try await apps.add(AppRegistration(app: app, topic: "com.example.shop", credentials: .token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: "/keys/k.p8"), ratePerSecond: rate))
    }

    /// Imports `count` synthetic devices (seen before `now`) into the test app and returns
    /// them as one page of targets, in row-key order.
    @discardableResult
    func importSynthetic(_ count: Int, now: Int64) async throws -> [DeviceTarget] {
        _ = try await devices.importDevices(app: "shop-ios", try Synthetic.devices(count: count, now: now).map { try Validation.device($0.registration, now: clock.wallMillis) })
        return try await audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: count, now: clock.wallMillis)
    }

    /// Every matching device through shards and pages, as the pipeline reads them.
    func expandAll(app: String, segment: SegmentExpression?, shardSize: Int, pageSize: Int, now: Int64) async throws -> [DeviceTarget] {
        var all: [DeviceTarget] = []
        for shard in try await audience.shards(app: app, size: shardSize) {
            var cursor: Int64?
            while true {
                let page = try await audience.page(app: app, segment: segment, shard: shard, cursor: cursor, limit: pageSize, now: now)
                all += page
                guard page.count == pageSize, let last = page.last else { break }
                cursor = last.rowKey
            }
        }
        return all
    }
}

extension Sequence {
    /// `map` for an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

/// Ledger reads only the tests make: what is still claimed, and every final entry.
extension DeliveryLedger {
    func unfinished(campaign: CampaignKey, limit: Int = 1000) async throws -> [LedgerEntry] {
        try await entries("SELECT row_key, device_id, state, attempts, apns_id, status, reason FROM deliveries WHERE campaign = \(campaign) AND state = 'claimed' ORDER BY row_key LIMIT \(limit)")
    }

    func finished(campaign: CampaignKey, after cursor: Int64?, limit: Int = 1000) async throws -> [LedgerEntry] {
        try await entries("""
            SELECT row_key, device_id, state, attempts, apns_id, status, reason FROM deliveries
            WHERE campaign = \(campaign) AND state <> 'claimed' AND row_key > \(cursor ?? Int64.min) ORDER BY row_key LIMIT \(limit)
            """)
    }
}
