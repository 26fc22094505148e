import Foundation
import PushfanMessages
import PushfanStore
import PushfanSupport

/// The live dashboard (docs/metrics.md): the page with the current snapshot inside it, the
/// snapshot as JSON, and its Server-Sent Events; the page's script and Chart.js (served from
/// the file `pushfan api --chartjs` names, Debian's libjs-chart.js by default: no CDN).
/// The data needs the admin token or an app's master secret; the scripts are public.
enum DashboardRoutes {
    /// The page runs only its own scripts (its snapshot is a JSON data block, not code), may
    /// not be framed (clickjacking), and never sends its address on: the demo's carries a token.
    static let pageHeaders = [
        "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
        "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
    ]

    /// The snapshot with its chosen campaign's engagement (a campaign the viewer may not see
    /// is never chosen); without it when the store does not answer.
    private static func withEngagement(_ store: DeviceStore, _ snapshot: DashboardSnapshot) async -> DashboardSnapshot {
        guard let id = snapshot.selected?.name, let key = CampaignKey(stored: id), let stats = try? await store.campaignStats(key) else { return snapshot }
        var shown = snapshot
        shown.engagement = stats.jsonValue
        return shown
    }

    static func add(to router: inout Router<Route>, feed: DashboardFeed?, chartJS: [UInt8]?, store: DeviceStore) {
        let off = APIError(503, "dashboard_off", "this API process does not read the results topic (started with --no-dashboard)")
        router.add("GET", "/dashboard", Route(roles: [], viewer: true) { call in
            guard let feed, let viewer = call.viewer else { throw off }
            let snapshot = await withEngagement(store, feed.snapshot(for: viewer, selected: call.request.query["campaign"], now: store.clock.wallMillis))
            return HTTPResponse(
                status: 200, headers: pageHeaders,
                body: DashboardPage.html(snapshot: DashboardFeed.json(snapshot), charts: chartJS != nil))
        })
        router.add("GET", "/dashboard/state", Route(roles: [], viewer: true) { call in
            guard let feed, let viewer = call.viewer else { throw off }
            let snapshot = await withEngagement(store, feed.snapshot(for: viewer, selected: call.request.query["campaign"], now: store.clock.wallMillis))
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"], body: DashboardFeed.json(snapshot))
        })
        router.add("GET", "/dashboard/events", Route(roles: [], viewer: true) { call in
            guard let feed, let viewer = call.viewer else { throw off }
            var response = HTTPResponse(status: 200, headers: [
                "Content-Type": "text/event-stream", "Cache-Control": "no-store",
                // Reverse proxies must pass each event on as it comes (nginx buffers otherwise).
                "X-Accel-Buffering": "no",
            ])
            response.stream = feed.subscribe(viewer, selected: call.request.query["campaign"])
            return response
        })
        router.add("GET", "/dashboard/dashboard.js", Route(roles: []) { _ in
            HTTPResponse(status: 200, headers: ["Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "max-age=300"], body: Array(DashboardPage.script.utf8))
        })
        router.add("GET", "/dashboard/chart.js", Route(roles: []) { _ in
            guard let chartJS else {
                throw APIError.notFound("Chart.js is not installed (apt-get install libjs-chart.js, or pushfan api --chartjs FILE); the dashboard shows its numbers without charts")
            }
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "max-age=86400"], body: chartJS)
        })
    }
}
