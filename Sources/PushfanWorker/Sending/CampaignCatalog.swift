import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanSegments
import PushfanStore
import PushfanSupport

/// What a sender needs to know about a task's campaign and app, read from the store once
/// and kept: the campaign as accepted, its parsed audience, the app row and the APNs client
/// for each environment.
package struct CampaignPlan: Sendable {
    package let campaign: Campaign
    package let app: AppRecord
    package let segment: SegmentExpression?
    /// The row keys of an explicit audience's active devices, sorted; nil for a segment.
    /// A snapshot from when the plan was loaded (again after `appRefresh`): a listed device
    /// that turns active later is reached only after the next load.
    package let rowKeys: [Int64]?
    /// Its texts have placeholders: each device's payload is rendered for it.
    package let personalised: Bool
    /// The app's frequency caps apply to it: devices are admitted under them as they are claimed.
    package let capped: Bool
    /// The kind of each device's token its push goes to.
    package let tokenKind: APNsTokenKind
    /// The app's devices registered through Notificare's calls: its pushes carry what that
    /// SDK looks for (`NotificareMarker`).
    package let notificare: Bool
    /// A broadcast campaign's channel: its one "device".
    package let channel: BroadcastTarget?

    package init(
        campaign: Campaign, app: AppRecord, segment: SegmentExpression?, rowKeys: [Int64]?, notificare: Bool = false, channel: BroadcastTarget? = nil
    ) {
        (self.campaign, self.app, self.segment, self.rowKeys, self.notificare, self.channel) = (campaign, app, segment, rowKeys, notificare, channel)
        tokenKind = campaign.notification.tokenKind
        personalised = campaign.isPersonalised
        capped = !app.frequencyCaps.isEmpty && campaign.countsTowardFrequencyCaps
    }
}

/// The channel a broadcast campaign goes to, standing in the pipeline where a device
/// would: one page of one target, one ledger row (`rowKey`), one result whose device is the
/// channel's id.
package struct BroadcastTarget: Sendable, Equatable {
    /// The ledger row of the broadcast; device row keys start at 1.
    package static let rowKey: Int64 = 0
    package let id: String
    package let environment: APNsEnvironment

    /// The target the sender claims and sends to.
    package var target: DeviceTarget {
        DeviceTarget(rowKey: Self.rowKey, deviceID: id, token: id, environment: environment, locale: nil, tokenKind: .liveActivityUpdate)
    }
}

/// Why a task cannot run yet or at all.
package enum CatalogError: Error, CustomStringConvertible, Sendable {
    /// The task names a campaign the store does not have (a task from another deployment).
    case unknownCampaign(CampaignKey)
    /// The campaign's app was removed after planning.
    case unknownApp(String)
    /// The stored campaign or its segment no longer reads (edited by hand; or, for a campaign
    /// stored before saved segments were kept with it, its saved segment removed).
    case invalidCampaign(String)
    /// The app's credentials could not be loaded: the app pauses until they can.
    case credentials(app: String, reason: String)
    /// A winner campaign's rest task found no decision in the store yet: it waits.
    case undecided(CampaignKey)

    /// The task can never run; waiting does not help.
    package var isPermanent: Bool {
        switch self {
        case .unknownCampaign, .unknownApp, .invalidCampaign: true
        case .credentials, .undecided: false
        }
    }

    /// For the dead letter: a machine code.
    package var code: String {
        switch self {
        case .unknownCampaign: "unknown_campaign"
        case .unknownApp: "unknown_app"
        case .invalidCampaign: "invalid_campaign"
        case .credentials: "credentials"
        case .undecided: "undecided"
        }
    }

    package var description: String {
        switch self {
        case .unknownCampaign(let key): "campaign \(key.id) of app \(key.app) is not in the store"
        case .unknownApp(let app): "app \(app) is not registered"
        case .invalidCampaign(let reason): reason
        case .credentials(let app, let reason): "credentials of app \(app): \(reason)"
        case .undecided(let key): "campaign \(key.id) of app \(key.app) has no winner's decision yet"
        }
    }
}

/// Caches campaign plans and APNs clients. Apps are re-read after `appRefresh`, so a changed
/// rate limit or credentials reference (another key file, team or key id, certificate) takes
/// effect within that time without a restart. A key that loaded is kept while its reference
/// stays the same: a file replaced in place under the same path is read again by a worker
/// that starts after the change.
package final class CampaignCatalog: Sendable {
    private let store: DeviceStore
    private let clients: APNsClients
    private let endpointOverride: APNsEndpoint?
    private let appRefresh: Duration
    private let plans = Locked<[CampaignKey: (plan: CampaignPlan, loaded: ContinuousClock.Instant)]>([:])
    /// Loaded credentials by app, with the reference they were loaded from.
    private let credentials = Locked<[String: (reference: APNsCredentialsReference, loaded: APNsCredentials)]>([:])

    /// `endpointOverride` (a simulator or staging host) takes every environment's traffic;
    /// without it each device's environment picks Apple's production or sandbox host.
    package init(store: DeviceStore, clients: APNsClients, endpointOverride: APNsEndpoint?, appRefresh: Duration = .seconds(10)) {
        self.store = store
        self.clients = clients
        self.endpointOverride = endpointOverride
        self.appRefresh = appRefresh
    }

    /// The campaign's plan. `decided`: the task sends a winner campaign's rest, so the plan
    /// must carry the decision (one cached before it was made is read again).
    package func plan(campaign id: CampaignKey, decided: Bool) async throws -> CampaignPlan {
        if let cached = plans.withLock({ $0[id] }), store.clock.now - cached.loaded < appRefresh, !decided || cached.plan.campaign.decision != nil {
            return cached.plan
        }
        guard let definition = try await store.campaigns.stored(id) else { throw CatalogError.unknownCampaign(id) }
        let campaign: Campaign
        do { campaign = try definition.campaign(id) } catch { throw CatalogError.invalidCampaign(error.description) }
        guard let app = try await store.apps.get(campaign.app) else { throw CatalogError.unknownApp(campaign.app) }
        // The decision is written before the rest's tasks exist; not finding it is a moment's race.
        if decided && campaign.decision == nil { throw CatalogError.undecided(id) }
        // The segment as the campaign was planned with it (a saved one frozen then).
        let segment: SegmentExpression?
        do { segment = try await store.segment(of: campaign, definition: definition) } catch let missing as MissingReference {
            throw CatalogError.invalidCampaign("the audience of campaign \(id): \(missing.description)")
        }
        var rowKeys: [Int64]?
        var channel: BroadcastTarget?
        switch campaign.audience {
        case .segment, .named: break
        case .devices(let ids): rowKeys = try await store.audience.rowKeys(app: campaign.app, deviceIDs: ids, tokens: campaign.tokenSelection)
        case .activity, .activities: break  // the app's devices with the activities' tokens (`tokenSelection`)
        case .channel(let id):
            // Deleted since planning: sent all the same, and APNs says ChannelNotRegistered.
            let row = try await store.channels.get(app: campaign.app, id: id)
            channel = BroadcastTarget(id: id, environment: row?.environment ?? app.environment)
            rowKeys = [BroadcastTarget.rowKey]
        }
        let plan = CampaignPlan(
            campaign: campaign.applyingDefaultCategory(app.defaultCategory), app: app, segment: segment, rowKeys: rowKeys,
            notificare: try await store.sdkDevices.any(app: app.app), channel: channel)
        let now = store.clock.now
        plans.withLock { plans in
            // Plans past their refresh are read again when asked for: dropped here, so that a
            // worker that ran some of many campaigns' tasks (messages are campaigns too), but
            // not their last, does not keep every one of them.
            if plans.count >= Self.sweepAbove { plans = plans.filter { now - $0.value.loaded < appRefresh } }
            plans[id] = (plan, now)
        }
        return plan
    }

    /// Plans kept before the stale ones are swept out (a plan holds up to 512 KiB of record).
    static let sweepAbove = 64

    /// The APNs client for an app's devices in one environment (`APNsConnector`).
    package func requests(for app: AppRecord, environment: APNsEnvironment) throws(CatalogError) -> any APNsRequestSink {
        let loaded: APNsCredentials
        if let known = credentials.withLock({ $0[app.app] }), known.reference == app.credentials {
            loaded = known.loaded
        } else {
            do { loaded = try APNsCredentials.load(app.credentials) } catch {
                throw .credentials(app: app.app, reason: error.description)
            }
            credentials.withLock { $0[app.app] = (app.credentials, loaded) }
        }
        do {
            let endpoint = try endpointOverride ?? APNsEndpoint.apple(environment)
            return try clients.client(endpoint: endpoint, credentials: loaded)
        } catch {
            throw .credentials(app: app.app, reason: "\(error)")
        }
    }

    /// Forgets a campaign (it completed).
    package func forget(campaign id: CampaignKey) {
        _ = plans.withLock { $0.removeValue(forKey: id) }
    }
}

/// Apps whose credentials fail: their sends pause for a while, then are tried again; after
/// `giveUpAfter` of failures with no success between, their devices stop waiting.
package final class AppPauses: Sendable {
    private struct Episode {
        /// The first failure since the app last sent successfully.
        var since: ContinuousClock.Instant
        var until: ContinuousClock.Instant
        var reason: String
        /// Campaigns told of this pause with a `paused` event.
        var announced: Set<CampaignKey> = []
    }

    private let episodes = Locked<[String: Episode]>([:])
    private let logger: Logger
    private let giveUpAfter: Duration
    private let clock: any ServiceClock

    package init(logger: Logger, giveUpAfter: Duration = .seconds(900), clock: any ServiceClock) {
        self.logger = logger
        self.giveUpAfter = giveUpAfter
        self.clock = clock
    }

    /// What a credentials failure means for one device of `campaign`.
    package struct Verdict: Sendable, Equatable {
        /// Credentials have failed for longer than the limit: the device ends `failed`.
        package var giveUp: Bool
        /// The campaign has not been told of this pause yet: produce its `paused` event.
        package var announce: Bool
    }

    /// Pauses the app for `duration` (unless it is paused already) and raises the alert (an
    /// error-level log line, one per pause).
    package func pause(_ app: String, campaign: CampaignKey, for duration: Duration, reason: String) -> Verdict {
        let now = clock.now
        let (fresh, verdict) = episodes.withLock { episodes -> (Bool, Verdict) in
            var episode = episodes[app] ?? Episode(since: now, until: now, reason: reason)
            let fresh = episode.until <= now
            if fresh {
                episode.until = now + duration
                episode.reason = reason
                episode.announced = []
            }
            let announce = episode.announced.insert(campaign).inserted
            episodes[app] = episode
            return (fresh, Verdict(giveUp: now - episode.since >= giveUpAfter, announce: announce))
        }
        if fresh {
            logger.error("app.paused", ["app": app, "reason": reason, "pause_s": String(Int(duration.seconds))])
        }
        return verdict
    }

    /// The app sent successfully: a later failure starts a new episode.
    package func recovered(_ app: String) {
        _ = episodes.withLock { $0.removeValue(forKey: app) }
    }

    /// True while the app is paused and its credentials have failed for longer than the
    /// limit: its devices end `failed` without another try until the pause is over.
    package func hasGivenUp(_ app: String) -> Bool {
        let now = clock.now
        return episodes.withLock { episodes in
            guard let episode = episodes[app] else { return false }
            return episode.until > now && now - episode.since >= giveUpAfter
        }
    }

    /// When the app may send again; nil when it is not paused.
    /// Apps whose sends are paused for credentials now.
    package func pausedApps() -> [String] {
        let now = clock.now
        return episodes.withLock { episodes in episodes.filter { $0.value.until > now }.map(\.key) }
    }

    package func resumeAt(_ app: String) -> ContinuousClock.Instant? {
        episodes.withLock { episodes in
            guard let episode = episodes[app], episode.until > clock.now else { return nil }
            return episode.until
        }
    }
}
