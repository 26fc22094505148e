/// The names of Pushfan's six Kafka topics.
///
/// Each can be renamed on its own (for a shared cluster with naming rules), or
/// all at once with `init(prefix:)` (for isolated test runs). In configuration
/// files a missing key keeps its default.
package struct TopicNames: Sendable, Codable, Equatable {
    /// Campaign records (`Campaign`), keyed by campaign id. Written by marketing
    /// tools and the API, read by the planner.
    package var campaigns: String
    /// One record per shard of a campaign's audience (`TaskRecord`), keyed by
    /// `<app>#<lane>`. Written by the planner, read by senders.
    package var tasks: String
    /// Per-device outcomes and campaign lifecycle events (`ResultRecord`).
    /// Written by senders and the planner, read by status, dashboards, token hygiene.
    package var results: String
    /// Cancel, pause and resume (`ControlRecord`), keyed by campaign id; every
    /// worker reads all of it.
    package var control: String
    /// Records that could not be processed (`DeadLetterRecord`), with the reason
    /// and the original bytes.
    package var deadletter: String
    /// What devices did with pushes (`EngagementEvent`), keyed `<app>/<device>`. Written
    /// by the API and by anyone, read by the workers' events role.
    package var events: String

    package static let defaultCampaigns = "pushfan.campaigns"
    package static let defaultTasks = "pushfan.tasks"
    package static let defaultResults = "pushfan.results"
    package static let defaultControl = "pushfan.control"
    package static let defaultDeadletter = "pushfan.deadletter"
    package static let defaultEvents = "pushfan.events"

    package init(
        campaigns: String = TopicNames.defaultCampaigns,
        tasks: String = TopicNames.defaultTasks,
        results: String = TopicNames.defaultResults,
        control: String = TopicNames.defaultControl,
        deadletter: String = TopicNames.defaultDeadletter,
        events: String = TopicNames.defaultEvents
    ) {
        self.campaigns = campaigns
        self.tasks = tasks
        self.results = results
        self.control = control
        self.deadletter = deadletter
        self.events = events
    }

    /// `<prefix>.campaigns`, `<prefix>.tasks`, ...; `TopicNames(prefix: "pushfan")`
    /// equals the defaults.
    package init(prefix: String) {
        self.init(
            campaigns: "\(prefix).campaigns",
            tasks: "\(prefix).tasks",
            results: "\(prefix).results",
            control: "\(prefix).control",
            deadletter: "\(prefix).deadletter",
            events: "\(prefix).events")
    }

    /// All six names, in pipeline order: campaigns, tasks, results, control, deadletter, events.
    package var all: [String] { [campaigns, tasks, results, control, deadletter, events] }

    private enum CodingKeys: String, CodingKey {
        case campaigns, tasks, results, control, deadletter, events
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            campaigns: try container.decodeIfPresent(String.self, forKey: .campaigns) ?? Self.defaultCampaigns,
            tasks: try container.decodeIfPresent(String.self, forKey: .tasks) ?? Self.defaultTasks,
            results: try container.decodeIfPresent(String.self, forKey: .results) ?? Self.defaultResults,
            control: try container.decodeIfPresent(String.self, forKey: .control) ?? Self.defaultControl,
            deadletter: try container.decodeIfPresent(String.self, forKey: .deadletter) ?? Self.defaultDeadletter,
            events: try container.decodeIfPresent(String.self, forKey: .events) ?? Self.defaultEvents)
    }
}
