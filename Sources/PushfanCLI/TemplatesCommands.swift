import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// `pushfan templates set --app KEY --name NAME FILE`: saves a stored notification template.
struct TemplatesSetCommand: Command {
    static let spec = CommandSpec(
        name: "templates set",
        summary: "Save an app's named notification template (category, rich media, thread, summary, interruption level, actions)",
        discussion: """
            FILE holds one JSON object (docs/messages.md, Stored templates): category,
            mutable_content, media_url, thread_id, summary_arg, summary_arg_count,
            interruption_level and actions. Campaigns name it in notification.template; a
            campaign keeps the template as it was when it was planned.
            """,
        positionals: ["FILE"],
        options: [.app, .option("name", "NAME", "template name (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let name = try arguments.required("name")
        let path = arguments.positionals[0]
        guard let bytes = FileManager.default.contents(atPath: path) else {
            printError("pushfan templates set: cannot read \(path)")
            return 1
        }
        let template: NotificationTemplate
        do { template = try NotificationTemplate.decode(bytes) } catch {
            printError("pushfan templates set: \(path): \(error) [\(error.code)]; nothing was saved")
            return 1
        }
        let store = try await StoreOptions.open(arguments, context)
        let created = try await store.templates.put(app: app, name: name, template, now: store.clock.wallMillis)
        print("template \(name) \(created ? "saved" : "replaced") for app \(app)")
        return 0
    }
}

/// `pushfan templates list --app KEY`: each template's name and JSON.
struct TemplatesListCommand: Command {
    static let spec = CommandSpec(
        name: "templates list", summary: "List an app's stored notification templates with their JSON",
        options: [.app] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let store = try await StoreOptions.open(arguments, context)
        for (name, template) in try await store.templates.list(app: try arguments.required("app")) {
            print("\(name)\t\(NotificationTemplates.document(template))")
        }
        return 0
    }
}

/// `pushfan templates remove --app KEY --name NAME`.
struct TemplatesRemoveCommand: Command {
    static let spec = CommandSpec(
        name: "templates remove", summary: "Remove a stored template (campaigns already planned with it keep their copy)",
        options: [.app, .option("name", "NAME", "template name (required)")] + StoreOptions.specs)

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let (app, name) = (try arguments.required("app"), try arguments.required("name"))
        let store = try await StoreOptions.open(arguments, context)
        guard try await store.templates.remove(app: app, name: name) else {
            printError("pushfan templates remove: app \(app) has no template \(name)")
            return 1
        }
        print("template \(name) removed from app \(app)")
        return 0
    }
}
