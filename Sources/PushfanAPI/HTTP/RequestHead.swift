/// A request's line and headers, parsed strictly (RFC 9112) so that no two readers of the
/// same bytes (a reverse proxy in front, this server behind it) can disagree on where a
/// request ends: every line ends in CRLF, no obsolete line folding, at most one
/// Content-Length (digits only) and never together with Transfer-Encoding, only `chunked`
/// as a transfer coding, exactly one Host on HTTP/1.1, and no header repeated whose second
/// copy could change the meaning (Authorization, Content-Type). A pure value.
package struct RequestHead: Sendable, Equatable {
    package enum Version: Sendable, Equatable { case http10, http11 }
    package enum Framing: Sendable, Equatable {
        case none
        case length(Int)
        case chunked
    }

    package var method: String
    /// The request target as sent (origin form), before any decoding.
    package var target: String
    package var version: Version
    /// Names lower-cased; list headers sent on several lines joined with ", ".
    package var headers: [String: String]
    package var framing: Framing
    /// The client may send another request on this connection after the answer.
    package var keepAlive: Bool
    /// `Expect: 100-continue`: the client waits for a go-ahead before sending its body.
    package var expectsContinue: Bool

    /// The target's path (raw: `%2F` stays as it is, so it never separates segments).
    package var path: String {
        guard let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return target }
        return String(target[..<mark])
    }

    /// The target's query, `&`-separated `name=value` pairs with `+` and `%XX` decoded (the
    /// last of a repeated name wins).
    package var query: [String: String] {
        guard let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return [:] }
        var query: [String: String] = [:]
        for pair in target[target.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in Router<Never>.percentDecoded(Substring(text.replacingOccurrences(of: "+", with: " "))) }
            query[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return query
    }
}

/// Why a head was refused; each becomes an answer with that status and the connection closed.
package struct HeadError: Error, Sendable, Equatable {
    package let status: Int
    package let code: String
    package let message: String

    static func malformed(_ message: String) -> HeadError { HeadError(status: 400, code: "malformed_request", message: message) }
}

/// Finds and parses request heads in a connection's bytes.
package enum RequestHeadParser {
    package enum Scan: Sendable, Equatable {
        /// No end yet; resume the search at this offset when more bytes come.
        case incomplete(resumeAt: Int)
        /// The head is `bytes[..<end]` (the blank line included).
        case complete(end: Int)
    }

    /// Looks for the blank line that ends a head, from `offset` on (a previous `incomplete`'s
    /// resume point, or 0). A line feed without its carriage return, or a carriage return
    /// without its line feed, is refused at once: a client sending bare LF never gets to wait
    /// out the deadline. More than `limit` bytes without an end: 431.
    package static func scan(_ bytes: UnsafeRawBufferPointer, from offset: Int, limit: Int) throws(HeadError) -> Scan {
        var index = offset
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x0A {
                guard index > 0, bytes[index - 1] == 0x0D else { throw .malformed("a line ends in LF without CR") }
                // CR LF CR LF: an empty line after the last header.
                if index >= 3, bytes[index - 2] == 0x0A, bytes[index - 3] == 0x0D {
                    guard index < limit else { throw tooLarge(limit) }
                    return .complete(end: index + 1)
                }
            } else if index > 0, bytes[index - 1] == 0x0D {
                throw .malformed("a CR is not followed by LF")
            }
            index += 1
        }
        if bytes.count > limit { throw tooLarge(limit) }
        // The byte before the resume point is looked at again (a CR waiting for its LF).
        return .incomplete(resumeAt: bytes.count)
    }

    static func tooLarge(_ limit: Int) -> HeadError {
        HeadError(status: 431, code: "headers_too_large", message: "the request line and headers are larger than \(limit) bytes")
    }

    /// Headers that must appear at most once: a second copy is how one reader comes to
    /// see a different request than another.
    static let singletons: Set<String> = ["content-length", "transfer-encoding", "host", "authorization", "content-type", "expect"]
    static let maxHeaders = 100

    /// Parses a complete head (as `scan` delimited it: CRLF line ends guaranteed).
    package static func parse(_ bytes: UnsafeRawBufferPointer) throws(HeadError) -> RequestHead {
        var lines: [UnsafeRawBufferPointer] = []
        var start = 0
        for index in 0..<bytes.count where bytes[index] == 0x0A {
            lines.append(UnsafeRawBufferPointer(rebasing: bytes[start..<(index - 1)]))
            start = index + 1
        }
        // The last line is the empty one that ends the head.
        guard lines.count >= 2 else { throw .malformed("no request line") }
        guard lines.count - 2 <= maxHeaders else { throw HeadError(status: 431, code: "too_many_headers", message: "more than \(maxHeaders) header lines") }
        let (method, target, version) = try requestLine(lines[0])
        var headers: [String: String] = [:]
        for line in lines[1..<(lines.count - 1)] {
            guard let first = line.first else { throw .malformed("an empty header line") }
            if first == 0x20 || first == 0x09 { throw .malformed("obsolete line folding (a header line starting with a space or tab)") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { throw .malformed("a header line without a name and colon") }
            let nameBytes = UnsafeRawBufferPointer(rebasing: line[..<colon])
            guard nameBytes.allSatisfy(isTokenByte) else { throw .malformed("a header name with a character a name cannot have (or a space before the colon)") }
            let valueBytes = UnsafeRawBufferPointer(rebasing: line[(colon + 1)...])
            guard valueBytes.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { throw .malformed("a header value with a control character") }
            let name = String(decoding: nameBytes, as: UTF8.self).lowercased()
            let value = String(HTTPRequest.trimmingSpaces(Substring(String(decoding: valueBytes, as: UTF8.self))))
            if let earlier = headers[name] {
                guard !singletons.contains(name) else { throw .malformed("more than one \(name) header") }
                headers[name] = earlier + ", " + value
            } else {
                headers[name] = value
            }
        }
        if version == .http11 {
            guard let host = headers["host"], !host.isEmpty else { throw .malformed("an HTTP/1.1 request without a Host header") }
        }
        let framing = try framing(headers, version: version)
        let tokens = (headers["connection"] ?? "").lowercased().split(separator: ",").map { HTTPRequest.trimmingSpaces($0) }
        let keepAlive = version == .http11 ? !tokens.contains("close") : tokens.contains("keep-alive")
        let expect = headers["expect"]?.lowercased()
        if let expect, expect != "100-continue" { throw HeadError(status: 417, code: "expectation_failed", message: "only Expect: 100-continue is understood") }
        return RequestHead(
            method: method, target: target, version: version, headers: headers, framing: framing, keepAlive: keepAlive,
            expectsContinue: expect != nil && version == .http11)
    }

    /// `METHOD SP origin-form SP HTTP/1.x`, single spaces.
    private static func requestLine(_ line: UnsafeRawBufferPointer) throws(HeadError) -> (String, String, RequestHead.Version) {
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("the request line is not METHOD TARGET HTTP-VERSION with single spaces") }
        guard !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else { throw .malformed("the method is not a token") }
        let target = parts[1]
        guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .malformed("the request target must be a path starting with / in visible ASCII")
        }
        let version: RequestHead.Version
        switch String(decoding: parts[2], as: UTF8.self) {
        case "HTTP/1.1": version = .http11
        case "HTTP/1.0": version = .http10
        default: throw HeadError(status: 505, code: "http_version_not_supported", message: "only HTTP/1.1 and HTTP/1.0 are served")
        }
        return (String(decoding: parts[0], as: UTF8.self), String(decoding: target, as: UTF8.self), version)
    }

    private static func framing(_ headers: [String: String], version: RequestHead.Version) throws(HeadError) -> RequestHead.Framing {
        let length = headers["content-length"]
        if let coding = headers["transfer-encoding"] {
            guard length == nil else { throw .malformed("both Content-Length and Transfer-Encoding") }
            guard version == .http11 else { throw .malformed("Transfer-Encoding in an HTTP/1.0 request") }
            guard coding.lowercased() == "chunked" else {
                throw HeadError(status: 501, code: "transfer_coding_not_supported", message: "only Transfer-Encoding: chunked is understood (got \(coding))")
            }
            return .chunked
        }
        guard let length else { return .none }
        // Digits only (no sign, no spaces, no list "5, 5"), and a length that fits.
        guard !length.isEmpty, length.utf8.count <= 15, length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(length) else {
            throw .malformed("Content-Length is not a decimal number")
        }
        return value == 0 ? .none : .length(value)
    }

    /// RFC 9110 `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"),
            UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"),
            UInt8(ascii: "~"): true
        default: false
        }
    }
}
