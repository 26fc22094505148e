import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `/v1/apps/{app}/templates`: an app's stored notification templates (master secret), the
/// `NotificationTemplate` documents campaigns name in `notification.template`.
enum TemplateRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore) {
        router.add("GET", "/v1/apps/{app}/templates", Route(roles: [.master]) { call in
            let templates = try await store.templates.list(app: call.parameter("app"))
            return .json(200, ["templates": .array(templates.map { json(name: $0.name, $0.template) })])
        })
        router.add("PUT", "/v1/apps/{app}/templates/{name}", Route(roles: [.master]) { call in
            let body = try APIService.requireJSON(call.request)
            let template: NotificationTemplate
            do throws(MessageDecodingError) { template = try NotificationTemplate.decode(body) } catch {
                throw APIError(400, error.code, error.description, field: error.field.isEmpty ? nil : error.field)
            }
            let created = try await store.templates.put(app: call.parameter("app"), name: call.parameter("name"), template, now: store.clock.wallMillis)
            return .json(created ? 201 : 200, json(name: call.parameter("name"), template))
        })
        router.add("GET", "/v1/apps/{app}/templates/{name}", Route(roles: [.master]) { call in
            guard let template = try await store.templates.get(app: call.parameter("app"), name: call.parameter("name")) else {
                throw APIError.notFound("app \(call.parameter("app")) has no template \(call.parameter("name"))")
            }
            return .json(200, json(name: call.parameter("name"), template))
        })
        router.add("DELETE", "/v1/apps/{app}/templates/{name}", Route(roles: [.master]) { call in
            guard try await store.templates.remove(app: call.parameter("app"), name: call.parameter("name")) else {
                throw APIError.notFound("app \(call.parameter("app")) has no template \(call.parameter("name"))")
            }
            return HTTPResponse(status: 204)
        })
    }

    /// `{"name": …, "template": {…}}`, the template as stored.
    static func json(name: String, _ template: NotificationTemplate) -> JSONValue {
        let document = (try? JSONDecoder().decode(JSONValue.self, from: Data(NotificationTemplates.document(template).utf8))) ?? [:]
        return ["name": .string(name), "template": document]
    }
}
