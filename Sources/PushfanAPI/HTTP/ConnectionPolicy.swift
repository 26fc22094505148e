#if canImport(Glibc)
import Glibc
#endif

/// What the server allows a connection, and who the client behind it is. Pure values; the
/// server's loop keeps one `ConnectionCounts` and asks it at each accept.
package struct ConnectionPolicy: Sendable {
    /// The header a trusted proxy names the client in. Only that one is read: a proxy that
    /// appends to one passes the other through as the client sent it.
    package enum ForwardedHeader: String, Sendable, CaseIterable {
        case xForwardedFor = "x-forwarded-for"
        case forwarded
    }

    /// Largest request body; more is refused with 413 (before it is read, when the length
    /// is announced).
    package var maxBodyBytes = 1 << 20
    /// Largest request line and headers; more is refused with 431.
    package var maxHeadBytes = 32 * 1024
    /// From a request's first byte (or the connection's opening) to the end of its headers.
    package var headTimeout: Duration = .seconds(10)
    /// From the go-ahead to read a body to its last byte.
    package var bodyTimeout: Duration = .seconds(30)
    /// A kept-alive connection with no request, or an answer the client does not read.
    package var idleTimeout: Duration = .seconds(30)
    /// Connections open at once; past it new ones get 503 with Retry-After. Each takes a
    /// descriptor and, while its head is in, up to `maxHeadBytes`.
    package var maxConnections = 4096
    /// Connections open at once from one address (a trusted proxy has no limit: it carries
    /// everyone's); past it new ones from that address get 503 with Retry-After.
    package var maxConnectionsPerAddress = 64
    /// Addresses whose `X-Forwarded-For` / `Forwarded` names the client. None: the headers
    /// are ignored and the client is the connection's peer.
    package var trustedProxies: Set<String> = []
    package var forwardedHeader = ForwardedHeader.xForwardedFor
    /// Connections being answered 503 at once (each gets a moment to send its request so
    /// that the answer is not lost to a reset); past it a new connection is closed at once.
    package var maxRefusing = 64

    package init() {}

    /// Descriptors the server may need at once: every connection, every refusal, and room
    /// for the store, Kafka and logs.
    package var descriptorsNeeded: Int { maxConnections + maxRefusing + 256 }

    /// The client's address: the peer, or, when the peer is a trusted proxy, the nearest
    /// address in the forwarding chain that is not itself a trusted proxy (the peer when
    /// that entry is not an IP address: `unknown`, an obfuscated name).
    package func clientAddress(peer: String, headers: [String: String]) -> String {
        guard trustedProxies.contains(peer) else { return peer }
        var chain: [String] = []
        if forwardedHeader == .forwarded, let forwarded = headers["forwarded"] {
            // `for=192.0.2.1;proto=https, for="[2001:db8::1]:4711"`
            for element in forwarded.split(separator: ",") {
                for pair in element.split(separator: ";") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    guard parts.count == 2, HTTPRequest.trimmingSpaces(parts[0]).lowercased() == "for" else { continue }
                    chain.append(Self.bareAddress(HTTPRequest.trimmingSpaces(parts[1])))
                }
            }
        } else if forwardedHeader == .xForwardedFor, let forwardedFor = headers["x-forwarded-for"] {
            chain = forwardedFor.split(separator: ",").map { Self.bareAddress(HTTPRequest.trimmingSpaces($0)) }
        }
        // Right to left: entries a trusted proxy added are trusted; the first other is the client.
        for address in chain.reversed() where !trustedProxies.contains(address) { return Self.isIPAddress(address) ? address : peer }
        return peer
    }

    package static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// `"[2001:db8::1]:4711"` → `2001:db8::1`, `192.0.2.1:80` → `192.0.2.1`.
    static func bareAddress(_ text: Substring) -> String {
        var value = text
        if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]") else { return String(value) }
            return String(value[value.index(after: value.startIndex)..<close])
        }
        // IPv4 with a port has exactly one colon; a bare IPv6 address has several.
        if value.filter({ $0 == ":" }).count == 1, let colon = value.firstIndex(of: ":") { return String(value[..<colon]) }
        return String(value)
    }
}

/// Open connections in total and per peer address; decides whether the next one is served.
package struct ConnectionCounts: Sendable {
    package enum Verdict: Sendable, Equatable {
        case serve
        /// Answer 503 with this code and message, then close.
        case refuse(code: String, message: String)
        /// Close without a word: even the refusals are at their limit.
        case drop
    }

    package private(set) var total = 0
    package private(set) var refusing = 0
    private var perAddress: [String: Int] = [:]

    package init() {}

    package func count(from address: String) -> Int { perAddress[address] ?? 0 }

    /// Whether a connection from `peer` is served; a served one is counted until `closed`.
    package mutating func opened(peer: String, policy: ConnectionPolicy) -> Verdict {
        var verdict = Verdict.serve
        if total >= policy.maxConnections {
            verdict = .refuse(code: "server_busy", message: "the server has \(policy.maxConnections) connections open; retry shortly")
        } else if !policy.trustedProxies.contains(peer), count(from: peer) >= policy.maxConnectionsPerAddress {
            verdict = .refuse(code: "too_many_connections", message: "\(policy.maxConnectionsPerAddress) connections from this address are open; reuse one or retry shortly")
        }
        switch verdict {
        case .serve:
            total += 1
            perAddress[peer, default: 0] += 1
        case .refuse:
            guard refusing < policy.maxRefusing else { return .drop }
            refusing += 1
        case .drop: break
        }
        return verdict
    }

    package mutating func closed(peer: String, wasServed: Bool) {
        guard wasServed else {
            refusing -= 1
            return
        }
        total -= 1
        let left = count(from: peer) - 1
        perAddress[peer] = left > 0 ? left : nil
    }
}
