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
        /// A route fits but for an id holding a control character: named, the caller's 404.
        case controlCharacter(parameter: String)
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
        // Each part is decoded once, when a route first reads it as a parameter.
        var decoded = [String?](repeating: nil, count: parts.count)
        // The most literal routes that fit win: `/segments/count` is not the segment named "count".
        var best: [(route: Route, parameters: [String: String])] = []
        var bestLiterals = -1
        var refused: String?
        for route in routes where route.segments.count == parts.count {
            // Literals first: most routes fail there, before any parameter is decoded.
            var literals = 0
            var fits = true
            for (segment, part) in zip(route.segments, parts) {
                guard case .literal(let text) = segment else { continue }
                fits = text == part
                if !fits { break }
                literals += 1
            }
            guard fits, literals >= bestLiterals else { continue }
            var parameters: [String: String] = [:]
            for (index, segment) in route.segments.enumerated() {
                guard case .parameter(let name) = segment else { continue }
                // Percent-encoded ids arrive decoded; an empty segment never names anything,
                // nor does one holding a control character (`%00` would cut `phone-1%00` to
                // `phone-1` in a C string further down): that one is said.
                let value = decoded[index] ?? Self.percentDecoded(parts[index])
                decoded[index] = value
                let controlled = Self.hasControlCharacter(value)
                if controlled { refused = refused ?? name }
                fits = !value.isEmpty && !controlled
                if !fits { break }
                parameters[name] = value
            }
            guard fits else { continue }
            if literals > bestLiterals { (best, bestLiterals) = ([], literals) }
            best.append((route, parameters))
        }
        if let hit = best.first(where: { $0.route.method == method }) {
            return .found(hit.route.handler, parameters: hit.parameters, pattern: hit.route.pattern)
        }
        if best.isEmpty, let refused { return .controlCharacter(parameter: refused) }
        return best.isEmpty ? .notFound : .methodNotAllowed(allowed: best.map(\.route.method))
    }

    /// `%XX` escapes decoded; a part with a malformed escape, or whose bytes are not UTF-8,
    /// stays as it came.
    static func percentDecoded(_ part: Substring) -> String {
        guard part.utf8.contains(UInt8(ascii: "%")) else { return String(part) }
        let bytes = Array(part.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = Self.hexValue(bytes[index + 1]), let low = Self.hexValue(bytes[index + 2]) else { return String(part) }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(validating: out, as: UTF8.self) ?? String(part)
    }

    /// A C0 control character or DEL: never part of an id, a key or a name.
    static func hasControlCharacter(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// A hex digit's value (either case), nil for any other byte: `%XX` escapes, chunk sizes.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Cut by scalar, not by character: a combining mark or an emoji modifier right after a
    /// `/` is one character with it (`/🏻`), which a cut by character would not find.
    private static func split(_ path: String) -> [Substring] {
        path.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false).dropFirst().filter { !$0.isEmpty }.map { Substring($0) }
    }
}
