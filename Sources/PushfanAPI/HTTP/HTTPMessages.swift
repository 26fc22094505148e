import Foundation
import PushfanMessages
import PushfanSupport

/// A request as a handler sees it: read whole (within the body limit) before the handler
/// runs (an admission sees it without its body). Header names are lower-cased; the path is
/// as sent, not percent-decoded.
package struct HTTPRequest: Sendable {
    package var method: String
    package var path: String
    package var query: [String: String]
    package var headers: [String: String]
    package var body: [UInt8]
    /// Who the client is: the connection's peer, or the address a trusted proxy forwarded.
    package var clientAddress: String
    /// The connection's peer (a proxy's address when there is one).
    package var peerAddress = ""

    package init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], body: [UInt8] = [], clientAddress: String = "") {
        (self.method, self.path, self.query, self.headers, self.body, self.clientAddress) = (method, path, query, headers, body, clientAddress)
    }

    package func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// Without HTTP's optional whitespace (spaces and tabs) at either end.
    static func trimmingSpaces(_ text: Substring) -> Substring {
        let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = text.utf8.firstIndex(where: { !isSpace($0) }), let last = text.utf8.lastIndex(where: { !isSpace($0) }) else { return "" }
        return text[first...last]
    }
}

/// A response: status, headers, and a body given whole or, with `stream`, written over time.
package struct HTTPResponse: Sendable, Equatable {
    package var status: Int
    package var headers: [String: String]
    package var body: [UInt8]
    /// A body of unknown length the handler goes on writing (`body` is then ignored).
    package var stream: EventStream?

    package init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        (self.status, self.headers, self.body) = (status, headers, body)
    }

    /// A JSON body (compact, keys sorted).
    package static func json(_ status: Int, _ value: JSONValue, headers: [String: String] = [:]) -> HTTPResponse {
        var all = headers
        all["Content-Type"] = "application/json"
        return HTTPResponse(status: status, headers: all, body: Array((value.compactJSON + "\n").utf8))
    }
}

/// The one error shape every route answers with: `{"error": {"code", "message", "field"}}`.
/// The code is a fixed string a client can branch on; the message is for people; `field` is
/// the JSON path of the input at fault, when there is one.
package struct APIError: Error, Sendable, Equatable {
    package let status: Int
    package let code: String
    package let message: String
    package var field: String? = nil
    package var headers: [String: String] = [:]
    /// More members of the error object (a batch's per-item problems).
    package var details: [String: JSONValue] = [:]

    package init(_ status: Int, _ code: String, _ message: String, field: String? = nil, headers: [String: String] = [:]) {
        (self.status, self.code, self.message, self.field, self.headers) = (status, code, message, field, headers)
    }

    package var response: HTTPResponse {
        var error = details
        error["code"] = .string(code)
        error["message"] = .string(message)
        if let field { error["field"] = .string(field) }
        return .json(status, .object(["error": .object(error)]), headers: headers)
    }

    package static func notFound(_ what: String) -> APIError { APIError(404, "not_found", what) }
}
