import Foundation
import PushfanAPI
import PushfanAPNsModel
import PushfanAPNsSim
import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport
import PushfanTemplates

/// What the fuzzers feed: every parser that reads bytes from outside. Each target runs one
/// input and checks what must hold whatever the input (a value that parses prints and
/// parses back the same; nothing traps). A failed check is a `preconditionFailure`, which
/// libFuzzer (and the regression tests over the corpus) see as a crash.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// The segment language: parse, print canonically, parse that back.
    case segment
    /// Personalised texts: parse a template, render it for a device.
    case template
    /// Campaign records as the planner and `pushfan submit` read them.
    case campaign
    /// Every other topic's records: tasks, results, control, dead letters.
    case records
    /// Stored templates as the API and `pushfan templates set` read them.
    case storedTemplate = "stored-template"
    /// Device import lines, NDJSON and CSV.
    case deviceNDJSON = "device-ndjson"
    case deviceCSV = "device-csv"
    /// The simulator's judgement of a request: path and headers from the input's lines, the
    /// rest as the body.
    case simRequest = "sim-request"
    /// The API's routing of a request path.
    case apiRouting = "api-routing"
    /// The API server's request heads and chunked bodies, as they come off a socket.
    case httpHead = "http-head"
    /// Request bodies as the API reads them: the fast JSON reader against `JSONDecoder`.
    case json

    package func run(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .segment: Self.segment(bytes)
        case .template: Self.template(bytes)
        case .campaign: Self.campaign(bytes)
        case .records: Self.records(bytes)
        case .storedTemplate: Self.storedTemplate(bytes)
        case .deviceNDJSON:
            var parser = DeviceImportParser(format: .ndjson, now: Self.importTime)
            _ = try? parser.parse(bytes: bytes)
        case .deviceCSV:
            var parser = DeviceImportParser(format: .csv, now: Self.importTime)
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).prefix(64) {
                do { _ = try parser.parse(line) } catch { if parser.needsHeader { break } }
            }
        case .simRequest: Self.simRequest(bytes)
        case .apiRouting: Self.apiRouting(bytes)
        case .httpHead: Self.httpHead(bytes)
        case .json: Self.json(bytes)
        }
    }

    package func run(_ data: [UInt8]) { data.withUnsafeBytes { run($0) } }

    /// What the fast reader reads, the decoder reads to the same value.
    static func json(_ bytes: UnsafeRawBufferPointer) {
        if let fast = JSONValue.parsedFast(bytes) {
            check((try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))) == fast, "the fast JSON reader accepted what the decoder reads otherwise")
        }
    }

    /// A fixed "now" for imports, so a run depends on its input only.
    static let importTime: Int64 = 1_800_000_000_000

    static func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { preconditionFailure(message()) }
    }

    static func segment(_ bytes: UnsafeRawBufferPointer) {
        guard let expression = try? SegmentParser.parse(String(decoding: bytes, as: UTF8.self)) else { return }
        let printed = expression.description
        guard let again = try? SegmentParser.parse(printed) else { return check(false, "canonical text does not parse: \(printed)") }
        check(again.description == printed, "canonical text is not stable: \(printed) → \(again.description)")
    }

    static let device = TemplateDevice(
        id: "d-1", locale: "de_DE", timezone: "Europe/Berlin", appVersion: "2.4", osVersion: "18.1",
        attributes: ["first_name": "Zoë 😀", "points": 12, "vip": true, "long": .string(String(repeating: "ä", count: 300))])

    static func template(_ bytes: UnsafeRawBufferPointer) {
        guard let template = try? TextTemplate.parse(String(decoding: bytes, as: UTF8.self)) else { return }
        _ = template.render(for: device)
        _ = template.render(for: TemplateDevice(id: "d-2"))
    }

    static func campaign(_ bytes: UnsafeRawBufferPointer) {
        guard let campaign = try? MessageCodec.decode(Campaign.self, from: bytes) else { return }
        let encoded = MessageCodec.encode(campaign)
        guard let again = try? MessageCodec.decode(Campaign.self, from: encoded) else {
            return check(false, "an accepted campaign, written back, is refused: \(String(decoding: encoded, as: UTF8.self))")
        }
        check(again == campaign, "an accepted campaign changes when written and read back")
        // What a sender builds from it, for a device of each share.
        var cache = TemplateCache()
        for device in ["d-1", "d-2", "d-3"] {
            var sent = campaign
            if case .variant(let index) = campaign.share(of: device) { sent = campaign.applying(variant: index) }
            sent.notification = sent.notification.personalised(for: Self.device, locale: "de_DE", templates: &cache)
            let marker = EngagementMarker(campaign: campaign.id, variant: campaign.variantID(of: device))
            _ = (try? APNsPreparedPayload(campaign: sent, locale: "de_DE", marker: marker))?.stamped(sendID: EngagementMarker.sendID(campaign: campaign.key, device: device))
        }
    }

    /// Each record type written and read back the same; a hand-written form is the generic
    /// encoder's bytes; a fast reader never accepts what the generic decoder reads otherwise.
    /// `MessageCodec.decode` itself tries the fast readers first, so these compare with
    /// `decodeGenerically`.
    static func records(_ bytes: UnsafeRawBufferPointer) {
        if let record = try? MessageCodec.decodeGenerically(ResultRecord.self, from: Data(bytes)) {
            check((try? MessageCodec.decodeGenerically(ResultRecord.self, from: MessageCodec.encode(record))) == record, "a result changes when written and read back")
            check(record.canonicalJSON.map { Data($0) } == MessageCodec.encodeGenerically(record), "the hand-written result differs from the generic encoder's")
            if case .device(let result) = record {
                check(result.encodedJSON().withUnsafeBytes { DeviceResult(canonicalJSON: $0) } == result, "the canonical reader disagrees with the writer")
            }
        }
        // The dashboard's fast reader (and the codec's, for results).
        if let fast = DeviceResult(canonicalJSON: bytes) {
            check((try? MessageCodec.decodeGenerically(ResultRecord.self, from: Data(bytes))) == .device(fast), "the fast reader accepted what the decoder reads otherwise")
        }
        // The events role's fast reader likewise, and it reads every event the API writes.
        if let event = try? MessageCodec.decodeGenerically(EngagementEvent.self, from: Data(bytes)) {
            check(MessageCodec.encode(event).withUnsafeBytes { EngagementEvent(canonicalJSON: $0) } == event, "the canonical event reader disagrees with the writer")
            check(event.canonicalJSON.map { Data($0) } == MessageCodec.encodeGenerically(event), "the hand-written event differs from the generic encoder's")
        }
        if let fast = EngagementEvent(canonicalJSON: bytes) {
            check((try? MessageCodec.decodeGenerically(EngagementEvent.self, from: Data(bytes))) == fast, "the fast event reader accepted what the decoder reads otherwise")
        }
        if let task = try? MessageCodec.decodeGenerically(TaskRecord.self, from: Data(bytes)) {
            check((try? MessageCodec.decodeGenerically(TaskRecord.self, from: MessageCodec.encode(task))) == task, "a task changes when written and read back")
            check(task.canonicalJSON.map { Data($0) } == MessageCodec.encodeGenerically(task), "the hand-written task differs from the generic encoder's")
        }
        // The workers' fast task reader.
        if let fast = TaskRecord.canonical(bytes), (try? fast.validate()) != nil {
            check((try? MessageCodec.decodeGenerically(TaskRecord.self, from: Data(bytes))) == fast, "the fast task reader accepted what the decoder reads otherwise")
        }
        _ = try? MessageCodec.decode(ControlRecord.self, from: bytes)
        _ = try? MessageCodec.decode(DeadLetterRecord.self, from: bytes)
    }

    static func storedTemplate(_ bytes: UnsafeRawBufferPointer) {
        guard let template = try? NotificationTemplate.decode(Array(bytes)) else { return }
        check((try? NotificationTemplate.decode(template.canonicalJSON)) == template, "a stored template changes when written and read back")
    }

    /// Line 1: the `:path`; lines 2 to 4: apns-topic, apns-push-type, apns-priority; the
    /// rest: the body.
    static func simRequest(_ bytes: UnsafeRawBufferPointer) {
        var lines = Array(bytes).split(separator: UInt8(ascii: "\n"), maxSplits: 4, omittingEmptySubsequences: false).map(Array.init)
        while lines.count < 5 { lines.append([]) }
        var request = SimRequest()
        request.method = "POST"
        request.path = String(decoding: lines[0], as: UTF8.self)
        request.topic = String(decoding: lines[1], as: UTF8.self)
        request.pushType = lines[2].isEmpty ? nil : String(decoding: lines[2], as: UTF8.self)
        request.priority = lines[3].isEmpty ? nil : String(decoding: lines[3], as: UTF8.self)
        request.body = Array(lines[4].prefix(SimRequest.maxBodyBytes))
        guard case .success(let token) = RequestRules.checkTarget(request) else { return }
        check(token.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }, "a token that is not lowercase hex: \(token)")
        _ = RequestRules.checkHeadersAndPayload(request, token: token)
        _ = PayloadCheck.isAcceptable(request.body, requiring: .apsObject)
    }

    static let router: Router<Int> = {
        var router = Router<Int>()
        for (index, pattern) in ["/v1/apps/{app}/devices/{device}", "/v1/apps/{app}/segments/count", "/v1/apps/{app}/segments/{name}",
                                 "/v1/apps/{app}/templates/{name}", "/v1/apps/{app}/campaigns/{campaign}/{action}", "/healthz"].enumerated() {
            router.add("GET", pattern, index)
        }
        return router
    }()

    static func apiRouting(_ bytes: UnsafeRawBufferPointer) {
        let path = String(decoding: bytes, as: UTF8.self)
        if case .found(_, let parameters, let pattern) = router.match(method: "GET", path: path) {
            check(parameters.values.allSatisfy { !$0.isEmpty }, "an empty parameter routed: \(path.debugDescription)")
            check(pattern.split(separator: "{").count - 1 == parameters.count, "parameters missing for \(pattern)")
        }
        _ = try? DeviceJSONReader.registration(json: Array(bytes), deviceID: "d-1")
    }

    /// A head found by scanning is parsed; the same bytes scanned in two parts find the same
    /// end; what follows the head is fed to the chunked decoder in one piece and byte by byte,
    /// which must agree.
    static func httpHead(_ bytes: UnsafeRawBufferPointer) {
        let limit = 4096
        let whole = try? RequestHeadParser.scan(bytes, from: 0, limit: limit)
        if bytes.count > 1 {
            let half = bytes.count / 2
            var resumed: RequestHeadParser.Scan?
            switch try? RequestHeadParser.scan(UnsafeRawBufferPointer(rebasing: bytes[..<half]), from: 0, limit: limit) {
            case .complete(let end)?: resumed = .complete(end: end)
            case .incomplete(let resume)?: resumed = try? RequestHeadParser.scan(bytes, from: resume, limit: limit)
            case nil: resumed = nil
            }
            // A split scan may stop at an error the whole one reaches later, never disagree on an end.
            if case .complete(let end)? = whole, let resumed { check(resumed == .complete(end: end), "a split scan found another end") }
        }
        guard case .complete(let end)? = whole else { return }
        _ = try? RequestHeadParser.parse(UnsafeRawBufferPointer(rebasing: bytes[..<end]))
        let rest = UnsafeRawBufferPointer(rebasing: bytes[end...])
        var once = ChunkedBody(limit: 1 << 16)
        let onceResult = try? once.feed(rest)
        var bytewise = ChunkedBody(limit: 1 << 16)
        var bytewiseResult: ChunkedBody.Progress? = .needMore
        for index in 0..<rest.count {
            guard let progress = try? bytewise.feed(UnsafeRawBufferPointer(rebasing: rest[index..<(index + 1)])) else {
                bytewiseResult = nil
                break
            }
            if case .complete = progress {
                bytewiseResult = .complete(consumed: index + 1)
                break
            }
        }
        check((onceResult == nil) == (bytewiseResult == nil), "the chunked decoder refuses in one split and not another")
        if let onceResult, let bytewiseResult {
            check(onceResult == bytewiseResult && once.body == bytewise.body, "the chunked decoder reads another body byte by byte")
        }
    }
}
