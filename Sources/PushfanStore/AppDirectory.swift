import PushfanAPNsModel
import PushfanCrypto
import PushfanMessages
import PushfanSchedule
import PushfanSupport

/// Apps and their credentials: the app key, APNs topic, credentials reference, send rate
/// and the app's secret (stored only as a salted hash).
package struct AppDirectory: Sendable {
    let executor: StoreExecutor
    private let recentSecrets: RecentReads<StoredSecrets>

    init(executor: StoreExecutor) {
        self.executor = executor
        recentSecrets = RecentSecrets.make(clock: executor.clock)
    }

    /// Adds an app and returns its secrets, shown once and stored only hashed.
    package func add(_ registration: AppRegistration) async throws(StoreError) -> AppSecrets {
        try Validation.appKey(registration.app)
        guard !registration.topic.isEmpty, registration.topic.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" }) else {
            throw StoreError.invalidInput("topic must be a bundle id like com.example.app, got '\(Validation.clip(registration.topic))'")
        }
        guard (1...1_000_000).contains(registration.ratePerSecond) else {
            throw StoreError.invalidInput("rate must be between 1 and 1000000 per second, got \(registration.ratePerSecond)")
        }
        if let zone = registration.timeZone { try Validation.timeZone(zone) }
        if let category = registration.defaultCategory { try Self.checkCategory(category) }
        let secret = SecretHash.generateSecret()
        let hashed = SecretHash(secret: secret)
        let appSecret = SecretHash.generateSecret()
        let appHashed = SecretHash(secret: appSecret)
        let (team, key, keyFile, certFile, certKey): (String?, String?, String?, String?, String?) =
            switch registration.credentials {
            case .token(let teamID, let keyID, let file): (teamID, keyID, file, nil, nil)
            case .certificate(let certificate, let keyPath): (nil, nil, nil, certificate, keyPath)
            }
        let now = executor.clock.wallMillis
        let inserted = try await executor.run { connection throws(StoreError) in
            if let twin = try connection.queryOne("SELECT app FROM apps WHERE lower(app) = lower(\(registration.app)) AND app <> \(registration.app)", { $0.text(0) ?? "" }) {
                throw StoreError.conflict("app \(registration.app) differs from the existing app \(twin) only in case")
            }
            return try connection.execute("""
                INSERT INTO apps (app, secret_salt, secret_hash, topic, team_id, key_id, key_file, cert_file, cert_key_file, environment, rate_per_second, created_at, time_zone,
                                  app_secret_salt, app_secret_hash, default_category, frequency_caps)
                VALUES (\(registration.app), \(hashed.salt), \(hashed.hash), \(registration.topic), \(.optional(team)), \(.optional(key)), \(.optional(keyFile)),
                        \(.optional(certFile)), \(.optional(certKey)), \(registration.environment.rawValue), \(registration.ratePerSecond), \(now),
                        \(.optional(registration.timeZone)), \(appHashed.salt), \(appHashed.hash), \(.optional(registration.defaultCategory)),
                        \(.optional(Self.capsText(registration.frequencyCaps))))
                ON CONFLICT (app) DO NOTHING
                """)
        }
        guard inserted == 1 else { throw StoreError.conflict("app \(registration.app) already exists") }
        return AppSecrets(master: secret, application: appSecret)
    }

    /// The app with this key; nil when there is none.
    package func get(_ key: String) async throws(StoreError) -> AppRecord? {
        try await executor.run { connection throws(StoreError) in
            try connection.queryOne(Self.columns + " WHERE app = \(key)", Self.record)
        }
    }

    private static let columns: SQLStatement =
        "SELECT app, topic, team_id, key_id, key_file, cert_file, cert_key_file, environment, rate_per_second, created_at, time_zone, default_category, frequency_caps FROM apps"

    private static func record(_ row: any SQLRow) -> AppRecord {
        let credentials: APNsCredentialsReference =
            if let team = row.text(2), let keyID = row.text(3), let file = row.text(4) {
                .token(teamID: team, keyID: keyID, keyFile: file)
            } else {
                .certificate(certificateFile: row.text(5) ?? "", keyFile: row.text(6))
            }
        return AppRecord(
            app: row.text(0) ?? "", topic: row.text(1) ?? "", credentials: credentials,
            environment: APNsEnvironment(rawValue: row.text(7) ?? "") ?? .production,
            ratePerSecond: Int(row.int(8) ?? 0), createdAt: row.int(9) ?? 0, timeZone: row.text(10), defaultCategory: row.text(11),
            // Written only by `capsText`; a value edited by hand that does not read is no caps.
            frequencyCaps: (try? FrequencyCaps(parsing: row.text(12) ?? "")) ?? FrequencyCaps([]))
    }

    /// Sets the app's frequency caps (an empty set removes them). Workers apply a change
    /// within their app refresh (10 s).
    package func setFrequencyCaps(app: String, _ caps: FrequencyCaps) async throws(StoreError) {
        let changed = try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE apps SET frequency_caps = \(.optional(Self.capsText(caps))) WHERE app = \(app)")
        }
        guard changed == 1 else { throw StoreError.notFound("unknown app '\(app)'") }
    }

    /// The stored form, `2/1d,1/1h`; NULL for none.
    private static func capsText(_ caps: FrequencyCaps) -> String? { caps.isEmpty ? nil : caps.description }

    /// Sets (or, with nil, removes) the category of the app's alert campaigns that name none.
    package func setDefaultCategory(app: String, category: String?) async throws(StoreError) {
        if let category { try Self.checkCategory(category) }
        let changed = try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE apps SET default_category = \(.optional(category)) WHERE app = \(app)")
        }
        guard changed == 1 else { throw StoreError.notFound("unknown app '\(app)'") }
    }

    /// A category identifier as an app registers it (`UNNotificationCategory`): 1 to 255
    /// printable ASCII characters.
    static func checkCategory(_ category: String) throws(StoreError) {
        guard (1...255).contains(category.utf8.count), category.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw StoreError.invalidInput("default_category: must be 1 to 255 printable ASCII characters, got '\(Validation.clip(category))'")
        }
    }

    /// Which of the app's secrets `secret` is: the master secret (every call), the
    /// application secret (its devices only), or neither (nil, also for an unknown app). Both
    /// hashes are compared, in constant time, whatever matches, and an unknown app is compared
    /// against a made-up secret, so timing tells nothing about which app keys exist.
    /// A rotated secret's predecessor counts until its grace period ends.
    /// Hashes read within the last second answer a matching secret (`RecentSecrets`).
    package func authenticate(app: String, secret: String, now: Int64) async throws(StoreError) -> AppRole? {
        if let recent = recentSecrets.fresh(app), let role = recent.role(of: secret, now: now) { return role }
        let readAt = recentSecrets.now
        let stored = try await executor.run { connection throws(StoreError) in
            try connection.queryOne("""
                SELECT secret_salt, secret_hash, previous_secret_salt, previous_secret_hash, previous_secret_until,
                       app_secret_salt, app_secret_hash, previous_app_secret_salt, previous_app_secret_hash, previous_app_secret_until
                FROM apps WHERE app = \(app)
                """) { row in
                func hash(_ column: Int) -> SecretHash {
                    row.text(column).map { SecretHash(salt: $0, hash: row.text(column + 1) ?? "") } ?? StoredSecrets.nobody
                }
                return StoredSecrets(
                    master: hash(0), previousMaster: hash(2), previousMasterUntil: row.int(4) ?? 0,
                    application: hash(5), previousApplication: hash(7), previousApplicationUntil: row.int(9) ?? 0)
            }
        }
        guard let stored else {
            _ = StoredSecrets.unknownApp.role(of: secret, now: now)
            return nil
        }
        recentSecrets.keep(app, stored, readAt: readAt)
        return stored.role(of: secret, now: now)
    }

    /// Replaces one of an app's secrets and returns the new one (shown once). The old one
    /// keeps working for `grace`, so apps in the field and servers can move over; then it stops.
    package func rotate(app: String, _ role: AppRole, grace: Duration, now: Int64) async throws(StoreError) -> String {
        let secret = SecretHash.generateSecret()
        let hashed = SecretHash(secret: secret)
        let until = now + grace.milliseconds
        let changed = try await executor.run { connection throws(StoreError) in
            switch role {
            case .master:
                try connection.execute("""
                    UPDATE apps SET previous_secret_salt = secret_salt, previous_secret_hash = secret_hash, previous_secret_until = \(until),
                           secret_salt = \(hashed.salt), secret_hash = \(hashed.hash) WHERE app = \(app)
                    """)
            case .application:
                try connection.execute("""
                    UPDATE apps SET previous_app_secret_salt = app_secret_salt, previous_app_secret_hash = app_secret_hash,
                           previous_app_secret_until = \(until), app_secret_salt = \(hashed.salt), app_secret_hash = \(hashed.hash) WHERE app = \(app)
                    """)
            }
        }
        guard changed == 1 else { throw StoreError.notFound("app \(app) is not registered") }
        recentSecrets.forget(app)
        return secret
    }

    /// Every app, by key.
    package func list() async throws(StoreError) -> [AppRecord] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll(Self.columns + " ORDER BY app", Self.record)
        }
    }

    /// Replaces an app's APNs credentials reference (load them first: the store only keeps
    /// where they are).
    package func setCredentials(app: String, _ credentials: APNsCredentialsReference) async throws(StoreError) {
        let (team, key, keyFile, certFile, certKey): (String?, String?, String?, String?, String?) =
            switch credentials {
            case .token(let teamID, let keyID, let file): (teamID, keyID, file, nil, nil)
            case .certificate(let certificate, let keyPath): (nil, nil, nil, certificate, keyPath)
            }
        let changed = try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                UPDATE apps SET team_id = \(.optional(team)), key_id = \(.optional(key)), key_file = \(.optional(keyFile)),
                       cert_file = \(.optional(certFile)), cert_key_file = \(.optional(certKey)) WHERE app = \(app)
                """)
        }
        guard changed == 1 else { throw StoreError.notFound("app \(app) is not registered") }
    }

    /// Changes an app's send rate (per second, across all workers).
    package func setRate(app: String, ratePerSecond: Int) async throws(StoreError) {
        guard (1...1_000_000).contains(ratePerSecond) else {
            throw StoreError.invalidInput("rate must be between 1 and 1000000 per second, got \(ratePerSecond)")
        }
        let changed = try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE apps SET rate_per_second = \(ratePerSecond) WHERE app = \(app)")
        }
        guard changed == 1 else { throw StoreError.notFound("app \(app) is not registered") }
    }

    /// Checks an app's secret in constant time.
    package func verifySecret(app: String, secret: String) async throws(StoreError) -> Bool {
        let stored = try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT secret_salt, secret_hash FROM apps WHERE app = \(app)") { row in
                SecretHash(salt: row.text(0) ?? "", hash: row.text(1) ?? "")
            }
        }
        return stored?.matches(secret) ?? false
    }
}
