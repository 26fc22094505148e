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

    package func match(method: String, path: String) -> Match {
        let parts = Self.split(path)
        var allowed: [String] = []
        for route in routes where route.segments.count == parts.count {
            var parameters: [String: String] = [:]
            var matches = true
            for (segment, part) in zip(route.segments, parts) {
                switch segment {
                case .literal(let text): matches = text == part
                case .parameter(let name):
                    // Percent-encoded ids arrive decoded; an empty segment never names anything.
                    let value = part.removingPercentEncoding ?? String(part)
                    matches = !value.isEmpty
                    parameters[name] = value
                }
                if !matches { break }
            }
            guard matches else { continue }
            if route.method == method { return .found(route.handler, parameters: parameters, pattern: route.pattern) }
            allowed.append(route.method)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }

    private static func split(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().filter { !$0.isEmpty }
    }
}
