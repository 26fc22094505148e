import PushfanSupport

/// Interactive notifications: the actions of a notification's category, each with the
/// parameters the app's action handler gets. The app registers the category and its action
/// identifiers (`UNNotificationCategory`); the campaign names the category (`aps.category`)
/// and gives each action's parameters, sent under the one key `action_params`:
/// `{"action_params": {"buy": {"sku": "A-123"}}}`, read in the handler as
/// `userInfo["action_params"][response.actionIdentifier]`.
extension Campaign {
    /// Most actions a notification may declare (iOS shows at most four; categories may
    /// define more for other contexts).
    package static let maxActions = 10
    /// The payload key of the actions' parameters.
    package static let actionParamsKey = "action_params"

    /// One action: its identifier (as the app registered it) and its parameters.
    package struct Action: Hashable, Sendable, Codable {
        package var id: String
        package var params: [String: JSONValue]

        package init(id: String, params: [String: JSONValue] = [:]) { (self.id, self.params) = (id, params) }

        private enum CodingKeys: String, CodingKey { case id, params }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.field(.id)
            params = try container.optionalField(.params) ?? [:]
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(params, forKey: .params)
        }
    }

    func validateActions() throws(MessageDecodingError) {
        let actions = notification.actions
        guard !actions.isEmpty else { return }
        if actions.count > Self.maxActions {
            throw .invalidField("notification.actions", "has \(actions.count) actions, at most \(Self.maxActions) are allowed")
        }
        if notification.pushType != .alert {
            throw .invalidField("notification.actions", "only alert pushes show actions, this one is \(notification.pushType.rawValue)")
        }
        // A stored template may bring the category; the planner checks the campaign again
        // with the template under it.
        guard notification.template == nil else { return try validateActionIDs() }
        guard case .string(let category)? = notification.aps?["category"], !category.isEmpty else {
            throw .invalidField(
                "notification.actions", "needs notification.aps.category: the category your app registered with these action identifiers")
        }
        try validateActionIDs()
    }

    private func validateActionIDs() throws(MessageDecodingError) {
        let actions = notification.actions
        if notification.data?[Self.actionParamsKey] != nil {
            throw .invalidField("notification.data.\(Self.actionParamsKey)", "is where the actions' parameters go; remove it from data")
        }
        var seen: [String: Int] = [:]
        for (index, action) in actions.enumerated() {
            let field = "notification.actions[\(index)].id"
            try Rules.identifier(action.id, field: field)
            if let earlier = seen.updateValue(index, forKey: action.id) {
                throw .invalidField(field, "repeats notification.actions[\(earlier)].id (\(action.id.debugDescription))")
            }
        }
    }
}

extension Campaign {
    /// The campaign with its app's default category (Notificare's "default category") in
    /// `aps.category`, for an alert push that names none; variants that set one keep theirs.
    package func applyingDefaultCategory(_ category: String?) -> Campaign {
        guard let category, notification.pushType == .alert, notification.aps?["category"] == nil else { return self }
        var copy = self
        copy.notification.aps = (notification.aps ?? [:]).merging(["category": .string(category)]) { $1 }
        return copy
    }
}

extension Campaign.Notification {
    /// The custom keys of the payload: `data`, and the actions' parameters under
    /// `action_params` (keyed by action identifier).
    package var custom: [String: JSONValue] {
        var custom = data ?? [:]
        if !actions.isEmpty {
            custom[Campaign.actionParamsKey] = .object(Dictionary(actions.map { ($0.id, JSONValue.object($0.params)) }, uniquingKeysWith: { first, _ in first }))
        }
        return custom
    }
}
