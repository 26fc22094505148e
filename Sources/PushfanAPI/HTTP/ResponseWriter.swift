/// Writes an answer's status line and headers, and a streaming body's chunks.
enum ResponseWriter {
    static func appendHead(
        _ response: HTTPResponse, version: RequestHead.Version, close: Bool, date: String, streaming: Bool, to output: inout [UInt8]
    ) {
        var head = "HTTP/1.1 \(response.status) \(reason(response.status))\r\n"
        for (name, value) in response.headers where !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) {
            head += "\(name): \(value)\r\n"
        }
        if streaming {
            if version == .http11 { head += "Transfer-Encoding: chunked\r\n" }
        } else if response.status >= 200 && response.status != 204 && response.status != 304 {
            head += "Content-Length: \(response.body.count)\r\n"
        }
        // No answer is read as another type than it says (a JSON error as HTML).
        head += "X-Content-Type-Options: nosniff\r\n"
        if close {
            head += "Connection: close\r\n"
        } else if version == .http10 {
            head += "Connection: keep-alive\r\n"
        }
        head += "Date: \(date)\r\n\r\n"
        output.append(contentsOf: head.utf8)
    }

    /// One chunk of a streaming body (HTTP/1.0: the bytes as they are; the body ends when
    /// the connection closes).
    static func appendChunk(_ bytes: [UInt8], chunked: Bool, to output: inout [UInt8]) {
        if chunked { output.append(contentsOf: (String(bytes.count, radix: 16) + "\r\n").utf8) }
        output.append(contentsOf: bytes)
        if chunked { output.append(contentsOf: [0x0D, 0x0A]) }
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}
