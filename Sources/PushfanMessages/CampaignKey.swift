/// A campaign's name across the system: its id within its app. Campaign ids are chosen by
/// each app's marketing tools, so two apps may well both run `spring-sale`; everything that
/// keeps or routes a campaign (the store's tables, Kafka keys, workers' state, the
/// dashboard) names it by this pair, so no app can take, stop or learn of another's.
///
/// `stored` is its one-text form, `<app>/<id>`: neither part can contain `/`
/// (`Rules.isIdentifier`), so the form is unambiguous and reads back with `init(stored:)`.
package struct CampaignKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    package let app: String
    package let id: String

    package init(app: String, id: String) { (self.app, self.id) = (app, id) }

    /// Reads `<app>/<id>` back; nil for text of another shape.
    package init?(stored: String) {
        guard let slash = stored.utf8.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let app = String(stored[..<slash])
        let id = String(stored[stored.index(after: slash)...])
        guard Rules.isIdentifier(app), Rules.isIdentifier(id) else { return nil }
        self.init(app: app, id: id)
    }

    /// `<app>/<id>`: the store's key and the Kafka key of campaign and control records.
    package var stored: String { "\(app)/\(id)" }

    package var description: String { stored }

    package static func < (lhs: CampaignKey, rhs: CampaignKey) -> Bool { (lhs.app, lhs.id) < (rhs.app, rhs.id) }
}
