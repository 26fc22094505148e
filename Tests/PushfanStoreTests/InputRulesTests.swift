import Foundation
import PushfanMessages
@testable import PushfanStore
import PushfanSupport
import Testing

/// Rules at the store's doors: one rule for device ids (the one the results topic's readers
/// hold them to), a database file only its owner can read, and import lines as spreadsheets
/// write them.
@Suite struct InputRulesTests {
    @Test("device ids the results topic cannot carry are refused on registration and import, with the rule", arguments: Backend.enabled)
    func deviceIDsFollowTheTopicRule(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        for bad in ["a/b", "x#1", "with space", "", String(repeating: "d", count: 129), "é"] {
            await #expect {
                _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: bad, token: Synthetic.token(1)))
            } throws: { error in
                "\(error)".contains("device id must be 1-128 characters of A-Z a-z 0-9 . _ : -")
            }
            var parser = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
            #expect(throws: StoreError.self) { try parser.parse(#"{"device_id":\#(JSONValue.string(bad).compactJSON),"token":"\#(Synthetic.token(1))"}"#) }
        }
        // Every id the store takes is one a result record can carry.
        let good = "Device_1.a:b-" + String(repeating: "z", count: 115)
        _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: good, token: Synthetic.token(2)))
        let result = DeviceResult(campaign: CampaignKey(app: "shop", id: "c"), device: good, outcome: .delivered, attempts: 1, at: 1_773_993_600_000)
        #expect(try MessageCodec.decodeGenerically(ResultRecord.self, from: Data(result.encodedJSON())) == .device(result))
    }

    @Test("a new SQLite database and its WAL are readable by their owner only")
    func sqliteFileIsPrivate() async throws {
        let url = try Backend.sqlite.freshDatabase()
        let store = try await DeviceStore.open(url, logger: quietLogger, clock: SystemClock())
        try await store.addTestApp()
        let path = String(url.dropFirst("sqlite:".count))
        for file in [path, path + "-wal"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
            #expect(mode == 0o600, "\(file) has mode \(String(mode, radix: 8))")
        }
    }

    @Test("a UTF-8 byte order mark before the first line is not data, in NDJSON and in CSV")
    func byteOrderMarkIsSkipped() throws {
        let bom = "\u{FEFF}"
        var ndjson = DeviceImportParser(format: .ndjson, now: epochMillis(Date()))
        let line = Array((bom + #"{"device_id":"d1","token":"\#(Synthetic.token(1))"}"#).utf8)
        #expect(try line.withUnsafeBytes { try ndjson.parse(bytes: $0) }?.deviceID == "d1")
        var csv = DeviceImportParser(format: .csv, now: epochMillis(Date()))
        let header = Array((bom + "device_id,token").utf8)
        #expect(try header.withUnsafeBytes { try csv.parse(bytes: $0) } == nil)
        #expect(!csv.needsHeader)
        #expect(try csv.parse("d2,\(Synthetic.token(2))")?.deviceID == "d2")
    }

    @Test("a refused CSV header leaves the parser waiting for a header, so the import can stop there")
    func refusedHeader() throws {
        var csv = DeviceImportParser(format: .csv, now: epochMillis(Date()))
        #expect(csv.needsHeader)
        #expect(throws: StoreError.invalidInput(
            "unknown CSV column 'id'; known: app_version, device_id, environment, last_seen, locale, os_version, quiet_end, quiet_start, tags, timezone, token, attr.NAME")) {
            try csv.parse("id,token")
        }
        #expect(csv.needsHeader)
    }
}
