import PushfanMessages
import PushfanStore
import PushfanSupport
import PushfanTopics

/// `GET /healthz` (the process answers) and `GET /readyz` (the store and Kafka answer). Both
/// answer anyone, so `/readyz` names what failed and no more: the error itself (which may
/// name a host, a URL, a library's message) goes to the log.
enum HealthRoutes {
    static func add(to router: inout Router<Route>, store: DeviceStore, writer: ResultsWriter, logger: Logger) {
        router.add("GET", "/healthz", Route(roles: []) { _ in .json(200, ["status": "ok"]) })
        router.add("GET", "/readyz", Route(roles: []) { _ in
            var checks: [String: JSONValue] = [:]
            var ready = true
            do {
                _ = try await store.apps.get("readyz-probe")
                checks["store"] = "ok"
            } catch {
                logger.warning("api.not_ready", ["check": "store", "error": "\(error)"])
                checks["store"] = "unavailable"
                ready = false
            }
            do {
                _ = try await writer.producer.partitionCount(topic: writer.topics.campaigns, timeout: .seconds(2))
                checks["kafka"] = "ok"
            } catch {
                logger.warning("api.not_ready", ["check": "kafka", "error": "\(error)"])
                checks["kafka"] = "unavailable"
                ready = false
            }
            return .json(ready ? 200 : 503, ["status": ready ? "ready" : "not_ready", "checks": .object(checks)])
        })
    }
}
