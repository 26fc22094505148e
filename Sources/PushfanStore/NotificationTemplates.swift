import Foundation
import PushfanMessages

/// An app's stored rich-push templates, by name (`NotificationTemplate`): what campaigns
/// name in `notification.template`. Kept as their canonical JSON; a campaign planned with
/// one keeps its own copy (`CampaignRegistry`), so a later change reaches only campaigns
/// planned after it.
package struct NotificationTemplates: Sendable {
    let executor: StoreExecutor

    /// Saves (or replaces) a template; true when it is new.
    @discardableResult
    package func put(app: String, name: String, _ template: NotificationTemplate, now: Int64) async throws(StoreError) -> Bool {
        try Validation.templateName(name)
        let document = Self.document(template)
        return try await executor.run { connection throws(StoreError) in
            try connection.transaction { () throws(StoreError) -> Bool in
                try StoreExecutor.requireApp(connection, app)
                let existed = try connection.queryOne("SELECT 1 FROM app_templates WHERE app = \(app) AND name = \(name)") { $0.int(0) } != nil
                try connection.execute("""
                    INSERT INTO app_templates (app, name, definition, updated_at) VALUES (\(app), \(name), \(document), \(now))
                    ON CONFLICT (app, name) DO UPDATE SET definition = excluded.definition, updated_at = excluded.updated_at
                    """)
                return !existed
            }
        }
    }

    /// The template as stored; nil when the app has none of that name.
    package func get(app: String, name: String) async throws(StoreError) -> NotificationTemplate? {
        let text = try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT definition FROM app_templates WHERE app = \(app) AND name = \(name)") { $0.text(0) }.flatMap { $0 }
        }
        return try text.map { text throws(StoreError) in try Self.read(text, name: name) }
    }

    /// Every template of the app, by name.
    package func list(app: String) async throws(StoreError) -> [(name: String, template: NotificationTemplate)] {
        let rows = try await executor.run { connection throws(StoreError) in
            try connection.queryAll("SELECT name, definition FROM app_templates WHERE app = \(app) ORDER BY name") { ($0.text(0) ?? "", $0.text(1) ?? "") }
        }
        var templates: [(String, NotificationTemplate)] = []
        for (name, text) in rows { templates.append((name, try Self.read(text, name: name))) }
        return templates
    }

    /// True when there was one. Campaigns already planned with it keep their copy.
    package func remove(app: String, name: String) async throws(StoreError) -> Bool {
        try await executor.run { connection throws(StoreError) in
            try connection.execute("DELETE FROM app_templates WHERE app = \(app) AND name = \(name)") == 1
        }
    }

    /// The canonical JSON of a template: sorted keys, as campaigns keep it.
    package static func document(_ template: NotificationTemplate) -> String {
        String(decoding: template.canonicalJSON, as: UTF8.self)
    }

    /// A stored document read back (and checked again: it may have been edited by hand).
    package static func read(_ text: String, name: String) throws(StoreError) -> NotificationTemplate {
        do { return try NotificationTemplate.decode(Array(text.utf8)) } catch {
            throw StoreError.database("stored template \(name) does not read: \(error)")
        }
    }
}
