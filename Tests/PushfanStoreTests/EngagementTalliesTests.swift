import Foundation
import PushfanMessages
import PushfanSupport
import Testing

@testable import PushfanStore

/// Engagement events on both backends: checked against the app's devices and campaigns and
/// the send ids their markers carry, and counted once per event id however often they come.
@Suite(.timeLimit(.minutes(2)))
struct EngagementTalliesTests {
    let now: Int64 = 1_790_000_000_000
    let sale = CampaignKey(app: "shop-ios", id: "sale")

    /// Devices d0…d9 of shop-ios, one of news; campaign `sale` with variants a and b and a
    /// holdout, sent at `sentAt` (two days ago: outside its attribution window by default):
    /// delivered to its variants' devices, the holdout's skipped.
    func store(_ backend: Backend, sentAt: Int64? = nil) async throws -> (DeviceStore, Campaign) {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        try await store.addTestApp("news")
        for index in 0..<10 {
            _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "d\(index)", token: String(format: "%064x", index + 1)))
        }
        _ = try await store.devices.register(app: "news", DeviceRegistration(deviceID: "n0", token: String(format: "%064x", 99)))
        let json = #"""
            {"v":1,"id":"sale","app":"shop-ios","audience":{"segment":"locale = en_US"},"notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"}}},
             "variants":[{"id":"a","weight":40},{"id":"b","weight":40}],"holdout":20}
            """#
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(json.utf8))
        #expect(try await store.campaigns.record(sale, audience: 10, shards: 1, definition: CampaignDefinition(record: json, template: nil), now: now))
        let sent = sentAt ?? now - 2 * 86_400_000
        let targets = try await store.audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 10, now: sent)
        _ = try await store.ledger.claim(campaign: sale, targets: targets, owner: "w", now: sent)
        let outcomes = targets.map { target in
            campaign.share(of: target.deviceID) == .holdout
                ? LedgerOutcome(rowKey: target.rowKey, state: .skipped, reason: Campaign.holdoutReason) : LedgerOutcome(rowKey: target.rowKey, state: .delivered)
        }
        #expect(try await store.ledger.record(campaign: sale, outcomes, now: sent).count == 10)
        return (store, campaign)
    }

    /// The devices d0…d9 the campaign sends to (not held out), in order.
    func treated(_ campaign: Campaign) -> [String] {
        (0..<10).map { "d\($0)" }.filter { campaign.share(of: $0) != .holdout }
    }

    func event(_ kind: EngagementEvent.Kind, _ device: String, campaign: String? = "sale", sendID: String? = nil, variant: String? = nil, at: Int64? = nil,
               action: String? = nil, value: Double? = nil, currency: String? = nil, id: String? = nil) -> EngagementEvent {
        let send = sendID ?? campaign.map { EngagementMarker.sendID(campaign: CampaignKey(app: "shop-ios", id: $0), device: device) }
        let when = at ?? now - 1_000
        return EngagementEvent(
            id: id ?? EngagementEvent.derivedID(kind: kind, device: device, sendID: send, campaign: campaign, at: when, action: action, name: nil, value: value, currency: currency),
            app: "shop-ios", kind: kind, device: device, campaign: campaign, variant: variant, sendID: send, at: when, action: action, name: nil,
            value: value, currency: currency, receivedAt: now)
    }

    @Test("each refusal names its field: another app's device, an unknown campaign, a device the campaign never sent to, an open from its holdout, another device's send id, the wrong variant, a time ahead of the server", arguments: Backend.enabled)
    func refusals(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let variantOfD1 = campaign.countedName(of: campaign.share(of: "d1")) ?? ""
        let other = variantOfD1 == "a" ? "b" : "a"
        let heldOut = try #require((0..<10).map { "d\($0)" }.first { campaign.share(of: $0) == .holdout })
        // Registered after the campaign sent, as anyone with the application secret can.
        _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "late", token: String(format: "%064x", 77)))
        // Two more the campaign took: one expired after a request went out (its answer lost,
        // so it may have arrived), one cancelled before any.
        for (index, id) in ["retried", "unsent"].enumerated() {
            _ = try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: id, token: String(format: "%064x", 80 + index)))
        }
        let taken = try await store.audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 20, now: now)
            .filter { ["retried", "unsent"].contains($0.deviceID) }
        _ = try await store.ledger.claim(campaign: sale, targets: taken, owner: "w", now: now - 60_000)
        #expect(try await store.ledger.record(campaign: sale, taken.map { target in
            target.deviceID == "retried" ? LedgerOutcome(rowKey: target.rowKey, state: .expired, attempts: 2) : LedgerOutcome(rowKey: target.rowKey, state: .cancelled, attempts: 0)
        }, now: now - 30_000).count == 2)
        let events = [
            event(.opened, "n0"),
            event(.opened, "d1", campaign: "winter"),
            event(.opened, "late"),
            event(.opened, heldOut),
            event(.opened, "d1", sendID: EngagementMarker.sendID(campaign: sale, device: "d2")),
            event(.opened, "d1", variant: other),
            event(.opened, "d1", at: now + 16 * 60_000),
            event(.opened, "d1", variant: variantOfD1),
            event(.converted, heldOut),
            event(.opened, "retried"),
            event(.opened, "unsent"),
        ]
        let results = try await store.engagement.resolve(events, app: "shop-ios", now: now)
        let fields = results.map { result -> String in
            if case .failure(let refusal) = result { return refusal.field } else { return "ok" }
        }
        #expect(fields == ["device_id", "campaign", "campaign", "campaign", "send_id", "variant", "at", "ok", "ok", "ok", "campaign"], "\(results)")
        if case .failure(let refusal) = results[10] { #expect(refusal.reason == "campaign sale's push to device unsent never reached it (cancelled)") }
        if case .failure(let refusal) = results[2] { #expect(refusal.reason == "campaign sale has sent nothing to device late") }
        if case .failure(let refusal) = results[3] { #expect(refusal.reason.contains("holdout, which is sent nothing: only its conversions count")) }
        if case .success(let counted) = results[8] { #expect(counted.attributions == [EngagementTallies.Attribution(campaign: sale, variant: "holdout")]) }
        if case .failure(let refusal) = results[0] { #expect(refusal.reason == "app shop-ios has no device n0") }
        if case .failure(let refusal) = results[5] { #expect(refusal.reason.contains("is in \(variantOfD1.debugDescription) of campaign sale")) }
        if case .success(let counted) = results[7] { #expect(counted.attributions == [EngagementTallies.Attribution(campaign: sale, variant: variantOfD1)]) }
    }

    @Test("a conversion naming no campaign counts for each campaign that reached its device within that campaign's own attribution window", arguments: Backend.enabled)
    func perCampaignAttributionWindow(_ backend: Backend) async throws {
        let (store, _) = try await store(backend)
        let reachedAt = now - 3 * 3_600_000
        var keys: [String: CampaignKey] = [:]
        for (id, window) in [("hourly", #","options":{"attribution_window_s":3600}"#), ("daily", "")] {
            let key = CampaignKey(app: "shop-ios", id: id)
            let json = #"{"v":1,"id":"\#(id)","app":"shop-ios","audience":{"segment":"locale = en_US"},"notification":{"push_type":"alert","content":{"default":{"title":"Hi","body":"There"}}}\#(window)}"#
            _ = try MessageCodec.decode(Campaign.self, from: Data(json.utf8))
            #expect(try await store.campaigns.record(key, audience: 10, shards: 1, definition: CampaignDefinition(record: json), now: reachedAt - 60_000))
            let targets = try await store.audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 10, now: store.clock.wallMillis)
            _ = try await store.ledger.claim(campaign: key, targets: targets, owner: "w", now: reachedAt)
            #expect(try await store.ledger.record(campaign: key, targets.map { LedgerOutcome(rowKey: $0.rowKey, state: .delivered) }, now: reachedAt).count == 10)
            keys[id] = key
        }
        // Half an hour after the pushes: both campaigns'; three hours after: the daily one's only.
        let soon = event(.converted, "d1", campaign: nil, at: reachedAt + 1_800_000)
        let later = event(.converted, "d2", campaign: nil, at: reachedAt + 3 * 3_600_000 - 1_000)
        let results = try await store.engagement.resolve([soon, later], app: "shop-ios", now: now)
        func campaigns(_ result: Result<EngagementTallies.Counted, EngagementTallies.Refusal>) -> Set<String> {
            guard case .success(let counted) = result else { return ["refused"] }
            return Set(counted.attributions.map(\.campaign.id))
        }
        #expect(campaigns(results[0]) == ["hourly", "daily"], "\(results[0])")
        #expect(campaigns(results[1]) == ["daily"], "\(results[1])")
    }

    @Test("a conversion naming no campaign counts for a campaign created long before it sent: the window runs from the push, not from the campaign's creation", arguments: Backend.enabled)
    func attributionFromTheSendNotTheCreation(_ backend: Backend) async throws {
        let (store, _) = try await store(backend)
        let key = CampaignKey(app: "shop-ios", id: "parked")
        let json = #"{"v":1,"id":"parked","app":"shop-ios","audience":{"segment":"locale = en_US"},"notification":{"push_type":"alert","content":{"default":{"title":"Hi","body":"There"}}}}"#
        // Accepted 35 days ago (parked until its send_at), sent an hour ago, and completed.
        #expect(try await store.campaigns.record(key, audience: 10, shards: 1, definition: CampaignDefinition(record: json), now: now - 35 * 86_400_000))
        let sentAt = now - 3_600_000
        let targets = try await store.audience.page(app: "shop-ios", segment: nil, shard: ShardRange(after: nil, through: nil), cursor: nil, limit: 10, now: store.clock.wallMillis)
        _ = try await store.ledger.claim(campaign: key, targets: targets, owner: "w", now: sentAt)
        #expect(try await store.ledger.record(campaign: key, targets.map { LedgerOutcome(rowKey: $0.rowKey, state: .delivered) }, now: sentAt).count == 10)
        #expect(try await store.campaigns.transition(key, from: .running, to: .completed, now: sentAt))
        let results = try await store.engagement.resolve([event(.converted, "d3", campaign: nil, at: now - 60_000)], app: "shop-ios", now: now)
        guard case .success(let counted) = results[0] else { Issue.record("\(results[0])"); return }
        #expect(counted.attributions.map(\.campaign) == [key], "\(counted.attributions)")
    }

    @Test("a device converting in two currencies and in none is one converting device; a custom event naming no campaign counts under none, beside such a conversion too", arguments: Backend.enabled)
    func convertingDevicesAcrossCurrencies(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend, sentAt: now)
        let device = try #require(treated(campaign).first)
        let signup = EngagementEvent(
            id: "signup-1", app: "shop-ios", kind: .custom, device: device, campaign: nil, variant: nil, sendID: nil, at: now + 500,
            action: nil, name: "signup", value: nil, currency: nil, receivedAt: now)
        let events = [
            event(.converted, device, at: now + 100, value: 10, currency: "EUR"),
            event(.converted, device, at: now + 200, value: 12, currency: "USD"),
            event(.converted, device, campaign: nil, at: now + 300),
            signup,
        ]
        let resolved = try await store.engagement.resolve(events, app: "shop-ios", now: now).map { try $0.get() }
        #expect(resolved[3].attributions.isEmpty, "\(resolved[3].attributions)")
        #expect(try await store.engagement.count(resolved, now: now).count == 4)
        let variant = campaign.countedName(of: campaign.share(of: device)) ?? ""
        let conversions = try await store.engagement.counts(campaign: sale).filter { $0.kind == .converted }
        #expect(conversions.map(\.events).reduce(0, +) == 3 && conversions.map(\.devices).reduce(0, +) == 1, "\(conversions)")
        let stats = try await store.campaignStats(sale).jsonValue
        #expect(stats["variants"]?[variant]?["conversions"]?["devices"] == .int(1), "\(stats)")
        #expect(try await store.engagement.counts(campaign: sale).allSatisfy { $0.kind != .custom })
    }

    @Test("migration 29: a device that converted before it, counted under its currency only, is not counted again when it converts after it", arguments: Backend.enabled)
    func conversionsCountedBeforeMigration29(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let device = try #require(treated(campaign).first)
        let counted = try await store.engagement.resolve([event(.converted, device, value: 5, currency: "EUR")], app: "shop-ios", now: now).map { try $0.get() }
        #expect(try await store.engagement.count(counted, now: now).count == 1)
        // Back to how it was counted before: the pair under the EUR group only.
        _ = try await store.ledger.executor.run { connection throws(StoreError) in
            try connection.executeScript("""
                INSERT INTO engagement_groups (campaign, variant, kind, detail)
                    SELECT campaign, variant, kind, 'EUR' FROM engagement_groups WHERE kind = 'converted' AND detail = '';
                UPDATE engagement_group_devices SET group_id = (SELECT id FROM engagement_groups WHERE kind = 'converted' AND detail = 'EUR')
                WHERE group_id = (SELECT id FROM engagement_groups WHERE kind = 'converted' AND detail = '');
                DELETE FROM engagement_groups WHERE kind = 'converted' AND detail = '';
                DELETE FROM schema_migrations WHERE version = 29;
                """)
        }
        #expect(try await store.migrate() == [29])
        let again = try await store.engagement.resolve([event(.converted, device, at: now - 500, value: 7, currency: "EUR")], app: "shop-ios", now: now).map { try $0.get() }
        #expect(try await store.engagement.count(again, now: now).count == 1)
        let conversions = try await store.engagement.counts(campaign: sale).filter { $0.kind == .converted }
        #expect(conversions.map(\.events).reduce(0, +) == 2 && conversions.map(\.devices).reduce(0, +) == 1, "\(conversions)")
    }

    @Test("every event id counts once: the same batch again, or an event again with its own id, changes nothing; devices are counted once per kind", arguments: Backend.enabled)
    func countsOnce(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let treated = treated(campaign)
        let first = try #require(treated.first)
        var events = treated.map { event(.opened, $0) }
        events.append(event(.opened, first, at: now - 500))  // the same device opens twice
        events.append(event(.action, first, action: "track"))
        events.append(event(.converted, first, value: 12.5, currency: "EUR"))
        let resolved = try await store.engagement.resolve(events, app: "shop-ios", now: now).map { try $0.get() }
        #expect(try await store.engagement.count(resolved, now: now).count == events.count)
        #expect(try await store.engagement.count(resolved, now: now).isEmpty, "a replay counted again")
        let rows = try await store.engagement.counts(campaign: sale)
        let opened = rows.filter { $0.kind == .opened }
        #expect(opened.map(\.events).reduce(0, +) == Int64(treated.count + 1))
        #expect(opened.map(\.devices).reduce(0, +) == Int64(treated.count))
        let variant = campaign.countedName(of: campaign.share(of: first)) ?? ""
        #expect(rows.contains(EngagementCount(variant: variant, kind: .action, detail: "track", events: 1, devices: 1, value: 0)))
        #expect(rows.contains(EngagementCount(variant: variant, kind: .converted, detail: "EUR", events: 1, devices: 1, value: 12.5)))
        // The stats from them.
        let stats = try await store.campaignStats(sale)
        #expect(stats.groups[variant]?.engagement.contains { $0.kind == .converted } == true)
    }

    @Test("a batch of seen and new events in any order: exactly the new ones come back, however SQLite orders their rows", arguments: Backend.enabled)
    func newEventsComeBackInTheirOrder(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let devices = treated(campaign)
        let events = devices.flatMap { [event(.opened, $0), event(.dismissed, $0)] }
        let seen = Set(events.indices.filter { $0 % 3 == 0 })
        let first = try await store.engagement.resolve(seen.sorted().map { events[$0] }, app: "shop-ios", now: now).map { try $0.get() }
        #expect(try await store.engagement.count(first, now: now).count == seen.count)
        // All of them, in reverse order of their ids: the new ones come back, in that order.
        let all = events.sorted { $0.id > $1.id }
        let resolved = try await store.engagement.resolve(all, app: "shop-ios", now: now).map { try $0.get() }
        let new = try await store.engagement.count(resolved, now: now).map(\.event.id)
        #expect(new == all.map(\.id).filter { id in !seen.contains { events[$0].id == id } })
        let opened = try await store.engagement.counts(campaign: sale).filter { $0.kind == .opened }
        #expect(opened.map(\.devices).reduce(0, +) == Int64(devices.count))
    }

    @Test("ids of events past the horizon are forgotten once they were also counted that long ago, and such an event read again is refused as too old rather than counted twice; an id first sent late outlives its time, against a resend with a newer one", arguments: Backend.enabled)
    func oldEventIDsArePruned(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let device = try #require(treated(campaign).first)
        let day: Int64 = 86_400_000
        let old = event(.opened, device, at: now - 29 * day)
        let recent = event(.dismissed, device, at: now - day)
        let counted = try await store.engagement.resolve([old, recent], app: "shop-ios", now: now).map { try $0.get() }
        #expect(try await store.engagement.count(counted, now: now).count == 2)

        // Three days on, `old` happened 32 days ago, past the horizon and its margin, but was
        // counted 3 days ago: its id stays, and the same id again with a new time counts nothing.
        let later = now + 3 * day
        #expect(try await store.engagement.prune(now: later) == 0)
        let resent = event(.opened, device, at: later - 1_000, id: old.id)
        #expect(try await store.engagement.count([try store.engagement.resolve([resent], app: "shop-ios", now: later)[0].get()], now: later).isEmpty)
        // 31 days and a moment after they were counted, both ids go.
        let gone = now + 31 * day + 1
        #expect(try await store.engagement.prune(now: gone) == 2)
        let again = try await store.engagement.resolve([old], app: "shop-ios", now: gone)
        guard case .failure(let refusal) = again[0] else { Issue.record("a forgotten event was accepted again: \(again[0])"); return }
        #expect(refusal.field == "at" && refusal.reason == "is 60 days ago; events are counted up to 30 days after they happen", "\(refusal)")
        #expect(try await store.engagement.counts(campaign: sale).filter { $0.kind == .opened }.map(\.events).reduce(0, +) == 1)
    }

    @Test("the 30-day horizon is judged at the API's taking: an event the API took counts after a lag of hours, not past the day more its id is remembered", arguments: Backend.enabled)
    func horizonIsJudgedWhenTaken(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let device = try #require(treated(campaign).first)
        let (day, hour): (Int64, Int64) = (86_400_000, 3_600_000)
        var taken = event(.opened, device, at: now - 30 * day + 5_000)
        // Counted 6 hours after the API took it, 5 s inside the horizon then.
        let lagging = try await store.engagement.resolve([taken], app: "shop-ios", now: now + 6 * hour)
        #expect((try? lagging[0].get()) != nil, "\(lagging[0])")
        // Two days behind: past the horizon and the day its id would be remembered.
        let late = try await store.engagement.resolve([taken], app: "shop-ios", now: now + 2 * day)
        guard case .failure(let refusal) = late[0] else { Issue.record("counted two days late: \(late[0])"); return }
        #expect(refusal.field == "at" && refusal.reason == "is 31 days ago; events are counted up to 30 days after they happen", "\(refusal)")
        // Without the API's time (produced directly), the count's own clock judges.
        taken.receivedAt = nil
        let direct = try await store.engagement.resolve([taken], app: "shop-ios", now: now + 6 * hour)
        guard case .failure = direct[0] else { Issue.record("an event with no received_at was judged by another clock: \(direct[0])"); return }
    }

    @Test("a device removed between the check and the count: its event counts, the device does not, and no row keeps its key", arguments: Backend.enabled)
    func removedDeviceGetsNoRow(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let treated = treated(campaign)
        let (gone, kept) = (treated[0], treated[1])
        let resolved = try await store.engagement.resolve([event(.opened, gone), event(.opened, kept)], app: "shop-ios", now: now).map { try $0.get() }
        // Erased (or its token taken by another device) while the poll was being checked.
        #expect(try await store.ledger.executor.run { connection throws(StoreError) in
            try connection.execute("DELETE FROM devices WHERE app = 'shop-ios' AND device_id = \(gone)")
        } == 1)
        #expect(try await store.engagement.count(resolved, now: now).count == 2)
        let opened = try await store.engagement.counts(campaign: sale).filter { $0.kind == .opened }
        #expect(opened.map(\.events).reduce(0, +) == 2)
        #expect(opened.map(\.devices).reduce(0, +) == 1)
        let rows = try await store.ledger.executor.run { connection throws(StoreError) in
            try connection.queryAll("SELECT row_key FROM engagement_group_devices") { $0.int(0) ?? 0 }
        }
        #expect(rows == [resolved[1].rowKey])
    }

    @Test("migration 26 keeps each counted device of a store written before it: the same device again adds an event, not a device; another adds both", arguments: Backend.enabled)
    func distinctDevicesSurviveTheirMigration(_ backend: Backend) async throws {
        let (store, campaign) = try await store(backend)
        let treated = treated(campaign)
        let (first, second) = (treated[0], treated[1])
        let before = try await store.engagement.resolve([event(.opened, first), event(.dismissed, first)], app: "shop-ios", now: now).map { try $0.get() }
        #expect(try await store.engagement.count(before, now: now).count == 2)
        // Back to the shape before migration 26: one row of five texts per device and group.
        try await store.ledger.executor.run { connection throws(StoreError) in
            try connection.executeScript("""
                CREATE TABLE engagement_devices (
                    campaign TEXT NOT NULL, variant TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL, device TEXT NOT NULL,
                    PRIMARY KEY (campaign, variant, kind, detail, device)
                );
                INSERT INTO engagement_devices SELECT g.campaign, g.variant, g.kind, g.detail, d.device_id
                    FROM engagement_group_devices x JOIN engagement_groups g ON g.id = x.group_id JOIN devices d ON d.row_key = x.row_key;
                DROP TABLE engagement_group_devices;
                DROP TABLE engagement_groups;
                DELETE FROM schema_migrations WHERE version = 26;
                """)
        }
        #expect(try await store.migrate() == [26])
        let after = try await store.engagement.resolve([event(.opened, first, at: now - 10), event(.opened, second)], app: "shop-ios", now: now).map { try $0.get() }
        #expect(try await store.engagement.count(after, now: now).count == 2)
        let opened = try await store.engagement.counts(campaign: sale).filter { $0.kind == .opened }
        #expect(opened.map(\.events).reduce(0, +) == 3)
        #expect(opened.map(\.devices).reduce(0, +) == 2, "\(opened)")
        let dismissed = try await store.engagement.counts(campaign: sale).filter { $0.kind == .dismissed }
        #expect(dismissed.map(\.devices) == [1])
    }
}
