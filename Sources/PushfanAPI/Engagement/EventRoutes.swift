import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// `POST /v1/apps/{app}/events`: what devices did with pushes, in batches of up to 1,000,
/// with the application or the master secret. A batch is taken whole or not at all: every
/// event is checked (its fields, and against the store: the app's device, the app's
/// campaign, the send id its marker gave that device, the device's variant, a time not ahead
/// of the server's), and any problem refuses the batch with each event's problems listed.
/// A taken batch is on the events topic before the answer (202); a worker counts it.
enum EventRoutes {
    static let maxBatch = 1_000

    static func add(to router: inout Router<Route>, store: DeviceStore, writer: ResultsWriter) {
        router.add("POST", "/v1/apps/{app}/events", Route(roles: [.application, .master]) { call in
            let app = call.parameter("app")
            let body = try APIService.jsonObject(call.request)
            if let unknown = body.keys.sorted().first(where: { $0 != "events" }) {
                throw APIError(400, "invalid_input", "\(unknown): not a field of an events batch (it has events)", field: unknown)
            }
            guard case .array(let items)? = body["events"] else { throw APIError(400, "invalid_input", "events: expected an array of events", field: "events") }
            guard !items.isEmpty else { throw APIError(400, "invalid_input", "events: an empty batch; a batch has 1 to \(maxBatch)", field: "events") }
            guard items.count <= maxBatch else {
                throw APIError(422, "too_many_events", "events: \(items.count) events; a batch has 1 to \(maxBatch)", field: "events")
            }
            let now = store.clock.wallMillis
            var problems: [(index: Int, field: String, message: String)] = []
            var events: [(index: Int, event: EngagementEvent)] = []
            for (index, item) in items.enumerated() {
                do {
                    events.append((index, try event(item, app: app, receivedAt: now)))
                } catch let problem as Problem {
                    problems.append((index, problem.field, problem.reason))
                }
            }
            let resolved = try await store.engagement.resolve(events.map(\.event), app: app, now: now)
            for (entry, result) in zip(events, resolved) {
                if case .failure(let refusal) = result { problems.append((entry.index, refusal.field, refusal.reason)) }
            }
            guard problems.isEmpty else { throw refusal(problems.sorted { $0.index < $1.index }, of: items.count) }
            try await writer.events(events.map(\.event))
            return .json(202, ["accepted": .int(Int64(events.count)), "ids": .array(events.map { .string($0.event.id) })])
        })
    }

    /// 422 with every event's problems: `{"error": {"code": "invalid_events", …, "events":
    /// [{"index", "field", "message"}]}}`.
    private static func refusal(_ problems: [(index: Int, field: String, message: String)], of count: Int) -> APIError {
        let listed = problems.map { problem -> JSONValue in
            ["index": .int(Int64(problem.index)), "field": .string("events[\(problem.index)].\(problem.field)"), "message": .string(problem.message)]
        }
        let first = problems[0]
        var error = APIError(
            422, "invalid_events",
            "\(Set(problems.map(\.index)).count) of \(count) events cannot be counted, so none was taken; the first: events[\(first.index)].\(first.field) \(first.message)",
            field: "events[\(first.index)].\(first.field)")
        error.details = ["events": .array(listed)]
        return error
    }

    /// Why one event of a batch is refused before the store is asked.
    struct Problem: Error {
        let field: String
        let reason: String
    }

    static let fields: Set<String> = ["id", "kind", "device_id", "campaign", "variant", "send_id", "at", "action", "name", "value", "currency"]

    /// One event as a client sends it: the marker's fields as they came, `device_id`, and
    /// `at` in epoch milliseconds; `id` the client's own or derived from the rest.
    static func event(_ item: JSONValue, app: String, receivedAt: Int64) throws(Problem) -> EngagementEvent {
        guard case .object(let object) = item else { throw Problem(field: "", reason: "an event is an object") }
        if let unknown = object.keys.sorted().first(where: { !fields.contains($0) }) {
            throw Problem(field: unknown, reason: "is not a field of an event (\(fields.sorted().joined(separator: ", ")))")
        }
        func text(_ field: String) throws(Problem) -> String? {
            switch object[field] {
            case nil, .null?: return nil
            case .string(let value)?: return value
            default: throw Problem(field: field, reason: "expected a string")
            }
        }
        guard let kindText = try text("kind") else { throw Problem(field: "kind", reason: "required: one of \(EngagementEvent.Kind.allCases.map(\.rawValue).joined(separator: ", "))") }
        guard let kind = EngagementEvent.Kind(rawValue: kindText) else {
            throw Problem(field: "kind", reason: "must be one of \(EngagementEvent.Kind.allCases.map(\.rawValue).joined(separator: ", ")), got \(kindText.debugDescription)")
        }
        guard let device = try text("device_id") else { throw Problem(field: "device_id", reason: "required") }
        guard case .int(let at)? = object["at"] else { throw Problem(field: "at", reason: "required: when it happened, in milliseconds since the epoch") }
        var value: Double?
        switch object["value"] {
        case nil, .null?: value = nil
        case .int(let number)?: value = Double(number)
        case .number(let number)?: value = number
        default: throw Problem(field: "value", reason: "expected a number")
        }
        let (campaign, sendID, action, name, currency) = (try text("campaign"), try text("send_id"), try text("action"), try text("name"), try text("currency"))
        let id = try text("id") ?? EngagementEvent.derivedID(
            kind: kind, device: device, sendID: sendID, campaign: campaign, at: at, action: action, name: name, value: value, currency: currency)
        let event = EngagementEvent(
            id: id, app: app, kind: kind, device: device, campaign: campaign, variant: try text("variant"), sendID: sendID, at: at,
            action: action, name: name, value: value, currency: currency, receivedAt: receivedAt)
        do {
            try event.validate()
        } catch {
            throw Problem(field: error.field == "device" ? "device_id" : error.field, reason: error.reason)
        }
        return event
    }
}
