import PushfanSupport
import PushfanTemplates

/// Personalised texts: a notification's title, subtitle, body and data strings may hold
/// placeholders over the device (`TextTemplate`). Each is parsed when the campaign is
/// accepted, so an unknown variable or filter is refused with its field's path; a sender
/// renders them per device, and a notification without any is built once per locale as
/// before.
extension Campaign {
    /// True when the notification or a variant has a placeholder anywhere it may.
    package var isPersonalised: Bool {
        ([notification] + variants.indices.map { applying(variant: $0).notification }).contains { $0.isPersonalised }
    }

    /// Every templated field parses; a problem names the field (`notification.content.default.body: at 4: …`).
    func validateTemplates() throws(MessageDecodingError) {
        for (field, text) in notification.templatedTexts() {
            do { _ = try TextTemplate.parse(text) } catch {
                throw .invalidField(field, "\(error) (placeholders are {{ variable | filter }}, docs/messages.md)")
            }
        }
    }
}

extension Campaign.Notification {
    /// True when a text or data string has a placeholder.
    package var isPersonalised: Bool {
        templatedTexts().contains { (try? TextTemplate.parse($0.text))?.isPersonalised ?? true }
    }

    /// The strings that may hold placeholders and contain `{{`, with their fields' paths.
    func templatedTexts() -> [(field: String, text: String)] {
        var found: [(String, String)] = []
        func add(_ text: Campaign.LocalizedText?, at field: String) {
            guard let text else { return }
            for (name, value) in [("title", text.title), ("subtitle", text.subtitle), ("body", text.body)] {
                if let value, TextTemplate.mayHoldPlaceholders(value) { found.append((field + "." + name, value)) }
            }
        }
        add(content?.defaultText, at: "notification.content.default")
        for key in (content?.locales.keys.sorted() ?? []) {
            add(content?.locales[key], at: JSONPath.join("notification.content.locales", key))
        }
        func walk(_ value: JSONValue, at field: String) {
            switch value {
            case .string(let text) where TextTemplate.mayHoldPlaceholders(text): found.append((field, text))
            case .object(let members): for key in members.keys.sorted() { walk(members[key]!, at: JSONPath.join(field, key)) }
            case .array(let items): for (index, item) in items.enumerated() { walk(item, at: "\(field)[\(index)]") }
            default: break
            }
        }
        walk(.object(data ?? [:]), at: "notification.data")
        return found
    }

    /// The notification as one device gets it: its locale's texts (as the only texts) and
    /// every data string rendered for `device`.
    package func personalised(for device: TemplateDevice, locale: String?, templates: inout TemplateCache) -> Campaign.Notification {
        var copy = self
        if let text = content?.text(forLocale: locale) {
            copy.content = Campaign.Content(defaultText: Campaign.LocalizedText(
                title: text.title.map { templates.render($0, for: device) },
                subtitle: text.subtitle.map { templates.render($0, for: device) },
                body: text.body.map { templates.render($0, for: device) }))
        }
        func render(_ value: JSONValue) -> JSONValue {
            switch value {
            case .string(let text): .string(templates.render(text, for: device))
            case .object(let members): .object(members.mapValues(render))
            case .array(let items): .array(items.map(render))
            default: value
            }
        }
        copy.data = data?.mapValues(render)
        return copy
    }
}

/// Parsed texts by their source, so each is parsed once per task, not once per device.
package struct TemplateCache: Sendable {
    private var parsed: [String: TextTemplate] = [:]

    package init() {}

    /// `text` rendered for `device`; a text without placeholders as it is. A text that does
    /// not parse (the campaign was accepted, so only an unvalidated one) is sent as written.
    package mutating func render(_ text: String, for device: TemplateDevice) -> String {
        guard TextTemplate.mayHoldPlaceholders(text) else { return text }
        if let template = parsed[text] { return template.render(for: device) }
        guard let template = try? TextTemplate.parse(text) else { return text }
        parsed[text] = template
        return template.render(for: device)
    }
}
