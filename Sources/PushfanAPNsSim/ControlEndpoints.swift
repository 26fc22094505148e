import Foundation

/// The simulator's own endpoints, on every connection, without credentials, faults or
/// latency:
/// - `GET /_sim/stats`: the merged statistics (`SimStatsSnapshot.jsonObject`);
/// - `POST /_sim/reset`: clears them; answers `{"ok":true}`;
/// - `GET /_sim/control`: the fault settings; `POST /_sim/control` with a JSON object
///   changes the members given (`FaultSettings.apply`) and answers the new settings, or 400
///   `{"error":…}` and changes nothing.
enum ControlEndpoints {
    static func handle(_ request: SimRequest, simulator: APNsSimulator) -> (status: Int, body: [UInt8]) {
        switch (request.method ?? "", request.path ?? "") {
        case ("GET", "/_sim/stats"):
            return (200, simulator.stats().jsonBytes)
        case ("POST", "/_sim/reset"):
            simulator.resetStats()
            return (200, Array("{\"ok\":true}".utf8))
        case ("GET", "/_sim/control"):
            return (200, json(simulator.faultSettings.jsonObject))
        case ("POST", "/_sim/control"):
            guard request.bodyOverflow == 0,
                  let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
            else { return (400, json(["error": "the body must be a JSON object of control settings (see docs/apns-sim.md)"])) }
            do {
                let settings = try simulator.applyControl(object)
                return (200, json(settings.jsonObject))
            } catch {
                return (400, json(["error": error.description]))
            }
        case (_, "/_sim/stats"), (_, "/_sim/reset"), (_, "/_sim/control"):
            return (405, json(["error": "use GET /_sim/stats, POST /_sim/reset, GET or POST /_sim/control"]))
        default:
            return (404, json(["error": "unknown simulator endpoint; use /_sim/stats, /_sim/reset or /_sim/control"]))
        }
    }

    static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8))
    }
}
