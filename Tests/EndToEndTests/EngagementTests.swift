import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSupport
import PushfanTestSupport
import Testing

/// The engagement loop with real processes: a campaign with two variants and a holdout is
/// sent, synthetic clients report opens and conversions through `POST /v1/apps/{app}/events`
/// with the marker each push carried, the counting worker is killed with SIGKILL between
/// batches, the batches are sent again and the topic is read again from its start by another
/// group: the stats show exactly the events made, per variant, with the holdout's own
/// conversions and its lift.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct EngagementTests {
    @Test("opens of 30 % of A and 10 % of B, half of them converting, 20 % of the holdout converting: counted exactly through kill -9, a resend and a replay; bad events refused naming the field")
    func exactCountsPerVariant() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await DashboardTests.startAPI(pipeline)
        defer { server.process.signal(SIGTERM) }
        let count = 2_000
        try await Self.importDevices(pipeline, count: count)
        try await pipeline.addApp("news", topic: "com.example.news", rate: 1_000, devices: 2)
        let first = try pipeline.startWorker("a")

        let json = #"{"v":1,"id":"ab","app":"shop","audience":{"segment":"locale = en_US"},"notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"}}},"variants":[{"id":"a","weight":45},{"id":"b","weight":45}],"holdout":10}"#
        try await pipeline.submit(json)
        let results = try await pipeline.results(of: "ab")
        #expect(results.completed?.finished == count)
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(json.utf8))
        let key = CampaignKey(app: "shop", id: "ab")

        // Who does what: the first 30 % of A's devices open, 10 % of B's; every other opener
        // converts (10 EUR); 20 % of the holdout converts, naming no campaign.
        var groups: [String: [String]] = [:]
        for index in 0..<count {
            let device = "shop-\(index)"
            groups[campaign.countedName(of: campaign.share(of: device)) ?? "", default: []].append(device)
        }
        let at = Int64(Date().timeIntervalSince1970 * 1000)
        func marker(_ device: String) -> String {
            #""campaign":"ab","send_id":"\#(EngagementMarker.sendID(campaign: key, device: device))","variant":"\#(campaign.countedName(of: campaign.share(of: device)) ?? "")""#
        }
        var events: [String] = []
        var expected: [String: (opened: Int, converted: Int)] = [:]
        for (variant, share) in [("a", 0.3), ("b", 0.1)] {
            let openers = Array(groups[variant, default: []].prefix(Int(Double(groups[variant, default: []].count) * share)))
            for (index, device) in openers.enumerated() {
                events.append(#"{"kind":"opened","device_id":"\#(device)",\#(marker(device)),"at":\#(at)}"#)
                if index % 2 == 0 { events.append(#"{"kind":"converted","device_id":"\#(device)",\#(marker(device)),"at":\#(at + 1),"value":10,"currency":"EUR"}"#) }
            }
            expected[variant] = (openers.count, (openers.count + 1) / 2)
        }
        let holdoutConverters = Array(groups["holdout", default: []].prefix(groups["holdout", default: []].count / 5))
        for device in holdoutConverters { events.append(#"{"kind":"converted","device_id":"\#(device)","at":\#(at + 2)}"#) }
        #expect(!holdoutConverters.isEmpty && (expected["a"]?.opened ?? 0) > (expected["b"]?.opened ?? 0) * 2)

        func post(_ batch: ArraySlice<String>) async throws -> (status: Int, body: String) {
            let answer = try await server.call("POST", "/v1/apps/shop/events", secret: server.application, json: #"{"events":[\#(batch.joined(separator: ","))]}"#)
            return (answer.status, answer.body)
        }
        let batches = stride(from: 0, to: events.count, by: 200).map { events[$0..<min($0 + 200, events.count)] }
        for (index, batch) in batches.enumerated() {
            let answer = try await post(batch)
            #expect(answer.status == 202 && answer.body.contains(#""accepted":\#(batch.count)"#), "\(answer.body)")
            // The counting worker dies mid-stream; another takes over.
            if index == 1 {
                first.signal(SIGKILL)
                _ = await first.waitForExit()
                try pipeline.startWorker("b")
            }
        }

        func stats() async throws -> [String: Any] {
            let answer = try await server.call("GET", "/v1/apps/shop/campaigns/ab/stats", secret: server.master)
            #expect(answer.status == 200, "\(answer.body)")
            return try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        }
        func devices(_ stats: [String: Any], _ variant: String, _ path: String...) -> Int? {
            var current: Any? = (stats["variants"] as? [String: Any])?[variant]
            for key in path { current = (current as? [String: Any])?[key] }
            return (current as? NSNumber)?.intValue
        }
        func matches(_ stats: [String: Any]) -> Bool {
            devices(stats, "a", "opened", "devices") == expected["a"]?.opened && devices(stats, "b", "opened", "devices") == expected["b"]?.opened
                && devices(stats, "a", "conversions", "devices") == expected["a"]?.converted && devices(stats, "b", "conversions", "devices") == expected["b"]?.converted
                && devices(stats, "holdout", "conversions", "devices") == holdoutConverters.count
        }
        var latest: [String: Any] = [:]
        var counted = false
        let deadline = ContinuousClock.now + .seconds(60)
        while !counted && ContinuousClock.now < deadline {
            latest = try await stats()
            counted = matches(latest)
            if !counted { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(counted, "expected \(expected), holdout \(holdoutConverters.count); stats \(latest)")
        // Events, not only devices, are exact: each was made once.
        #expect(devices(latest, "a", "opened", "events") == expected["a"]?.opened)
        #expect(devices(latest, "a", "delivered") == groups["a"]?.count && devices(latest, "holdout", "outcomes", "skipped") == groups["holdout"]?.count)
        let variantA = (latest["variants"] as? [String: Any])?["a"] as? [String: Any]
        #expect(((variantA?["conversions"] as? [String: Any])?["value"] as? [String: Any])?["EUR"] as? Double == Double((expected["a"]?.converted ?? 0) * 10))
        let openRate = (variantA?["open_rate"] as? NSNumber)?.doubleValue ?? -1
        #expect(abs(openRate - Double(expected["a"]?.opened ?? 0) / Double(groups["a"]?.count ?? 1)) < 0.0001)
        let lift = try #require(latest["holdout_lift"] as? [String: Any], "no lift: \(latest)")
        #expect((lift["holdout_rate"] as? NSNumber)?.doubleValue == Double(holdoutConverters.count) / Double(groups["holdout"]?.count ?? 1))

        // The same batches again (a client retrying): taken, counted as nothing new. And the
        // whole topic read again by another group: nothing new either.
        for batch in batches.prefix(2) { #expect(try await post(batch).status == 202) }
        let replay = try pipeline.startWorker("replay", extra: ["--group", "replay", "--no-planner", "--no-sender"])
        let total = events.count + batches.prefix(2).map(\.count).reduce(0, +)
        let replayed = await Pipeline.eventually(timeout: .seconds(60)) { Self.countedLines(replay.standardError).records >= total }
        let replayCounts = Self.countedLines(replay.standardError)
        #expect(replayed && replayCounts.new == 0, "the replaying worker read \(replayCounts.records) of \(total) records and counted \(replayCounts.new) as new")
        #expect(matches(try await stats()), "the counts changed after the resend and the replay")

        // Bad events: the batch is refused whole, each problem named; nothing of it counts.
        let good = events[0]
        let sendID = EngagementMarker.sendID(campaign: key, device: "shop-1")
        // A device registered after the campaign sent, as anyone with the application secret can.
        let registered = try await server.call("PUT", "/v1/apps/shop/devices/late-1", secret: server.application, json: #"{"token":"\#(String(repeating: "7", count: 64))"}"#)
        #expect(registered.status == 201, "\(registered.body)")
        let heldOut = try #require(groups["holdout"]?.first)
        let bad: [(event: String, field: String, says: String)] = [
            (#"{"kind":"clicked","device_id":"shop-1","at":\#(at)}"#, "events[1].kind", "must be one of received, opened"),
            (#"{"kind":"opened","device_id":"shop-1","campaign":"ab","send_id":"0123456789abcdef","at":\#(at)}"#, "events[1].send_id", "is not the send id"),
            (#"{"kind":"opened","device_id":"news-0","campaign":"ab","send_id":"\#(sendID)","at":\#(at)}"#, "events[1].device_id", "app shop has no device news-0"),
            (#"{"kind":"opened","device_id":"shop-1","campaign":"ab","send_id":"\#(sendID)","at":\#(at + 3_600_000)}"#, "events[1].at", "ahead of the server's clock"),
            (#"{"kind":"opened","device_id":"shop-1","campaign":"nope","send_id":"\#(sendID)","at":\#(at)}"#, "events[1].campaign", "app shop has no campaign nope"),
            (#"{"kind":"opened","device_id":"shop-1","campaign":"ab","send_id":"\#(sendID)","at":\#(at),"colour":"red"}"#, "events[1].colour", "not a field of an event"),
            (#"{"kind":"opened","device_id":"late-1","campaign":"ab","send_id":"\#(EngagementMarker.sendID(campaign: key, device: "late-1"))","at":\#(at)}"#,
             "events[1].campaign", "campaign ab has sent nothing to device late-1"),
            (#"{"kind":"opened","device_id":"\#(heldOut)","campaign":"ab","send_id":"\#(EngagementMarker.sendID(campaign: key, device: heldOut))","at":\#(at)}"#,
             "events[1].campaign", "holdout, which is sent nothing: only its conversions count"),
        ]
        for (event, field, says) in bad {
            let answer = try await post([good, event])
            #expect(answer.status == 422 && answer.body.contains(#""code":"invalid_events""#) && answer.body.contains(#""field":"\#(field)""#) && answer.body.contains(says),
                    "\(field): \(answer.body)")
        }
        let tooMany = try await post(ArraySlice(Array(repeating: good, count: 1_001)))
        #expect(tooMany.status == 422 && tooMany.body.contains(#""code":"too_many_events""#) && tooMany.body.contains("1001 events; a batch has 1 to 1000"), "\(tooMany.body)")
        let empty = try await post(ArraySlice([]))
        #expect(empty.status == 400 && empty.body.contains(#""code":"invalid_input""#) && empty.body.contains(#""field":"events""#), "\(empty.body)")
        let otherApp = try await server.call("POST", "/v1/apps/news/events", secret: server.application, json: #"{"events":[\#(good)]}"#)
        #expect(otherApp.status == 401, "shop's secret on news: \(otherApp.status) \(otherApp.body)")
        #expect(matches(try await stats()), "a refused batch changed the counts")

        // The CLI shows the same counts from the store.
        let cli = try await pipeline.run(["campaigns", "stats", "shop/ab", "--json", "--database", pipeline.database])
        let cliStats = try #require(try JSONSerialization.jsonObject(with: Data(cli.output.utf8)) as? [String: Any])
        #expect(matches(cliStats), "\(cli.output)")
        let table = try await pipeline.run(["campaigns", "stats", "shop/ab", "--database", pipeline.database])
        #expect(table.output.contains("holdout lift:"), "\(table.output)")

        // The dashboard's variant panel, as a browser draws it, shows the same counts and the lift.
        let dom = try await DashboardTests.dumpDOM(server, directory: pipeline.directory, query: "?campaign=shop%2Fab")
        for variant in ["a", "b"] {
            let row = try #require(dom.range(of: #"data-variant="\#(variant)""#).map { String(dom[$0.lowerBound...].prefix(200)) }, "no row for \(variant)")
            #expect(row.contains(#"data-opened="\#(expected[variant]?.opened ?? -1)""#) && row.contains(#"data-converted="\#(expected[variant]?.converted ?? -1)""#), "\(row)")
        }
        #expect(dom.contains(#"data-lift="shown""#) && dom.contains("Holdout lift"), "\(dom.suffix(3000))")
    }

    @Test("A/B with a winner: the variants go to the test group, opens make b the winner, the rest gets b alone, the holdout nothing; the decision and its rates are in the stats")
    func winnerTakesTheRest() async throws {
        let pipeline = try await Pipeline()
        defer { pipeline.stop() }
        let server = try await APITests.start(pipeline)
        defer { server.process.signal(SIGTERM) }
        let count = 1_000
        try await Self.importDevices(pipeline, count: count)
        try pipeline.startWorker("a")
        // The decision comes 15 s after planning: the test group's ~270 sends and the opens
        // below take a few seconds of it.
        let json = #"{"v":1,"id":"pick","app":"shop","audience":{"segment":"locale = en_US"},"notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"}}},"variants":[{"id":"a","weight":45},{"id":"b","weight":45}],"holdout":10,"winner":{"test_percent":30,"after_s":15,"metric":"open_rate"}}"#
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(json.utf8))
        let key = CampaignKey(app: "shop", id: "pick")
        let devices = (0..<count).map { "shop-\($0)" }
        let tested = devices.filter { campaign.phase(of: $0) == .test && campaign.share(of: $0) != .holdout }
        try await pipeline.submit(json)
        let sent = await Pipeline.eventually(timeout: .seconds(60)) { pipeline.delivered(topic: "com.example.shop").count >= tested.count }
        #expect(sent, "the test group was not sent: \(pipeline.delivered(topic: "com.example.shop").count) of \(tested.count)")
        #expect(pipeline.delivered(topic: "com.example.shop").count == tested.count, "more than the test group went out before the decision")

        // Half of b's test devices open, a tenth of a's.
        var events: [String] = []
        for variant in ["a", "b"] {
            let group = tested.filter { campaign.variantID(of: $0) == variant }
            for device in group.prefix(group.count / (variant == "b" ? 2 : 10)) {
                let sendID = EngagementMarker.sendID(campaign: key, device: device)
                events.append(#"{"kind":"opened","device_id":"\#(device)","campaign":"pick","send_id":"\#(sendID)","at":\#(Int64(Date().timeIntervalSince1970 * 1000))}"#)
            }
        }
        let posted = try await server.call("POST", "/v1/apps/shop/events", secret: server.application, json: #"{"events":[\#(events.joined(separator: ","))]}"#)
        #expect(posted.status == 202, "\(posted.body)")

        let results = try await pipeline.results(of: "pick", timeout: .seconds(120))
        #expect(results.completed?.finished == count)
        for device in devices {
            let result = try #require(results.devices[device], "no result for \(device)")
            if campaign.share(of: device) == .holdout {
                #expect(result.outcome == .skipped && result.reason == "holdout")
            } else if campaign.phase(of: device) == .test {
                #expect(result.variant == campaign.variantID(of: device), "\(device): \(result)")
            } else {
                #expect(result.outcome == .delivered && result.variant == "b", "\(device) in the rest: \(result)")
            }
        }
        let answer = try await server.call("GET", "/v1/apps/shop/campaigns/pick/stats", secret: server.master)
        let stats = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        let decision = try #require((stats["winner"] as? [String: Any])?["decision"] as? [String: Any], "\(answer.body)")
        #expect(decision["variant"] as? String == "b", "\(decision)")
        let rates = decision["rates"] as? [String: Double] ?? [:]
        #expect((rates["b"] ?? 0) > (rates["a"] ?? 1), "\(rates)")
        let decidedOver = decision["devices"] as? [String: Int] ?? [:]
        #expect(decidedOver.values.reduce(0, +) == tested.count, "the decision counted \(decidedOver), the test group had \(tested.count)")
    }

    /// Devices `shop-0` … `shop-(count - 1)` of app shop (which `pushfan api` added), locale en_US.
    @Test("an app on Notificare's SDK: pushes to devices registered through its calls carry what it looks for; GET /notification/{id} answers the variant's texts in the asker's language; Receive, Open, custom events and action replies count as native events, Influenced and app events are taken uncounted, and bad ones are refused in the SDK's field names")
    func notificareSDKEngagement() async throws {
        let pipeline = try await Pipeline(simArguments: ["--log-payloads"])
        defer { pipeline.stop() }
        let server = try await DashboardTests.startAPI(pipeline)
        defer { server.process.signal(SIGTERM) }
        try pipeline.startWorker("a")
        func sdk(_ method: String, _ path: String, _ json: String? = nil, language: String = "de-DE, de;q=0.9") async throws -> (status: Int, body: String) {
            let answer = try await server.call(method, path, secret: server.application, json: json, headers: ["X-Notificare-SDK-Version: 3.10.0", "Accept-Language: \(language)"])
            return (answer.status, answer.body)
        }
        let count = 20
        for index in 0..<count {
            let registered = try await sdk("POST", "/device", #"{"deviceID":"\#(Pipeline.token(index))","transport":"APNS","language":"\#(index % 2 == 0 ? "de" : "en")","region":"DE","platform":"iOS"}"#)
            #expect(registered.status == 200, "\(registered.body)")
        }
        let json = #"{"v":1,"id":"sdk","app":"shop","audience":{"segment":"locale in (de_DE, en_DE)"},"notification":{"push_type":"alert","content":{"default":{"title":"Sale","body":"20% off"},"locales":{"de":{"title":"Rabatt","body":"20 % günstiger"}}},"aps":{"category":"OFFER"},"data":{"media_url":"https://cdn.example.com/sale.png"},"actions":[{"id":"buy"}]},"variants":[{"id":"a","weight":50},{"id":"b","weight":50,"content":{"default":{"title":"Last day","body":"Ends tonight"},"locales":{"de":{"title":"Letzter Tag","body":"Endet heute"}}}}]}"#
        try await pipeline.submit(json)
        #expect(try await pipeline.results(of: "sdk").completed?.count(of: .delivered) == count)
        let campaign = try MessageCodec.decode(Campaign.self, from: Data(json.utf8))

        // Each push: the SDK's keys with the notification id of the device's variant, and ours.
        var notificationOf: [String: String] = [:]
        for line in pipeline.delivered(topic: "com.example.shop") {
            let text = try #require(line["payload"] as? String, "no payload logged: \(line)")
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            let token = try #require(line["token"] as? String)
            let variant = try #require(campaign.countedName(of: campaign.share(of: token)))
            #expect(payload["x-sender"] as? String == "notificare" && payload["x-application"] as? String == "shop", "\(text)")
            #expect(payload["id"] as? String == "sdk~\(variant)" && payload["notificationId"] as? String == "sdk~\(variant)", "\(text)")
            #expect(payload["attachment"] as? [String: String] == ["mimeType": "image/png", "uri": "https://cdn.example.com/sale.png"], "\(text)")
            #expect((payload["pushfan"] as? [String: String])?["variant"] == variant, "\(text)")
            notificationOf[token] = payload["id"] as? String
        }
        #expect(notificationOf.count == count && Set(notificationOf.values) == ["sdk~a", "sdk~b"])

        // What the SDK fetches when a push is opened, as its decoder needs it.
        let fetched = try await sdk("GET", "/notification/sdk~b")
        let notification = try #require((try JSONSerialization.jsonObject(with: Data(fetched.body.utf8)) as? [String: Any])?["notification"] as? [String: Any], "\(fetched.body)")
        #expect(notification["_id"] as? String == "sdk~b" && notification["type"] as? String == "re.notifica.notification.Alert")
        #expect(notification["title"] as? String == "Letzter Tag" && notification["message"] as? String == "Endet heute", "\(fetched.body)")
        #expect((notification["time"] as? String).map { $0.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil } == true, "\(fetched.body)")
        #expect((notification["actions"] as? [[String: Any]])?.first?["label"] as? String == "buy")
        #expect((notification["attachments"] as? [[String: String]]) == [["mimeType": "image/png", "uri": "https://cdn.example.com/sale.png"]])
        #expect(try await sdk("GET", "/notification/sdk~a", language: "en").body.contains(#""message":"20% off""#))
        for missing in ["sdk~c", "nope", "sdk~a~b"] {
            let answer = try await sdk("GET", "/notification/\(missing)")
            #expect(answer.status == 404 && answer.body.contains("notification not found"), "\(missing): \(answer.body)")
        }

        // Every device receives, the first eight open (one of them twice: the SDK's retry of
        // the same event), two reply with the action (one of them twice: a retry, which the
        // SDK sends without a time, arriving later); Influenced and app events are not counted.
        let at = Int64(Date().timeIntervalSince1970 * 1000)
        var opened: [String: Int] = [:]
        for index in 0..<count {
            let token = Pipeline.token(index)
            let id = try #require(notificationOf[token])
            let event = { (type: String, time: Int64) in #"{"type":"\#(type)","timestamp":\#(time),"deviceID":"\#(token)","notification":"\#(id)"}"# }
            #expect(try await sdk("POST", "/event", event("re.notifica.event.notification.Receive", at)).status == 202)
            guard index < 8 else { continue }
            opened[String(id.dropFirst(4)), default: 0] += 1
            for _ in 0..<(index == 0 ? 2 : 1) { #expect(try await sdk("POST", "/event", event("re.notifica.event.notification.Open", at + 1)).status == 202) }
            #expect(try await sdk("POST", "/event", event("re.notifica.event.notification.Influenced", at + 1)).status == 202)
            for attempt in 0..<(index == 0 ? 2 : index == 1 ? 1 : 0) {
                if attempt > 0 { try await Task.sleep(for: .milliseconds(5)) }
                let reply = try await sdk("POST", "/reply", #"{"notification":"\#(id)","deviceID":"\#(token)","label":"buy","data":{}}"#)
                #expect(reply.status == 201, "\(reply.body)")
            }
        }
        let unknownAction = try await sdk("POST", "/reply", #"{"notification":"sdk~a","deviceID":"\#(Pipeline.token(0))","label":"Buy now"}"#)
        #expect(unknownAction.status == 404 && unknownAction.body.contains(#""field":"label""#), "\(unknownAction.body)")
        #expect(try await sdk("POST", "/event", #"{"type":"re.notifica.event.custom.wishlist","timestamp":\#(at),"deviceID":"\#(Pipeline.token(3))"}"#).status == 202)
        #expect(try await sdk("POST", "/event", #"{"type":"re.notifica.event.application.Open","timestamp":\#(at),"deviceID":"\#(Pipeline.token(3))"}"#).status == 202)

        // Refused, in the SDK's names.
        let token = Pipeline.token(0)
        let refusals: [(body: String, status: Int, field: String, says: String)] = [
            (#"{"type":"re.notifica.event.notification.Open","timestamp":\#(at),"deviceID":"\#(token)","notification":"5f0c2b6e1a9d4c3e8b7a6f5e"}"#, 404, "notification", "no campaign"),
            (#"{"type":"re.notifica.event.notification.Open","timestamp":\#(at),"deviceID":"\#(token)","notification":"sdk~c"}"#, 422, "notification", "of campaign sdk, not"),
            (#"{"type":"re.notifica.event.notification.Open","timestamp":\#(at),"deviceID":"00ff","notification":"sdk~a"}"#, 404, "deviceID", "has no device"),
            (#"{"type":"re.notifica.event.notification.Open","timestamp":\#(at),"deviceID":"\#(token)","notification":"not one of ours"}"#, 404, "notification", "not the id of a push"),
            (#"{"type":"re.notifica.event.application.Open","timestamp":\#(at)}"#, 400, "deviceID", "required"),
            (#"{"type":"re.notifica.event.application.Open","timestamp":\#(at),"deviceID":"\#(token)","data":[1]}"#, 400, "data", "expected an object"),
            (#"{"type":"re.notifica.event.notification.Open","timestamp":\#(at),"deviceID":"\#(token)"}"#, 400, "notification", "required"),
            (#"{"type":"re.notifica.event.notification.Open","deviceID":"\#(token)","notification":"sdk~a"}"#, 400, "timestamp", "milliseconds"),
            (#"{"type":"re.notifica.event.custom.two words","timestamp":\#(at),"deviceID":"\#(token)"}"#, 422, "type", "must be"),
        ]
        for (body, status, field, says) in refusals {
            let answer = try await sdk("POST", "/event", body)
            #expect(answer.status == status && answer.body.contains(#""field":"\#(field)""#) && answer.body.contains(says), "\(body): \(answer.status) \(answer.body)")
        }

        // A personalised notification, fetched without a device: each placeholder's default.
        try await pipeline.submit(#"{"v":1,"id":"hi","app":"shop","audience":{"segment":"locale = de_DE"},"notification":{"push_type":"alert","content":{"default":{"title":"Hi {{ attr.first_name | default: \"there\" }}","body":"You have {{ attr.points | default: \"no\" }} points"}}}}"#)
        #expect(try await pipeline.results(of: "hi").completed?.count(of: .delivered) == count / 2)
        let personal = try await sdk("GET", "/notification/hi", language: "en")
        #expect(personal.body.contains(#""title":"Hi there""#) && personal.body.contains(#""message":"You have no points""#), "\(personal.body)")

        // A campaign that fits only without the SDK's keys is refused at submit, saying why.
        func big(_ body: String) -> String {
            #"{"v":1,"id":"big","app":"shop","audience":{"segment":"locale = de_DE"},"notification":{"push_type":"alert","content":{"default":{"title":"Big","body":"\#(body)"}}}}"#
        }
        let probe = try MessageCodec.decode(Campaign.self, from: Data(big("x").utf8))
        let fits = try APNsPreparedPayload(campaign: probe, locale: nil, marker: EngagementMarker(campaign: "big", variant: nil)).bytes.count
        let tooBig = try await server.call("POST", "/v1/apps/shop/campaigns", secret: server.master, json: big(String(repeating: "x", count: 4_096 - fits - 20)))
        #expect(tooBig.status == 400 && tooBig.body.contains("payload_too_large") && tooBig.body.contains("Notificare"), "\(tooBig.status) \(tooBig.body)")

        func variant(_ stats: [String: Any], _ name: String, _ path: String...) -> Int? {
            var current: Any? = (stats["variants"] as? [String: Any])?[name]
            for key in path { current = (current as? [String: Any])?[key] }
            return (current as? NSNumber)?.intValue
        }
        func matches(_ stats: [String: Any]) -> Bool {
            let received = (variant(stats, "a", "received", "events") ?? 0) + (variant(stats, "b", "received", "events") ?? 0)
            let actions = (variant(stats, "a", "actions", "buy", "events") ?? 0) + (variant(stats, "b", "actions", "buy", "events") ?? 0)
            return received == count && actions == 2
                && variant(stats, "a", "opened", "events") == opened["a"] ?? 0 && variant(stats, "b", "opened", "events") == opened["b"] ?? 0
        }
        var latest: [String: Any] = [:]
        let deadline = ContinuousClock.now + .seconds(60)
        while !matches(latest) && ContinuousClock.now < deadline {
            let answer = try await server.call("GET", "/v1/apps/shop/campaigns/sdk/stats", secret: server.master)
            latest = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any] ?? [:]
            if !matches(latest) { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(matches(latest), "opened \(opened), stats \(latest)")
    }

    static func importDevices(_ pipeline: Pipeline, count: Int) async throws {
        var lines = ""
        for index in 0..<count { lines += #"{"device_id":"shop-\#(index)","token":"\#(Pipeline.token(index))","locale":"en_US"}"# + "\n" }
        let file = pipeline.directory + "/shop-devices.ndjson"
        try lines.write(toFile: file, atomically: true, encoding: .utf8)
        try await pipeline.run(["devices", "import", "--database", pipeline.database, "--app", "shop", file])
    }

    /// Records the events role read and counted as new, summed over its `events.counted` lines.
    static func countedLines(_ log: String) -> (records: Int, new: Int) {
        var total = (records: 0, new: 0)
        for line in log.split(separator: "\n") where line.contains("events.counted") {
            func number(_ name: String) -> Int {
                guard let range = line.range(of: "\(name)=") else { return 0 }
                return Int(line[range.upperBound...].prefix { $0.isNumber }) ?? 0
            }
            total.records += number("records")
            total.new += number("new")
        }
        return total
    }
}
