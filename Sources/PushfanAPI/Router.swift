import Foundation

/// Routes by method and path: literal segments and `{name}` parameters, matched segment by
/// segment. A pure value: `match` says which handler, with which parameters, or why none
/// (no such path: 404; the path exists for other methods: 405 with them).
package struct Router<Handler: Sendable>: Sendable {
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    private struct Route: Sendable {
        let method: String
        let pattern: String
        let segments: [Segment]
        let handler: Handler
    }

    package enum Match {
        /// `pattern`: the route as it was added, a bounded label for metrics.
        case found(Handler, parameters: [String: String], pattern: String)
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private var routes: [Route] = []

    package init() {}

    /// `pattern` like `/v1/apps/{app}/devices/{device}`.
    package mutating func add(_ method: String, _ pattern: String, _ handler: Handler) {
        let segments = Self.split(pattern).map { part -> Segment in
            part.hasPrefix("{") && part.hasSuffix("}") ? .parameter(String(part.dropFirst().dropLast())) : .literal(String(part))
        }
        routes.append(Route(method: method, pattern: pattern, segments: segments, handler: handler))
    }

    /// Every route, as (method, pattern).
    package var operations: [(method: String, pattern: String)] { routes.map { ($0.method, $0.pattern) } }

    package func match(method: String, path: String) -> Match {
        let parts = Self.split(path)
        // The most literal routes that fit win: `/segments/count` is not the segment named "count".
        var best: [(route: Route, parameters: [String: String])] = []
        var bestLiterals = -1
        for route in routes where route.segments.count == parts.count {
            var parameters: [String: String] = [:]
            var matches = true
            var literals = 0
            for (segment, part) in zip(route.segments, parts) {
                switch segment {
                case .literal(let text):
                    matches = text == part
                    literals += 1
                case .parameter(let name):
                    // Percent-encoded ids arrive decoded; an empty segment never names anything.
                    let value = part.removingPercentEncoding ?? String(part)
                    matches = !value.isEmpty
                    parameters[name] = value
                }
                if !matches { break }
            }
            guard matches, literals >= bestLiterals else { continue }
            if literals > bestLiterals { (best, bestLiterals) = ([], literals) }
            best.append((route, parameters))
        }
        if let hit = best.first(where: { $0.route.method == method }) {
            return .found(hit.route.handler, parameters: hit.parameters, pattern: hit.route.pattern)
        }
        return best.isEmpty ? .notFound : .methodNotAllowed(allowed: best.map(\.route.method))
    }

    private static func split(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().filter { !$0.isEmpty }
    }
}
