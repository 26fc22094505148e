import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport

/// `pushfan apps list`: every app with its topic, environment, rate and default zone.
struct AppsListCommand: Command {
    static let spec = CommandSpec(name: "apps list", summary: "List the apps with topic, environment, rate and default time zone", options: StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        print("app".padding(toLength: 24, withPad: " ", startingAt: 0) + " topic".padding(toLength: 33, withPad: " ", startingAt: 0) + " environment  rate/s  time zone")
        for app in try await store.apps.list() {
            print(app.app.padding(toLength: 24, withPad: " ", startingAt: 0) + " " + app.topic.padding(toLength: 32, withPad: " ", startingAt: 0) + " "
                + app.environment.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0) + String(format: " %7d", app.ratePerSecond) + "  " + (app.timeZone ?? "UTC"))
        }
        return 0
    }
}

/// `pushfan apps show --app KEY`: one app, with its credentials reference (never a secret).
struct AppsShowCommand: Command {
    static let spec = CommandSpec(
        name: "apps show", summary: "Show one app: topic, credentials reference, environment, rate, time zone (never its secrets)",
        options: [.app] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let key = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        guard let app = try await store.apps.get(key) else {
            printError("pushfan apps show: no app \(key) in the store")
            return 1
        }
        print("app \(app.app)")
        print("  topic        \(app.topic)")
        switch app.credentials {
        case .token(let team, let keyID, let file): print("  credentials  token auth: team \(team), key \(keyID), key file \(file)")
        case .certificate(let certificate, let keyFile): print("  credentials  certificate \(certificate)" + (keyFile.map { ", key \($0)" } ?? ""))
        }
        print("  environment  \(app.environment.rawValue)")
        print("  rate         \(app.ratePerSecond)/s")
        print("  time zone    \(app.timeZone ?? "UTC")")
        print("  category     \(app.defaultCategory ?? "none") (of alert campaigns that name none)")
        let caps = app.frequencyCaps
        print("  caps         \(caps.isEmpty ? "none" : caps.rules.map(\.description).joined(separator: ",") + (caps.perUser ? " (alert pushes per user, across its devices)" : " (alert pushes per device)"))")
        return 0
    }
}

/// `pushfan apps set-rate --app KEY --rate N`.
struct AppsSetRateCommand: Command {
    static let spec = CommandSpec(
        name: "apps set-rate", summary: "Change an app's send rate across all workers (workers take it up within their catalog refresh)",
        options: [.app, .option("rate", "N", "sends per second (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let key = try arguments.required("app")
        _ = try arguments.required("rate")
        let rate = try arguments.int("rate", default: 0, range: 1...1_000_000)
        let store = try await StoreOptions.open(arguments, context)
        try await store.apps.setRate(app: key, ratePerSecond: rate)
        print("app \(key): \(rate)/s")
        return 0
    }
}

/// `pushfan apps set-caps --app KEY --caps 2/1d,1/1h`.
struct AppsSetCapsCommand: Command {
    static let spec = CommandSpec(
        name: "apps set-caps", summary: "Set an app's frequency caps: at most N alert pushes per device per window, across its campaigns",
        discussion: """
            Rules are PUSHES/WINDOW, the window in minutes (m), hours (h) or calendar days (d) in
            the device's time zone, up to 30 days; all rules apply together: --caps 3/1d,1/1h.
            --caps none removes them. --per user counts every push to any device of a user (its
            user_id) together, so a user with three devices gets the cap, not three times it;
            devices without a user count alone. Workers take a change up within their catalog refresh;
            campaigns with options.ignore_frequency_caps (transactional sends) are not held back
            or counted (docs/messages.md).
            """,
        options: [
            .app, .option("caps", "RULES", "comma-separated rules, or none (required)"),
            .option("per", "device|user", "whose pushes the caps count (default device)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let key = try arguments.required("app")
        var caps = try parse(try arguments.required("caps"))
        switch arguments.value("per") ?? "device" {
        case "device": break
        case "user": caps = FrequencyCaps(caps.rules, perUser: true)
        case let other: throw UsageError("--per: device or user, got \(other)")
        }
        let store = try await StoreOptions.open(arguments, context)
        try await store.apps.setFrequencyCaps(app: key, caps)
        print("app \(key): frequency caps \(caps.isEmpty ? "none" : caps.description)")
        return 0
    }

    /// `--caps` as rules; a rule that does not read is a usage error naming it.
    static func parse(_ text: String) throws -> FrequencyCaps {
        if text == "none" { return FrequencyCaps([]) }
        do { return try FrequencyCaps(parsing: text) } catch { throw UsageError("--caps: \(error)") }
    }
}

/// `pushfan apps rotate-secret --app KEY --which master|application [--grace SECONDS]`.
struct AppsRotateSecretCommand: Command {
    static let spec = CommandSpec(
        name: "apps rotate-secret",
        summary: "Replace an app's master or application secret; the old one keeps working for --grace seconds",
        discussion: "Prints the new secret once. The old secret is accepted until the grace period ends (default 86400 s), so apps and servers can move over.",
        options: [
            .app, .option("which", "SECRET", "master or application (required)"),
            .option("grace", "SECONDS", "how long the old secret keeps working (default 86400; 0 stops it now)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let key = try arguments.required("app")
        guard let role = AppRole(rawValue: try arguments.required("which")) else { throw UsageError("--which must be master or application") }
        let grace = try arguments.int("grace", default: 86_400, range: 0...(30 * 86_400))
        let store = try await StoreOptions.open(arguments, context)
        let secret = try await store.apps.rotate(app: key, role, grace: .seconds(grace), now: store.clock.wallMillis)
        print("app \(key): new \(role.rawValue) secret: \(secret)")
        print("The old \(role.rawValue) secret works for \(grace) s more. The new one is shown once and stored only as a salted hash.")
        return 0
    }
}

/// `pushfan apps set-credentials --app KEY` with token or certificate auth, as `apps add`.
struct AppsSetCredentialsCommand: Command {
    static let spec = CommandSpec(
        name: "apps set-credentials",
        summary: "Replace an app's APNs credentials (checked first); workers take them up when they next re-read the app",
        options: [.app] + APNsOptions.storedCredentialSpecs + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let key = try arguments.required("app")
        guard let credentials = try AppsAddCommand.checkedCredentials(arguments, command: "apps set-credentials") else { return 1 }
        let store = try await StoreOptions.open(arguments, context)
        try await store.apps.setCredentials(app: key, credentials)
        print("app \(key): credentials replaced")
        return 0
    }
}

/// `pushfan apps add`: registers an app and prints its two secrets once.
struct AppsAddCommand: Command {
    static let spec = CommandSpec(
        name: "apps add",
        summary: "Add an app (app key, APNs topic and credentials, send rate); prints its two secrets once",
        discussion: """
            Token auth: --team-id, --key-id and --key-file (the .p8 key). Certificate auth: --cert
            (PEM, or PKCS#12 without --cert-key) and --cert-key. The credentials are loaded and
            checked before the app is stored: a .p8 key must be a readable P-256 (ES256) key, and
            team and key ids Apple's 10 characters of A-Z and 0-9. The master secret (server calls)
            and the application secret (ships in the app, registers devices only) are stored only
            as salted hashes; keep the printed values, they cannot be shown again.
            """,
        options: [
            .app,
            .option("topic", "BUNDLE", "bundle id, the APNs topic (required)"),
        ] + APNsOptions.storedCredentialSpecs + [
            .option("rate", "N", "sends per second across all workers (default 1000)"),
            .option("environment", "E", "production or sandbox (default production)"),
            .option("time-zone", "TZ", "IANA zone of devices that registered none, for local-time campaigns (default UTC)"),
            .option("default-category", "NAME", "notification category of the app's alert campaigns that name none (aps.category)"),
            .option("frequency-caps", "RULES", "at most N alert pushes per device per window, like 3/1d,1/1h (see apps set-caps)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        guard let credentials = try checkedCredentials(arguments, command: "apps add") else { return 1 }
        var registration = AppRegistration(
            app: try arguments.required("app"), topic: try arguments.required("topic"), credentials: credentials,
            environment: try APNsEnvironment(parsing: arguments.value("environment") ?? "production"),
            ratePerSecond: try arguments.int("rate", default: 1000, range: 1...1_000_000), timeZone: arguments.value("time-zone"))
        registration.defaultCategory = arguments.value("default-category")
        if let caps = arguments.value("frequency-caps") { registration.frequencyCaps = try AppsSetCapsCommand.parse(caps) }
        let store = try await StoreOptions.open(arguments, context)
        let secrets = try await store.apps.add(registration)
        print("app \(registration.app) added (topic \(registration.topic), \(registration.ratePerSecond)/s)")
        print("master secret: \(secrets.master)")
        print("application secret: \(secrets.application)")
        print("The master secret is for server calls (campaigns, segments, device lists); the application secret ships in the app and only registers its devices.")
        print("Both are shown once and stored only as salted hashes.")
        return 0
    }

    /// The credentials of --team-id/--key-id/--key-file or --cert/--cert-key, loaded and
    /// checked; nil (after saying why) when they cannot be used.
    static func checkedCredentials(_ arguments: ParsedArguments, command: String) throws -> APNsCredentialsReference? {
        guard let credentials = try APNsOptions.credentialsReference(arguments) else {
            throw UsageError("give --team-id/--key-id/--key-file (token auth) or --cert [--cert-key] (certificate auth)")
        }
        // Loaded now, so a wrong file fails here and not at the first send of a campaign.
        do {
            _ = try APNsCredentials.load(credentials)
        } catch {
            printError("pushfan \(command): the credentials cannot be used: \(error)")
            return nil
        }
        return credentials
    }
}
