import PushfanAPNs
import PushfanAPNsModel
import PushfanMessages
import PushfanStore

/// Where a sender's batches of requests go: APNs through the connection pool
/// (`APNsClient`) in production, a scripted stand-in in the sending core's tests. One call
/// per batch; answers in the requests' order.
package protocol APNsRequestSink: Sendable {
    /// `started`: called once every request is on a stream (or answered without one).
    /// `ahead`: before every request already waiting (a transactional message's).
    /// `withdrawn`: asked just before each request starts; true sends it back `withdrawn`.
    func send(
        batch: [APNsNotification], started: (@Sendable () -> Void)?, ahead: Bool, withdrawn: (@Sendable () -> Bool)?
    ) async -> [APNsSendResult]
}

extension APNsClient: APNsRequestSink {}

/// The sink for one app's devices in one environment, its credentials loaded:
/// `CampaignCatalog` in production.
package protocol APNsConnector: Sendable {
    func requests(for app: AppRecord, environment: APNsEnvironment) throws(CatalogError) -> any APNsRequestSink
}

extension CampaignCatalog: APNsConnector {}
