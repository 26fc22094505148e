import Foundation
import PushfanMessages
import PushfanSegments
@testable import PushfanStore
import PushfanSupport
import PushfanTestSupport
import Testing

/// The shared suite: every test runs on SQLite and on PostgreSQL. Its second half, the
/// ledger and what the workers keep, is DeviceStoreLedgerTests.swift.
@Suite(.timeLimit(.minutes(5)))
struct DeviceStoreTests {
    let now: Int64 = 1_790_000_000_000

    /// A campaign of app shop-ios, as the store names it.
    func shop(_ id: String) -> CampaignKey { CampaignKey(app: "shop-ios", id: id) }

    @Test(arguments: Backend.enabled)
    func migrationsApplyOnEmptyAndExistingDatabases(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        let first = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        #expect(try await first.schemaVersion() == Schema.latestVersion)
        try await first.addTestApp()
        // Opening again applies nothing and keeps the data.
        let second = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        #expect(try await second.migrate() == [])
        #expect(try await second.apps.get("shop-ios") != nil)
    }

    @Test("migration 17 moves every campaign row of a database written before it into its app's names", arguments: Backend.enabled)
    func campaignRowsMoveIntoTheirApps(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let targets = try await store.importSynthetic(20, now: now)
        #expect(try await store.campaigns.record(shop("old"), audience: 20, shards: 2, now: store.clock.wallMillis))
        _ = try await store.ledger.claim(campaign: shop("old"), targets: targets, owner: "w", now: now)
        #expect(try await store.ledger.record(campaign: shop("old"), targets.prefix(5).map { LedgerOutcome(rowKey: $0.rowKey, state: .delivered) }, now: store.clock.wallMillis).count == 5)
        _ = try await store.campaigns.finishTask(campaign: shop("old"), shard: 0, now: store.clock.wallMillis)
        // Back to the shape before migration 17: every campaign column held the bare id.
        let tables = ["deliveries", "campaign_tasks", "campaign_counts", "campaigns"]
        try await store.ledger.executor.run { connection throws(StoreError) in
            for table in tables {
                let column = table == "campaigns" ? "id" : "campaign"
                try connection.execute("UPDATE \(raw: table) SET \(raw: column) = substr(\(raw: column), 10)")
            }
            try connection.execute("DELETE FROM schema_migrations WHERE version = 17")
        }
        #expect(try await store.campaigns.get(shop("old")) == nil)
        #expect(try await store.migrate() == [17])
        let row = try #require(try await store.campaigns.get(shop("old")))
        #expect(row.id == "old" && row.app == "shop-ios" && row.audience == 20)
        #expect(try await store.ledger.progressCounts(campaign: shop("old")) == [.delivered: 5])
        #expect(try await store.ledger.outcomeCounts(campaign: shop("old")) == [.delivered: 5, .claimed: 15])
        #expect(try await store.campaigns.finishedTasks(shop("old")) == 1)
        // Another app's campaign of the same id is another campaign.
        try await store.addTestApp("news")
        #expect(try await store.campaigns.record(CampaignKey(app: "news", id: "old"), audience: 1, shards: 1, now: store.clock.wallMillis))
        #expect(try await store.campaigns.get(shop("old"))?.audience == 20)
    }

    @Test(arguments: Backend.enabled)
    func appsKeepOnlyAHashOfTheSecret(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        let secret = try await store.apps.add(AppRegistration(app: "news", topic: "com.example.news", credentials: .certificate(certificateFile: "/c.pem", keyFile: "/k.pem"), environment: .sandbox, ratePerSecond: 250))
        #expect(secret.master.count == 64 && secret.application.count == 64 && secret.master != secret.application)
        #expect(try await store.apps.verifySecret(app: "news", secret: secret.master))
        #expect(try await !store.apps.verifySecret(app: "news", secret: String(secret.master.reversed())))
        #expect(try await store.apps.authenticate(app: "news", secret: secret.master, now: store.clock.wallMillis) == .master)
        #expect(try await store.apps.authenticate(app: "news", secret: secret.application, now: store.clock.wallMillis) == .application)
        #expect(try await store.apps.authenticate(app: "news", secret: "wrong", now: store.clock.wallMillis) == nil)
        #expect(try await store.apps.authenticate(app: "nobody", secret: secret.master, now: store.clock.wallMillis) == nil)
        let app = try #require(try await store.apps.get("news"))
        #expect(app.credentials == .certificate(certificateFile: "/c.pem", keyFile: "/k.pem"))
        #expect(app.environment == .sandbox && app.ratePerSecond == 250)
        await #expect(throws: StoreError.conflict("app news already exists")) {
            _ = try await store.apps.add(AppRegistration(app: "news", topic: "com.example.news", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil)))
        }
        await #expect(throws: StoreError.conflict("app News differs from the existing app news only in case")) {
            _ = try await store.apps.add(AppRegistration(app: "News", topic: "com.example.news", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil)))
        }
        await #expect { _ = try await store.apps.add(AppRegistration(app: "bad key!", topic: "t", credentials: .certificate(certificateFile: "c", keyFile: nil))) } throws: {
            "\($0)".contains("app key must be")
        }
    }

    @Test(arguments: Backend.enabled)
    func registrationNormalisesAndIsIdempotent(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        var registration = DeviceRegistration(deviceID: "phone-1", token: "  ABCDEF" + String(repeating: "0", count: 58) + " ")
        registration.locale = "de-de"
        registration.tags = ["sports", "sports", "news"]
        registration.attributes = ["plan": .string("pro")]
        let first = try await store.devices.register(app: "shop-ios", registration)
        #expect(first.created)
        let second = try await store.devices.register(app: "shop-ios", registration)
        #expect(!second.created && second.rowKey == first.rowKey)
        let device = try #require(try await store.devices.get(app: "shop-ios", deviceID: "phone-1"))
        #expect(device.token == "abcdef" + String(repeating: "0", count: 58))
        #expect(device.locale == "de_DE")
        #expect(device.tags == ["news", "sports"])
        #expect(device.attributes == ["plan": .string("pro")])
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 1)
    }

    @Test(arguments: Backend.enabled)
    func aTokenFollowsTheDeviceThatRegistersItLast(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let token = Synthetic.token(7)
        _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "old-install", token: token))
        let moved = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "new-install", token: token))
        #expect(moved.tokenMovedFrom == ["old-install"])
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "old-install") == nil)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 1)
        // The same token in the other environment is a different registration.
        var sandbox = DeviceRegistration(deviceID: "debug-build", token: token)
        sandbox.environment = .sandbox
        #expect(try await store.devices.register(app: "shop-ios", sandbox).tokenMovedFrom.isEmpty)
    }

    @Test(arguments: Backend.enabled)
    func badRegistrationsAreRefusedWithTheReason(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let cases: [(DeviceRegistration, String)] = [
            (DeviceRegistration(deviceID: "a", token: "abc"), "even"),
            (DeviceRegistration(deviceID: "a", token: String(repeating: "zz", count: 32)), "hexadecimal"),
            (DeviceRegistration(deviceID: "a", token: "ab"), "32 to 400 hex digits"),
            (DeviceRegistration(deviceID: "", token: Synthetic.token(1)), "device id"),
            ({ var r = DeviceRegistration(deviceID: "a", token: Synthetic.token(1)); r.timezone = "Mars/Olympus"; return r }(), "unknown time zone"),
            ({ var r = DeviceRegistration(deviceID: "a", token: Synthetic.token(1)); r.locale = "en US!"; return r }(), "locale must look like"),
            ({ var r = DeviceRegistration(deviceID: "a", token: Synthetic.token(1)); r.tags = [""]; return r }(), "tag must be"),
            ({ var r = DeviceRegistration(deviceID: "a", token: Synthetic.token(1)); r.attributes = ["bad key": .int(1)]; return r }(), "attribute name"),
        ]
        for (registration, message) in cases {
            await #expect {
                _ = try await store.devices.register(app: "shop-ios", registration)
            } throws: { error in
                (error as? StoreError)?.code == .invalidInput && "\(error)".contains(message)
            }
        }
        await #expect(throws: StoreError.notFound("unknown app 'nope'; add it with `pushfan apps add`")) {
            _ = try await store.devices.register(app: "nope", DeviceRegistration(deviceID: "a", token: Synthetic.token(1)))
        }
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 0)
    }

    @Test(arguments: Backend.enabled)
    func importTakesGoodLinesAndReportsBadOnes(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let lines = [
            #"{"device_id":"n1","token":"\#(Synthetic.token(1))","locale":"fr_FR","tags":["news"],"attributes":{"plan":"pro"}}"#,
            #"{"device_id":"n2","token":"nothex"}"#,
            "{broken",
            "",
            #"{"device_id":"n3","token":"\#(Synthetic.token(3))","environment":"staging"}"#,
            #"{"device_id":"n4","token":"\#(Synthetic.token(4))","environment":"sandbox","last_seen":1700000000000}"#,
        ]
        var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        var good: [ValidatedDevice] = []
        var bad: [(Int, String)] = []
        for (index, line) in lines.enumerated() {
            do { if let device = try parser.parse(line) { good.append(device) } } catch { bad.append((index + 1, "\(error)")) }
        }
        #expect(bad.map(\.0) == [2, 3, 5])
        #expect(bad[0].1.contains("hexadecimal") && bad[1].1.contains("not a JSON object") && bad[2].1.contains("production or sandbox"))
        #expect(try await store.devices.importDevices(app: "shop-ios", good) == 2)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 2)

        var csv = DeviceImportParser(format: .csv, now: epochMillis(Date()))
        #expect(try csv.parse("device_id,token,locale,tags,attr.visits") == nil)
        let row = try #require(try csv.parse(#"c1,\#(Synthetic.token(9)),"de_DE","vip;beta",12"#))
        #expect(row.tags == ["vip", "beta"] && row.attributesJSON == #"{"visits":12}"#)
        #expect(throws: StoreError.invalidInput("expected 5 fields as in the header, found 2")) { try csv.parse("c2,abc") }
        var badHeader = DeviceImportParser(format: .csv, now: epochMillis(Date()))
        #expect { try badHeader.parse("device_id,token,colour") } throws: { "\($0)".contains("unknown CSV column 'colour'") }
    }

    @Test func ndjsonKeepsAttributeTypesAndNamesWrongTypes() throws {
        var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        let line = #"{"device_id":"a","token":"\#(Synthetic.token(1))","attributes":{"beta":true,"visits":3,"score":2.5,"plan":"pro"},"last_seen":1700000000000}"#
        let device = try #require(try parser.parse(line))
        #expect(device.attributesJSON == #"{"beta":true,"plan":"pro","score":2.5,"visits":3}"#)
        #expect(device.seenAt == 1_700_000_000_000)
        let wrong = [
            (#"{"device_id":"a","token":"\#(Synthetic.token(1))","tags":"vip"}"#, "tags: wrong type"),
            (#"{"device_id":"a","token":"\#(Synthetic.token(1))","attributes":[1]}"#, "attributes: wrong type"),
            (#"{"device_id":"a","token":"\#(Synthetic.token(1))","last_seen":true}"#, "last_seen: wrong type"),
            (#"{"device_id":7,"token":"\#(Synthetic.token(1))"}"#, "device_id: wrong type"),
            (#"{"token":"\#(Synthetic.token(1))"}"#, "missing field device_id"),
            ("[1,2]", "not a JSON object"),
        ]
        for (text, message) in wrong {
            #expect { try parser.parse(text) } throws: { "\($0)".contains(message) }
        }
        #expect(try parser.parse("   ") == nil)
    }

    /// The import's own JSON reader against JSONSerialization as an independent parser:
    /// both accept the same lines (when the line is an object) and read the same values.
    @Test(arguments: [
        #"{"device_id":"a","token":"TOKEN","attributes":{"s":"a\"b\\c\/d"}}"#,
        #"{"device_id":"b","token":"TOKEN","attributes":{"s":"\u00e9\ud83c\udf89 \u0041"}}"#,
        #"  { "device_id" : "sp" , "token" : "TOKEN" , "locale" : null }  "#,
        #"{"device_id":"n","token":"TOKEN","attributes":{"a":[1,-0,1.5e3,true,null,{"b":"c"}],"n":-12}}"#,
        #"{"device_id":"dup","device_id":"last","token":"TOKEN"}"#,
        #"{"device_id":"x","token":"TOKEN","extra":{"deep":[[[]]]}}"#,
        #"{'device_id':'x','token':'TOKEN'}"#,
        #"{"device_id":"x","token":"TOKEN"} trailing"#,
        "{\"device_id\":\"x\u{01}\",\"token\":\"TOKEN\"}",
        #"{"device_id":"\ud83c","token":"TOKEN"}"#,
        #"{"device_id":"x","token":"TOKEN","attributes":{"n":01}}"#,
        #"{"device_id":"x","token":"TOKEN","attributes":{"n":1.}}"#,
        #"{"device_id":"x","token":"TOKEN""#,
    ])
    func ndjsonReaderAgreesWithJSONSerialization(_ template: String) throws {
        let line = template.replacingOccurrences(of: "TOKEN", with: Synthetic.token(1))
        var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        let ours = Result { () throws(StoreError) -> ValidatedDevice? in try parser.parse(line) }
        let reference = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        switch (ours, reference) {
        case (.success(let device?), let object?):
            #expect(device.deviceID == object["device_id"] as? String)
            #expect(device.token == Synthetic.token(1))
            if let attributes = object["attributes"] as? [String: Any] {
                let expected = try JSONSerialization.data(withJSONObject: attributes, options: [.sortedKeys])
                let actual = try JSONSerialization.jsonObject(with: Data(device.attributesJSON.utf8))
                #expect(try JSONSerialization.data(withJSONObject: actual, options: [.sortedKeys]) == expected)
            }
        case (.failure(let error), nil):
            #expect("\(error)".contains("not a JSON object") || "\(error)".contains("UTF-8"), "\(error)")
        case (.failure(let error), _?) where line.contains(#""device_id":"dup","device_id""#):
            // JSONSerialization keeps the last of a key given twice; the reader refuses it,
            // as a reader in front might have kept the first.
            #expect("\(error)".contains(#"duplicate key "device_id""#), "\(error)")
        default:
            Issue.record("disagree on \(line): ours \(ours), JSONSerialization \(reference.map { "\($0)" } ?? "rejects")")
        }
    }

    @Test func ndjsonReaderRefusesInvalidUTF8AndDeepNesting() throws {
        var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        var bytes = Array(#"{"device_id":"x","token":"\#(Synthetic.token(1))","locale":"fr"#.utf8)
        bytes += [0xC3, 0x28] + Array(#""}"#.utf8)
        let result = bytes.withUnsafeBytes { raw in Result { () throws(StoreError) -> ValidatedDevice? in try parser.parse(bytes: raw) } }
        #expect(throws: StoreError.invalidInput("not valid UTF-8")) { try result.get() }
        let deep = #"{"device_id":"x","token":"\#(Synthetic.token(1))","attributes":{"a":"# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}}"
        #expect(throws: StoreError.invalidInput("nested deeper than 32 levels")) { try parser.parse(deep) }
        // Strict RFC 8259, where Foundation's parser is lenient: no trailing comma.
        #expect(throws: StoreError.invalidInput("not a JSON object")) { try parser.parse(#"{"device_id":"x","token":"\#(Synthetic.token(1))",}"#) }
    }

    @Test("strings with escapes: resolved, and each broken one refused with the reader's own error")
    func ndjsonReaderResolvesAndRefusesEscapes() throws {
        var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        let token = Synthetic.token(1)
        let device = try #require(try parser.parse(#"{"device_id":"x","token":"\#(token)","attributes":{"s":"q\"b\\n\n\u00e9\ud83c\udf89"}}"#))
        #expect(try JSONDecoder().decode(JSONValue.self, from: Data(device.attributesJSON.utf8))["s"] == .string("q\"b\\n\n\u{E9}\u{1F389}"))
        let notAnObject = [
            #"{"device_id":"x\"#,  // a backslash at the end of the input
            #"{"device_id":"\x41","token":"\#(token)"}"#,  // an escape JSON does not have
            "{\"device_id\":\"a\\\u{01}\",\"token\":\"\(token)\"}",  // a backslash before a raw control byte
            #"{"device_id":"\udc00","token":"\#(token)"}"#,  // half a surrogate pair
        ]
        for line in notAnObject {
            #expect(throws: StoreError.invalidInput("not a JSON object"), "\(line)") { try parser.parse(line) }
        }
        var bytes = Array(#"{"device_id":"x","token":"\#(token)","locale":"\n"#.utf8)
        bytes += [0xC3, 0x28] + Array(#""}"#.utf8)  // invalid UTF-8 after an escape
        let result = bytes.withUnsafeBytes { raw in Result { () throws(StoreError) -> ValidatedDevice? in try parser.parse(bytes: raw) } }
        #expect(throws: StoreError.invalidInput("not valid UTF-8")) { try result.get() }
    }

    @Test(arguments: Backend.enabled)
    func bulkImportFollowsTheRegistrationRules(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "old", token: Synthetic.token(1)))
        var tagged = DeviceRegistration(deviceID: "twice", token: Synthetic.token(2))
        tagged.tags = ["first"]
        var again = DeviceRegistration(deviceID: "twice", token: Synthetic.token(3))
        again.tags = ["second", "third"]
        let batch = try [
            DeviceRegistration(deviceID: "new", token: Synthetic.token(1)),  // takes the token from "old"
            tagged, again,  // the last line for a device wins
        ].map { try Validation.device($0, now: store.clock.wallMillis) }
        #expect(try await store.devices.importDevices(app: "shop-ios", batch) == 2)
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "old") == nil)
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "new")?.token == Synthetic.token(1))
        let twice = try #require(try await store.devices.get(app: "shop-ios", deviceID: "twice"))
        #expect(twice.token == Synthetic.token(3) && twice.tags == ["second", "third"])
        // Re-importing updates in place and revives an invalidated device.
        #expect(try await store.devices.invalidate(app: "shop-ios", environment: .production, token: Synthetic.token(3), reason: "BadDeviceToken", now: store.clock.wallMillis))
        #expect(try await store.devices.importDevices(app: "shop-ios", [try Validation.device(DeviceRegistration(deviceID: "twice", token: Synthetic.token(3)), now: store.clock.wallMillis)]) == 1)
        let revived = try #require(try await store.devices.get(app: "shop-ios", deviceID: "twice"))
        #expect(revived.rowKey == twice.rowKey && revived.status == .active && revived.tags.isEmpty)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 2)
    }

    /// A batch large enough to be written in parts at once (PostgreSQL) ends as if written
    /// line by line, even when two devices in different parts swap tokens, which can make
    /// the parts deadlock (the aborted part runs again).
    @Test(arguments: Backend.enabled)
    func aLargeBatchWrittenInPartsEndsAsIfWrittenInOrder(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        let store = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        // Two device ids that the split puts into different parts.
        let candidates = (0..<64).map { "swap-\($0)" }
        let first = try #require(candidates.first)
        let second = try #require(candidates.first { candidate in
            let parts = DeviceWriter.split([first, candidate].map { try! Validation.device(DeviceRegistration(deviceID: $0, token: Synthetic.token(0)), now: epochMillis(Date())) }, into: 2)
            return parts.allSatisfy { $0.count == 1 }
        })
        var tagged = DeviceRegistration(deviceID: first, token: Synthetic.token(100_000))
        tagged.tags = ["old"]
        _ = try await store.devices.register(app: "shop-ios", tagged)
        _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: second, token: Synthetic.token(100_001)))

        var batch = (0..<(2 * DeviceDirectory.smallestParallelPart + 200)).map { DeviceRegistration(deviceID: "bulk-\($0)", token: Synthetic.token($0)) }
        batch.append(DeviceRegistration(deviceID: first, token: Synthetic.token(100_001)))
        batch.append(DeviceRegistration(deviceID: second, token: Synthetic.token(100_000)))
        #expect(try await store.devices.importDevices(app: "shop-ios", batch.map { try Validation.device($0, now: store.clock.wallMillis) }) == batch.count)

        #expect(try await store.devices.get(app: "shop-ios", deviceID: first)?.token == Synthetic.token(100_001))
        #expect(try await store.devices.get(app: "shop-ios", deviceID: second)?.token == Synthetic.token(100_000))
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == batch.count)
        #expect(try backend.rawCount(url, "SELECT count(*) FROM device_tags") == 0)
        let bulk = try #require(try await store.devices.get(app: "shop-ios", deviceID: "bulk-700"))
        #expect(bulk.token == Synthetic.token(700) && bulk.status == .active)
    }

    /// Text that COPY's row format and PostgreSQL's array literals must escape (tabs,
    /// newlines, backslashes, quotes, commas, braces, the word NULL) comes back unchanged,
    /// and a token taken from a tagged device leaves none of that device's tags behind.
    @Test(arguments: Backend.enabled)
    func importedTextSurvivesEscapingAndMovedTokensTakeNoTagsAlong(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        let store = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        var owner = DeviceRegistration(deviceID: "owner", token: Synthetic.token(1))
        owner.tags = ["stale"]
        _ = try await store.devices.register(app: "shop-ios", owner)
        // Device ids are plain (`A-Za-z0-9._:-`); free text is in versions, tags and attributes.
        var odd = DeviceRegistration(deviceID: "odd-1", token: Synthetic.token(2))
        odd.tags = ["a,b", #"quo"te"#, #"back\slash"#, "{braces}", "NULL", "space d"]
        odd.attributes = ["note": .string("tab\there\nnew line \\ \"q\" \u{1}"), "n": .int(3)]
        odd.appVersion = #"2.1 beta \ "quoted""#
        var taker = DeviceRegistration(deviceID: "taker", token: Synthetic.token(1))
        taker.tags = ["fresh"]
        #expect(try await store.devices.importDevices(app: "shop-ios", [odd, taker].map { try Validation.device($0, now: store.clock.wallMillis) }) == 2)

        let stored = try #require(try await store.devices.get(app: "shop-ios", deviceID: odd.deviceID))
        #expect(Set(stored.tags) == Set(odd.tags))
        #expect(stored.attributes == odd.attributes)
        #expect(stored.appVersion == odd.appVersion)
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "owner") == nil)
        #expect(try await store.audience.count(app: "shop-ios", segment: SegmentParser.parse("tag:stale"), now: store.clock.wallMillis) == 0)
        #expect(try await store.audience.count(app: "shop-ios", segment: SegmentParser.parse("tag:fresh"), now: store.clock.wallMillis) == 1)
        #expect(try await store.audience.count(app: "shop-ios", segment: SegmentParser.parse(#"tag:"quo\"te""#), now: store.clock.wallMillis) == 1)
        #expect(try backend.rawCount(url, "SELECT count(*) FROM device_tags") == odd.tags.count + 1)
    }

    /// The segment language on the database agrees with the reference evaluator, through
    /// count and through sharded, paged expansion (which covers each device exactly once).
    @Test(arguments: Backend.enabled)
    func segmentsMatchTheReferenceEvaluatorAndShardsCoverEachDeviceOnce(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let devices = Synthetic.devices(count: 300, now: now)
        let validated = try devices.map { try Validation.device($0.registration, now: epochMillis(Date())) }
        #expect(try await store.devices.importDevices(app: "shop-ios", validated) == 300)
        let rowKeys = Dictionary(uniqueKeysWithValues: try await store.devices.list(app: "shop-ios", limit: 1000).map { ($0.deviceID, $0.rowKey) })

        let expressions = [
            "tag:sports", "not tag:sports", "tag:sports and tag:news", "tag:vip or tag:beta",
            "locale = de_DE", "locale != de_DE", "locale in (en_US, en_GB, fr_FR)", "not locale in (en_US, en_GB)",
            "timezone = \"Europe/Berlin\"", "environment = sandbox", "environment != production",
            "app_version >= 2.9", "app_version < 2.10", "app_version = 2.3", "not app_version > 2.3",
            "os_version >= 17.4", "os_version in (16.7, 18.0)",
            "attr.plan = pro", "attr.plan != free", "attr.plan in (pro, team)", "attr.visits > 20", "attr.visits <= 3",
            "not attr.visits > 20", "attr.score >= 2.5", "attr.visits = many",
            "last_seen within 7d", "not last_seen within 30d",
            "(tag:sports or locale = fr_FR) and not (environment = sandbox or attr.plan = free)",
            "tag:news and (app_version >= 2.9 or os_version < 17) and last_seen within 45d",
        ]
        for text in expressions {
            let expression = try SegmentParser.parse(text)
            let expected = Set(devices.filter { SegmentEvaluator.matches(expression, device: $0.reference, now: now) }.map { rowKeys[$0.registration.deviceID]! })
            #expect(try await store.audience.count(app: "shop-ios", segment: expression, now: now) == expected.count, "count of \(text)")
            let expanded = try await store.expandAll(app: "shop-ios", segment: expression, shardSize: 37, pageSize: 10, now: now)
            #expect(expanded.count == Set(expanded.map(\.rowKey)).count, "a device appeared twice for \(text)")
            #expect(Set(expanded.map(\.rowKey)) == expected, "expansion of \(text)")
            #expect(expanded.map(\.rowKey) == expanded.map(\.rowKey).sorted(), "keyset order for \(text)")
        }
        let shards = try await store.audience.shards(app: "shop-ios", size: 37)
        #expect(shards.count == 9)  // ceil(300 / 37)
        #expect(shards.first?.after == nil && shards.last?.through == nil)

        // Announced counts: the same cut when it matches, the rest in the open last shard
        // when it is too small, empty shards above every key when it is too large; each
        // given to `found` as it is cut.
        var found: [ShardRange] = []
        #expect(try await store.audience.shards(app: "shop-ios", size: 37, count: 9) { found.append($0) } == shards)
        #expect(found == shards)
        let fewer = try await store.audience.shards(app: "shop-ios", size: 37, count: 4) { _ in }
        #expect(fewer.count == 4 && Array(fewer.prefix(3)) == Array(shards.prefix(3)) && fewer[3] == ShardRange(after: shards[2].through, through: nil))
        let more = try await store.audience.shards(app: "shop-ios", size: 37, count: 11) { _ in }
        #expect(more.count == 11 && Array(more.prefix(9)) == shards)
        let allKeys = Array(rowKeys.values)
        for extra in more.suffix(2) {
            #expect(extra.after! > allKeys.max()! && extra.through! == extra.after! + 1, "\(extra)")
        }
    }

    @Test(arguments: Backend.enabled)
    func injectionAttemptsAreRefusedAndTheTablesStayIntact(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        try await store.importSynthetic(20, now: now)
        let attempts = [
            "' OR 1=1 --", "; DROP TABLE devices", "locale = \u{201C}de\u{201D}", "tag:a\u{0}", String(repeating: "(", count: 10_000) + "tag:a",
            "locale = x; DROP TABLE devices", "attr.plan' OR '1'='1 = x",
        ]
        for text in attempts {
            #expect(throws: SegmentError.self, "\(text.prefix(40)) should not parse") { try SegmentParser.parse(text) }
            await #expect(throws: StoreError.self) { try await store.audience.saveSegment(app: "shop-ios", name: "evil", expression: text) }
        }
        // Values that look like SQL are only ever data.
        let quoted = try SegmentParser.parse(#"locale = "x' OR '1'='1" or attr.plan = "'; DROP TABLE devices; --""#)
        #expect(try await store.audience.count(app: "shop-ios", segment: quoted, now: store.clock.wallMillis) == 0)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 20)
        #expect(try await store.audience.savedSegment(app: "shop-ios", name: "evil") == nil)
    }

    @Test(arguments: Backend.enabled)
    func namedSegmentsAreSavedAndReplaced(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        try await store.audience.saveSegment(app: "shop-ios", name: "germans", expression: "locale = de_DE")
        try await store.audience.saveSegment(app: "shop-ios", name: "germans", expression: "locale in (de_DE, de_AT)")
        #expect(try await store.audience.savedSegment(app: "shop-ios", name: "germans") == "locale in (de_DE, de_AT)")
        await #expect { try await store.audience.saveSegment(app: "shop-ios", name: "bad name", expression: "tag:a") } throws: { "\($0)".contains("segment name") }
    }

    @Test(arguments: Backend.enabled)
    func unregisteredTimestampsOnlyInvalidateDevicesThatDidNotRegisterAgain(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        // Registration times are real ones (the store refuses a last_seen before 2000).
        let t0: Int64 = 1_700_000_000_000
        try await store.addTestApp()
        var registration = DeviceRegistration(deviceID: "p", token: Synthetic.token(5))
        registration.seenAt = t0 + 2_000
        _ = try await store.devices.register(app: "shop-ios", registration)
        // APNs says the token went stale at t0 + 1 s, before the device registered again at t0 + 2 s.
        #expect(try await !store.devices.applyUnregistered(app: "shop-ios", environment: .production, token: Synthetic.token(5), at: t0 + 1_000))
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 1)
        #expect(try await store.devices.applyUnregistered(app: "shop-ios", environment: .production, token: Synthetic.token(5).uppercased(), at: t0 + 3_000))
        let device = try #require(try await store.devices.get(app: "shop-ios", deviceID: "p"))
        #expect(device.status == .invalid && device.invalidReason == "Unregistered" && device.invalidAt == t0 + 3_000)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 0)
        #expect(try await store.audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 10, now: store.clock.wallMillis).isEmpty)

        // BadDeviceToken is recorded per environment: the sandbox registration is untouched.
        var sandbox = DeviceRegistration(deviceID: "q", token: Synthetic.token(6))
        sandbox.environment = .sandbox
        _ = try await store.devices.register(app: "shop-ios", sandbox)
        #expect(try await !store.devices.invalidate(app: "shop-ios", environment: .production, token: Synthetic.token(6), reason: "BadDeviceToken", now: store.clock.wallMillis))
        #expect(try await store.devices.invalidate(app: "shop-ios", environment: .sandbox, token: Synthetic.token(6), reason: "BadDeviceToken", now: store.clock.wallMillis))
        // Registering again revives the device.
        _ = try await store.devices.register(app: "shop-ios", sandbox)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 1)
    }

    /// The sender marks a page's bad tokens in one call: each mark keeps its own rule.
    @Test(arguments: Backend.enabled)
    func onePageOfTokenMarksInOneCall(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        // Registration times are real ones (the store refuses a last_seen before 2000).
        let t0: Int64 = 1_700_000_000_000
        try await store.addTestApp()
        for index in 0..<4 {
            var registration = DeviceRegistration(deviceID: "m\(index)", token: Synthetic.token(10 + index))
            registration.seenAt = t0 + 2_000
            _ = try await store.devices.register(app: "shop-ios", registration)
        }
        let marks = [
            TokenMark(environment: .production, token: Synthetic.token(10), kind: .unregistered(at: t0 + 3_000), reason: "Unregistered"),
            TokenMark(environment: .production, token: Synthetic.token(11), kind: .unregistered(at: t0 + 1_000), reason: "Unregistered"),  // registered again since
            TokenMark(environment: .production, token: Synthetic.token(12), kind: .invalid, reason: "BadDeviceToken"),
            TokenMark(environment: .sandbox, token: Synthetic.token(13), kind: .invalid, reason: "BadDeviceToken"),  // not that environment
        ]
        #expect(try await store.devices.applyHygiene(app: "shop-ios", marks, now: t0 + 5_000) == 2)
        let states = try await (0..<4).asyncMap { try await store.devices.get(app: "shop-ios", deviceID: "m\($0)") }
        #expect(states.map { $0?.status } == [.invalid, .active, .invalid, .active])
        #expect(states[0]?.invalidAt == t0 + 3_000 && states[2]?.invalidAt == t0 + 5_000 && states[2]?.invalidReason == "BadDeviceToken")
    }

    @Test("an app's default category is kept, changed, removed and checked", arguments: Backend.enabled)
    func appDefaultCategory(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        var registration = AppRegistration(app: "cat", topic: "com.example.cat", credentials: .token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: "/k.p8"))
        registration.defaultCategory = "CAT_ACTIONS"
        _ = try await store.apps.add(registration)
        #expect(try await store.apps.get("cat")?.defaultCategory == "CAT_ACTIONS")
        try await store.apps.setDefaultCategory(app: "cat", category: "OTHER")
        #expect(try await store.apps.get("cat")?.defaultCategory == "OTHER")
        try await store.apps.setDefaultCategory(app: "cat", category: nil)
        #expect(try await store.apps.get("cat")?.defaultCategory == nil)
        await #expect(throws: StoreError.invalidInput("default_category: must be 1 to 255 printable ASCII characters, got 'a\nb'")) {
            try await store.apps.setDefaultCategory(app: "cat", category: "a\nb")
        }
        await #expect(throws: StoreError.notFound("unknown app 'nope'")) { try await store.apps.setDefaultCategory(app: "nope", category: "X") }
    }

    @Test("a text holding a NUL names nothing: SQLite compares it whole, PostgreSQL refuses it (libpq would end it at the NUL, so `device-1\\0x` would name device-1)", arguments: Backend.enabled)
    func textWithANULNamesNothing(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        try await store.importSynthetic(2, now: now)
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "device-1") != nil)
        for (app, device) in [("shop-ios", "device-1\u{0}x"), ("shop-ios\u{0}x", "device-1")] {
            do {
                let found = try await store.devices.get(app: app, deviceID: device)
                #expect(backend == .sqlite && found == nil, "\(backend): \(app.debugDescription) \(device.debugDescription) found \(String(describing: found?.deviceID))")
            } catch {
                #expect(backend == .postgres && error.code == .invalidInput && error.message.contains("NUL"), "\(backend): \(error)")
            }
        }
    }

    @Test("a removed device's row key is never given again (SQLite gave the highest one again, and the next new device inherited what named it); migration 27 keeps every device and its tags", arguments: Backend.enabled)
    func rowKeysAreNeverGivenAgain(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        func register(_ id: String, _ index: Int, tags: [String] = []) async throws -> Int64 {
            var device = DeviceRegistration(deviceID: id, token: String(format: "%064x", index))
            device.tags = tags
            return try await store.devices.register(app: "shop-ios", device).rowKey
        }
        let first = try await register("phone-a", 1, tags: ["vip"])
        let second = try await register("phone-b", 2, tags: ["beta", "de"])
        // Migration 27 again over these rows: SQLite's table is built anew, its tags kept aside.
        _ = try await store.ledger.executor.run { connection throws(StoreError) in try connection.execute("DELETE FROM schema_migrations WHERE version = 27") }
        #expect(try await store.migrate() == [27])
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "phone-a")?.tags == ["vip"])
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "phone-b")?.tags.sorted() == ["beta", "de"])
        #expect(first < second)

        #expect(try await store.personalData.eraseDevice(app: "shop-ios", id: "phone-b") != nil)
        let third = try await register("phone-c", 3)
        #expect(third > second, "phone-c got row key \(third), phone-b had \(second)")
        if backend == .sqlite {
            // A store from before migration 27 whose newest device was removed while a row
            // still names its key (here a VoIP token): the numbering starts above that key.
            #expect(try await store.tokens.register(app: "shop-ios", deviceID: "phone-c", KindToken(kind: .voip, token: String(format: "%064x", 90)), now: now))
            _ = try await store.ledger.executor.run { connection throws(StoreError) in
                try connection.executeScript("""
                    DELETE FROM devices WHERE row_key = \(third); DELETE FROM sqlite_sequence WHERE name = 'devices';
                    DELETE FROM schema_migrations WHERE version = 27;
                    """)
            }
            #expect(try await store.migrate() == [27])
            let fourth = try await register("phone-e", 4)
            #expect(fourth > third, "phone-e got row key \(fourth), a token still names \(third)")
            // The same with a quiet-hours hold listing the key (its devices wait in the hold's list).
            _ = try await store.ledger.executor.run { connection throws(StoreError) in
                try connection.executeScript("""
                    INSERT INTO campaign_waves (campaign, wave, send_at, first_shard, shards, row_keys) VALUES ('shop-ios/x', 'quiet-1', 0, 1, 1, '\(first),\(fourth)');
                    DELETE FROM device_tokens WHERE row_key = \(fourth); DELETE FROM devices WHERE row_key = \(fourth);
                    DELETE FROM sqlite_sequence WHERE name = 'devices'; DELETE FROM schema_migrations WHERE version = 27;
                    """)
            }
            #expect(try await store.migrate() == [27])
            let fifth = try await register("phone-f", 5)
            #expect(fifth > fourth, "phone-f got row key \(fifth), a hold still lists \(fourth)")
        }
        // A token moving from the newest device to a new one: the new row's key is new too.
        let moved = try await register("phone-d", 3)
        let gone = try await store.devices.get(app: "shop-ios", deviceID: "phone-c")
        #expect(moved > third && gone == nil)
    }

    @Test("a trait written back keeps the device's last sighting (so APNs' 410 from before it still counts) and is refused when the device registered again after it was read", arguments: Backend.enabled)
    func rewriteKeepsSightingAndRefusesAStaleRead(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let wall = store.clock.wallMillis
        var device = DeviceRegistration(deviceID: "phone", token: String(format: "%064x", 1))
        device.seenAt = wall - 60_000
        _ = try await store.devices.register(app: "shop-ios", device)
        let read = try #require(try await store.devices.get(app: "shop-ios", deviceID: "phone"))
        var tagged = DeviceRegistration(read)
        tagged.tags = ["vip"]
        #expect(try await store.devices.rewrite(app: "shop-ios", tagged, unchangedSince: read))
        let written = try #require(try await store.devices.get(app: "shop-ios", deviceID: "phone"))
        #expect(written.tags == ["vip"] && written.lastSeenAt == wall - 60_000)
        // Uninstalled 30 s ago, the 410 says: the tag written since does not hide that.
        #expect(try await store.devices.applyUnregistered(app: "shop-ios", environment: .production, token: String(format: "%064x", 1), at: wall - 30_000))

        // A read, then the SDK registering a new token: writing the read back is refused.
        device.token = String(format: "%064x", 2)
        device.seenAt = nil
        _ = try await store.devices.register(app: "shop-ios", device)
        let before = try #require(try await store.devices.get(app: "shop-ios", deviceID: "phone"))
        device.token = String(format: "%064x", 3)
        _ = try await store.devices.register(app: "shop-ios", device)
        var stale = DeviceRegistration(before)
        stale.tags = ["late"]
        #expect(try await !store.devices.rewrite(app: "shop-ios", stale, unchangedSince: before))
        let kept = try #require(try await store.devices.get(app: "shop-ios", deviceID: "phone"))
        #expect(kept.token == String(format: "%064x", 3) && kept.tags.isEmpty)
    }
}
