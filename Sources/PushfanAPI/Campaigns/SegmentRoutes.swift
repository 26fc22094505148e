import Foundation
import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport

/// `/v1/apps/{app}/segments`: preview an audience's size, save segments by name and read
/// them back (master secret). The expression language is docs/segments.md.
enum SegmentRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore) {
        var count = Route(roles: [.master]) { call in
            let expression = try field(call.request, "segment")
            let segment: SegmentExpression
            do { segment = try SegmentParser.parse(expression) } catch {
                throw APIError(400, "invalid_segment", "segment: \(error)", field: "segment")
            }
            let count = try await store.audience.count(app: call.parameter("app"), segment: segment, now: store.clock.wallMillis)
            return .json(200, ["segment": .string(expression), "count": .int(Int64(count))])
        }
        count.readsOnly = true
        router.add("POST", "/v1/apps/{app}/segments/count", count)
        router.add("GET", "/v1/apps/{app}/segments", Route(roles: [.master]) { call in
            let saved = try await store.audience.savedSegments(app: call.parameter("app"))
            return .json(200, ["segments": .array(saved.map { ["name": .string($0.name), "expression": .string($0.expression)] })])
        })
        router.add("PUT", "/v1/apps/{app}/segments/{name}", Route(roles: [.master]) { call in
            let expression = try field(call.request, "expression")
            do { _ = try SegmentParser.parse(expression) } catch {
                throw APIError(400, "invalid_segment", "expression: \(error)", field: "expression")
            }
            let (app, name) = (call.parameter("app"), call.parameter("name"))
            let existed = try await store.audience.savedSegment(app: app, name: name) != nil
            try await store.audience.saveSegment(app: app, name: name, expression: expression)
            return .json(existed ? 200 : 201, ["name": .string(name), "expression": .string(expression)])
        })
        router.add("GET", "/v1/apps/{app}/segments/{name}", Route(roles: [.master]) { call in
            guard let expression = try await store.audience.savedSegment(app: call.parameter("app"), name: call.parameter("name")) else {
                throw APIError.notFound("app \(call.parameter("app")) has no segment \(call.parameter("name"))")
            }
            return .json(200, ["name": .string(call.parameter("name")), "expression": .string(expression)])
        })
    }

    /// A required string member of a JSON object body.
    private static func field(_ request: HTTPRequest, _ name: String) throws -> String {
        guard case .string(let text)? = try APIService.jsonObject(request)[name] else { throw APIError(400, "invalid_input", "\(name): required, a string", field: name) }
        return text
    }
}
