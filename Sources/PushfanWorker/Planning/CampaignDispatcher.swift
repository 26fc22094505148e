import PushfanMessages
import PushfanStore
import PushfanSupport

/// Starts parked campaigns on time. Every planner-role worker runs one: it looks in the
/// store for campaigns due within `lead`, takes each with a conditional update (one worker
/// wins), and has the planner produce its tasks with `not_before` = `send_at`, so senders
/// have them before the moment and start their first request at it. Nothing is kept in
/// memory: a restart, or another worker, picks up where this one left off. A cancelled
/// parked campaign is dispatched at once, so its devices end `cancelled`. Parked waves
/// (`CampaignWaves`) go the same way.
struct CampaignDispatcher {
    /// How early tasks are produced: planning a large audience takes a second or two, and
    /// senders need their tasks before `send_at`.
    static let lead: Duration = .seconds(10)
    /// A dispatch that has not finished after this long (its worker died) is taken again.
    static let staleAfter: Duration = .seconds(60)

    let store: DeviceStore
    let planner: CampaignPlanner
    let clock: any ServiceClock
    let logger: Logger
    /// How often the store is asked.
    var interval: Duration = .milliseconds(250)

    /// Runs until `stopping` is raised.
    func run(until stopping: StopSignal) async {
        while !stopping.isRaised {
            do {
                try await dispatchDue()
            } catch {
                logger.warning("dispatcher.retry", ["error": "\(error)"])
            }
            await stopping.sleep(for: interval)
        }
    }

    /// One look at the store: parked campaigns, then parked waves (zone waves, quiet-hours
    /// holds).
    func dispatchDue() async throws {
        let due = try await store.campaigns.dispatchable(now: clock.wallMillis, lead: Self.lead, staleAfter: Self.staleAfter)
        for row in due where try await store.campaigns.claimDispatch(row.key, staleAfter: Self.staleAfter, now: clock.wallMillis) {
            try await planner.dispatch(row)
        }
        // A winner's rest is due at its time, not ahead (`CampaignWaves.due`).
        let waves = try await store.waves.due(now: clock.wallMillis, lead: Self.lead, staleAfter: Self.staleAfter)
        for wave in waves where try await store.waves.claim(wave, staleAfter: Self.staleAfter, now: clock.wallMillis) {
            try await planner.dispatch(wave)
        }
    }
}
