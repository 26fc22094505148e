import Foundation
import PushfanAPNs
import PushfanCore
import PushfanStore

/// Options shared by commands that use the device store.
enum StoreOptions {
    static let specs: [OptionSpec] = [
        .option("database", "URL", "sqlite:PATH or postgres://... (default: $PUSHFAN_DATABASE or sqlite:pushfan.db)"),
    ]

    static func open(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> DeviceStore {
        try await DeviceStore.open(arguments.value("database") ?? context.configuration.database, logger: context.logger)
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
            .option("app", "KEY", "app key (required)"),
            .option("topic", "BUNDLE", "bundle id, the APNs topic (required)"),
        ] + credentialSpecs + [
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

    /// The flags of token and certificate auth, for every command that takes credentials.
    static let credentialSpecs: [OptionSpec] = [
        .option("team-id", "T", "Apple team id (token auth)"),
        .option("key-id", "K", "signing key id (token auth)"),
        .option("key-file", "F", ".p8 signing key file (token auth)"),
        .option("cert", "F", "client certificate, PEM or PKCS#12 (certificate auth)"),
        .option("cert-key", "F", "private key of the certificate, PEM"),
    ]

    /// The credentials of --team-id/--key-id/--key-file or --cert/--cert-key, loaded and
    /// checked; nil (after saying why) when they cannot be used.
    static func checkedCredentials(_ arguments: ParsedArguments, command: String) throws -> APNsCredentialsReference? {
        let credentials: APNsCredentialsReference
        if let team = arguments.value("team-id") {
            guard let key = arguments.value("key-id"), let file = arguments.value("key-file") else {
                throw UsageError("token auth needs --team-id, --key-id and --key-file together")
            }
            credentials = .token(teamID: team, keyID: key, keyFile: file)
        } else if let certificate = arguments.value("cert") {
            credentials = .certificate(certificateFile: certificate, keyFile: arguments.value("cert-key"))
        } else {
            throw UsageError("give --team-id/--key-id/--key-file (token auth) or --cert [--cert-key] (certificate auth)")
        }
        if case .token(let team, let key, _) = credentials {
            for (flag, value) in [("--team-id", team), ("--key-id", key)] where !ProviderSigningKey.hasAppleIDShape(value) {
                throw UsageError("\(flag) must be Apple's 10-character id of A-Z and 0-9 (like ABC123DEFG), got '\(value)'")
            }
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

/// `pushfan devices register`: what a client SDK does on launch.
struct DevicesRegisterCommand: Command {
    static let spec = CommandSpec(
        name: "devices register",
        summary: "Register or update one device (idempotent)",
        discussion: "A token registered before under another device id moves to this one.",
        options: [
            .option("app", "KEY", "app key (required)"),
            .option("token", "HEX", "APNs device token, hexadecimal (required)"),
            .option("device-id", "ID", "stable device id (default: the token)"),
            .option("environment", "E", "production or sandbox (default production)"),
            .option("locale", "L", "e.g. de_DE"),
            .option("timezone", "TZ", "IANA name, e.g. Europe/Berlin"),
            .option("quiet-hours", "HH:MM-HH:MM", "do not disturb (local time), e.g. 22:00-07:00: alert pushes wait until it ends"),
            .option("app-version", "V", "app version, e.g. 2.3.1"),
            .option("os-version", "V", "iOS version, e.g. 17.4"),
            .option("tag", "T", "a tag", repeatable: true),
            .option("attr", "K=V", "an attribute; numbers are stored as numbers", repeatable: true),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let token = try arguments.required("token")
        var registration = DeviceRegistration(deviceID: arguments.value("device-id") ?? token, token: token)
        registration.environment = try APNsEnvironment(parsing: arguments.value("environment") ?? "production")
        registration.locale = arguments.value("locale")
        registration.timezone = arguments.value("timezone")
        if let window = arguments.value("quiet-hours") {
            let ends = window.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard ends.count == 2 else { throw UsageError("--quiet-hours must look like 22:00-07:00, got '\(window)'") }
            registration.quietHours = try Validation.quietHours(start: ends[0], end: ends[1])
        }
        registration.appVersion = arguments.value("app-version")
        registration.osVersion = arguments.value("os-version")
        registration.tags = arguments.values("tag")
        for pair in arguments.values("attr") {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else { throw UsageError("--attr must look like name=value, got '\(pair)'") }
            let value = String(pair[pair.index(after: equals)...])
            registration.attributes[String(pair[..<equals])] = .inferred(from: value)
        }
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        let result = try await store.devices.register(app: app, registration)
        print("device \(registration.deviceID) \(result.created ? "registered" : "updated") (row \(result.rowKey))")
        if !result.tokenMovedFrom.isEmpty { print("token moved from device \(result.tokenMovedFrom.joined(separator: ", "))") }
        return 0
    }
}

struct DevicesUnregisterCommand: Command {
    static let spec = CommandSpec(
        name: "devices unregister",
        summary: "Stop sending to a device",
        options: [.option("app", "KEY", "app key (required)"), .option("device-id", "ID", "device id (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        let deviceID = try arguments.required("device-id")
        guard try await store.devices.unregister(app: try arguments.required("app"), deviceID: deviceID) else {
            printError("pushfan devices unregister: no device \(deviceID)")
            return 1
        }
        print("device \(deviceID) unregistered")
        return 0
    }
}

struct DevicesListCommand: Command {
    static let spec = CommandSpec(
        name: "devices list",
        summary: "List an app's devices in registration order",
        options: [
            .option("app", "KEY", "app key (required)"),
            .option("limit", "N", "how many (default 20)"),
            .option("after", "ROW", "continue after this row key"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        let limit = try arguments.int("limit", default: 20, range: 1...100_000)
        let after = try arguments.value("after").map { _ throws(UsageError) in Int64(try arguments.int("after", default: 0)) }
        let devices = try await store.devices.list(app: try arguments.required("app"), after: after, limit: limit)
        print(["row", "device id", "token", "env", "locale", "app", "status", "tags"].joined(separator: "\t"))
        for device in devices {
            print([
                String(device.rowKey), device.deviceID, String(device.token.prefix(12)) + "…", device.environment.rawValue,
                device.locale ?? "-", device.appVersion ?? "-", device.status.rawValue + (device.invalidReason.map { " (\($0))" } ?? ""),
                device.tags.joined(separator: ","),
            ].joined(separator: "\t"))
        }
        return 0
    }
}

/// `pushfan devices import`: streaming bulk import with per-line errors.
struct DevicesImportCommand: Command {
    static let spec = CommandSpec(
        name: "devices import",
        summary: "Import devices from NDJSON or CSV, reporting bad lines and importing the rest",
        discussion: """
            NDJSON: one object per line with device_id, token and optional environment, locale,
            timezone, app_version, os_version, tags (array), attributes (object), last_seen (ms).
            CSV: a header line naming device_id, token and any of the other columns; tags are
            separated by ';'; attr.NAME columns become attributes. Bad lines are listed with their
            line number and reason; exit code 1 when any line was rejected.
            """,
        positionals: ["FILE"],
        options: [
            .option("app", "KEY", "app key (required)"),
            .option("format", "F", "ndjson or csv (default: from the file name, else ndjson)"),
            .option("batch", "N", "devices per batch (default 50000); a batch is written in one transaction, on PostgreSQL in one per connection"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let path = arguments.positionals[0]
        let app = try arguments.required("app")
        let format: DeviceImportParser.Format
        switch arguments.value("format") {
        case nil: format = path.lowercased().hasSuffix(".csv") ? .csv : .ndjson
        case let name?:
            guard let parsed = DeviceImportParser.Format(rawValue: name) else { throw UsageError("--format must be ndjson or csv, got '\(name)'") }
            format = parsed
        }
        // Large batches: with random tokens (as real ones are) each commit writes every index
        // page the batch touched, so fewer commits write far less (measured at 1M devices on
        // SQLite: 45 s with batches of 5,000, 29 s with 50,000; about 120 MB of memory).
        let batchSize = try arguments.int("batch", default: 50_000, range: 1...1_000_000)
        let descriptor = path == "-" ? 0 : open(path, O_RDONLY)
        guard descriptor >= 0 else { throw UsageError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { if descriptor > 0 { close(descriptor) } }
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            throw UsageError("\(path) is a directory; give a file of NDJSON or CSV lines")
        }

        let store = try await StoreOptions.open(arguments, context)
        guard try await store.apps.get(app) != nil else {
            printError("pushfan devices import: unknown app '\(app)'; add it with `pushfan apps add`")
            return 1
        }
        var parser = DeviceImportParser(format: format)
        var reader = LineReader(descriptor: descriptor)
        let longest = reader.maxLineBytes
        var batch: [ValidatedDevice] = []
        batch.reserveCapacity(batchSize)
        var lineNumber = 0, imported = 0
        var rejections = ImportRejections()
        var headerRefused = false
        let progress = ProgressLine()
        let started = ContinuousClock.now
        var writing: Task<Int, any Error>?
        while !headerRefused, reader.next({ input in
            lineNumber += 1
            guard case .text(let bytes) = input else {
                rejections.add(line: lineNumber, reason: "longer than the limit of \(longest - 1) bytes")
                headerRefused = parser.needsHeader
                return
            }
            let beforeHeader = parser.needsHeader
            do {
                if let device = try parser.parse(bytes: bytes) { batch.append(device) }
            } catch {
                rejections.add(line: lineNumber, reason: "\(error)")
                headerRefused = beforeHeader
            }
        }) {
            if batch.count >= batchSize {
                // Parse the next batch while this one is written.
                if let previous = writing { imported += try await previous.value }
                let full = batch
                writing = Task { try await store.devices.importDevices(app: app, full) }
                batch.removeAll(keepingCapacity: true)
                let seconds = max((ContinuousClock.now - started).seconds, 0.001)
                progress.show("imported \(imported) devices, \(rejections.total) bad lines (\(Int(Double(imported) / seconds))/s)")
            }
        }
        if let previous = writing { imported += try await previous.value }
        if !batch.isEmpty { imported += try await store.devices.importDevices(app: app, batch) }
        // Segment counts and expansions plan with statistics of the table as it is now.
        if imported > 0 { try await store.devices.refreshStatistics() }
        progress.finish()
        for line in rejections.report(restImported: !headerRefused) { printError(line) }
        if headerRefused {
            printError("pushfan devices import: the CSV header on line \(lineNumber) was refused, so no line after it can be read; nothing was imported")
            return 1
        }
        print("imported \(imported) devices, rejected \(rejections.total) lines")
        return rejections.total == 0 ? 0 : 1
    }
}

/// Bad lines of an import, grouped by what is wrong: thousands of lines with one mistake are
/// one entry with its count and first line numbers, not thousands of lines of output.
struct ImportRejections {
    private struct Group {
        var count = 0
        var lines: [Int] = []
        var example: String
    }

    private var groups: [String: Group] = [:]
    private var order: [String] = []
    private(set) var total = 0
    /// Line numbers listed per group.
    static let linesShown = 5
    /// Groups listed; the rest are summed up.
    static let groupsShown = 20

    mutating func add(line: Int, reason: String) {
        total += 1
        let kind = Self.kind(of: reason)
        if groups[kind] == nil {
            groups[kind] = Group(example: reason)
            order.append(kind)
        }
        groups[kind]!.count += 1
        if groups[kind]!.lines.count < Self.linesShown { groups[kind]!.lines.append(line) }
    }

    /// A reason with its quoted values taken out, so `got 'a/b'` and `got 'c#d'` group together.
    static func kind(of reason: String) -> String {
        var kind = ""
        var open: Character?
        for character in reason {
            if let quote = open {
                if character == quote {
                    kind.append(character)
                    open = nil
                }
            } else {
                kind.append(character)
                if character == "'" || character == "\"" {
                    open = character
                    kind.append("…")
                }
            }
        }
        return kind
    }

    /// Most frequent first: `1000 lines (2, 5, 9, 11, 14, …): reason`, then a summary.
    func report(restImported: Bool = true) -> [String] {
        guard total > 0 else { return [] }
        let ranked = order.enumerated().sorted { (groups[$0.element]!.count, -$0.offset) > (groups[$1.element]!.count, -$1.offset) }.map(\.element)
        var lines: [String] = []
        for kind in ranked.prefix(Self.groupsShown) {
            let group = groups[kind]!
            let numbers = group.lines.map(String.init).joined(separator: ", ") + (group.count > group.lines.count ? ", …" : "")
            let noun = group.count == 1 ? "line" : "lines"
            let example = kind == group.example ? "" : " (line \(group.lines[0]): \(group.example))"
            lines.append("\(group.count) \(noun) (\(numbers)): \(group.count == 1 ? group.example : kind + example)")
        }
        if ranked.count > Self.groupsShown {
            let rest = ranked.dropFirst(Self.groupsShown).reduce(0) { $0 + groups[$1]!.count }
            lines.append("\(rest) more lines with \(ranked.count - Self.groupsShown) other reasons")
        }
        lines.append("\(total) bad \(total == 1 ? "line" : "lines") in \(groups.count) \(groups.count == 1 ? "kind" : "kinds")" + (restImported ? "; the rest was imported" : ""))
        return lines
    }
}

/// Segment commands share the expression or saved-segment lookup.
enum SegmentInput {
    static func expression(_ arguments: ParsedArguments, _ store: DeviceStore, app: String) async throws -> SegmentExpression? {
        var text = arguments.positionals.first
        if let name = arguments.value("name") {
            guard let saved = try await store.audience.savedSegment(app: app, name: name) else { throw UsageError("no saved segment '\(name)' for app \(app)") }
            text = saved
        }
        guard let text, text.trimmingCharacters(in: .whitespaces) != "all" else { return nil }
        do {
            return try SegmentParser.parse(text)
        } catch {
            throw UsageError("segment \(error)")
        }
    }
}

struct SegmentsCountCommand: Command {
    static let spec = CommandSpec(
        name: "segments count",
        summary: "Count an app's active devices matching a segment (docs/segments.md)",
        positionals: ["[EXPR]"],
        options: [.option("app", "KEY", "app key (required)"), .option("name", "NAME", "use a saved segment instead of EXPR")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        let expression = try await SegmentInput.expression(arguments, store, app: app)
        print(try await store.audience.count(app: app, segment: expression))
        return 0
    }
}

struct SegmentsSampleCommand: Command {
    static let spec = CommandSpec(
        name: "segments sample",
        summary: "Show some devices matching a segment",
        positionals: ["[EXPR]"],
        options: [
            .option("app", "KEY", "app key (required)"), .option("name", "NAME", "use a saved segment instead of EXPR"),
            .option("limit", "N", "how many (default 10)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        let expression = try await SegmentInput.expression(arguments, store, app: app)
        let limit = try arguments.int("limit", default: 10, range: 1...10_000)
        let devices = try await store.audience.page(app: app, segment: expression, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: limit)
        for device in devices {
            print([String(device.rowKey), device.deviceID, device.environment.rawValue, device.locale ?? "-"].joined(separator: "\t"))
        }
        return 0
    }
}

struct SegmentsSaveCommand: Command {
    static let spec = CommandSpec(
        name: "segments save",
        summary: "Save a named segment for an app (campaigns can target it by name)",
        positionals: ["EXPR"],
        options: [.option("app", "KEY", "app key (required)"), .option("name", "NAME", "segment name (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let name = try arguments.required("name")
        let store = try await StoreOptions.open(arguments, context)
        try await store.audience.saveSegment(app: app, name: name, expression: arguments.positionals[0])
        print("segment \(name) saved for app \(app)")
        return 0
    }
}

/// `pushfan devices expand`: streams an audience the way the pipeline does (shards, then
/// keyset pages), counting devices; a dry run of expansion and the store benchmark's probe.
struct DevicesExpandCommand: Command {
    static let spec = CommandSpec(
        name: "devices expand",
        summary: "Expand an audience through shards and pages, as a campaign would, and report the rate",
        positionals: ["[EXPR]"],
        options: [
            .option("app", "KEY", "app key (required)"), .option("name", "NAME", "use a saved segment instead of EXPR"),
            .option("shard-size", "N", "devices per shard (default 10000)"), .option("page", "N", "devices per page (default 1000)"),
            .option("parallel", "N", "shards read at once (default 2)"),
        ] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        let expression = try await SegmentInput.expression(arguments, store, app: app)
        let shardSize = try arguments.int("shard-size", default: 10_000, range: 1...10_000_000)
        let pageSize = try arguments.int("page", default: 1000, range: 1...100_000)
        let parallel = try arguments.int("parallel", default: 2, range: 1...64)
        let started = ContinuousClock.now
        let progress = ProgressLine()
        var devices = 0
        var checksum: Int64 = 0
        var scannedShards = 0
        var foundShards = 0
        // Each shard is scanned as soon as its boundary is known, `parallel` at once, as
        // workers would scan them.
        let (found, foundShard) = AsyncThrowingStream<ShardRange, any Error>.makeStream()
        try await withThrowingTaskGroup(of: (devices: Int, checksum: Int64)?.self) { group in
            group.addTask {
                do {
                    _ = try await store.audience.shards(app: app, size: shardSize) { foundShard.yield($0) }
                    foundShard.finish()
                } catch {
                    foundShard.finish(throwing: error)
                }
                return nil
            }
            func scan(_ shard: ShardRange) async throws -> (devices: Int, checksum: Int64) {
                var devices = 0
                var checksum: Int64 = 0
                var cursor: Int64?
                while true {
                    let page = try await store.audience.page(app: app, segment: expression, shard: shard, cursor: cursor, limit: pageSize)
                    devices += page.count
                    // Touch what the pipeline would use, so the work is not optimised away.
                    for target in page { checksum &+= target.rowKey &+ Int64(target.token.utf8.count) }
                    guard page.count == pageSize, let last = page.last else { return (devices, checksum) }
                    cursor = last.rowKey
                }
            }
            var scanning = 0
            func collect(_ result: (devices: Int, checksum: Int64)?) {
                guard let result else { return }  // the boundary search ended
                scanning -= 1
                scannedShards += 1
                devices += result.devices
                checksum &+= result.checksum
                progress.show("\(scannedShards) of \(foundShards) shards found so far: \(devices) devices")
            }
            for try await shard in found {
                foundShards += 1
                while scanning >= parallel, let result = try await group.next() { collect(result) }
                group.addTask { try await scan(shard) }
                scanning += 1
            }
            for try await result in group { collect(result) }
        }
        progress.finish()
        let seconds = (ContinuousClock.now - started).seconds
        print(#"{"devices":\#(devices),"shards":\#(foundShards),"seconds":\#(String(format: "%.3f", seconds)),"per_s":\#(Int(Double(devices) / max(seconds, 1e-9))),"checksum":\#(checksum)}"#)
        return 0
    }
}
