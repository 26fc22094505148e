/// Decodes a `Transfer-Encoding: chunked` body as its bytes arrive, as strictly as heads
/// are read: hex sizes without sign or spaces, chunk extensions only as `;token[=value]`,
/// every line ended by CRLF, trailer lines read and dropped. The decoded body is bounded by
/// `limit` (413 past it). A pure state machine; `feed` may be called with any split.
package struct ChunkedBody: Sendable {
    private enum State: Sendable {
        case size(value: Int, digits: Int)
        /// After a chunk's size (0: the last chunk), until its line ends.
        case extensions(size: Int)
        case sizeLineFeed(size: Int)
        case data(left: Int)
        case dataCarriageReturn
        case dataLineFeed
        /// At the start of a trailer line (or of the final empty line).
        case trailerStart
        /// A trailer field's name, then its value: checked as header lines are.
        case trailerName
        case trailerValue
        case trailerLineFeed(empty: Bool)
        case done
    }

    package enum Progress: Sendable, Equatable {
        case needMore
        /// The body ended; `consumed` of the bytes given in this call belong to it.
        case complete(consumed: Int)
    }

    private var state = State.size(value: 0, digits: 0)
    private var trailerBytes = 0
    package let limit: Int
    package private(set) var body: [UInt8] = []

    package init(limit: Int) { self.limit = limit }

    /// Consumes `bytes`, appending chunk data to `body`.
    package mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(HeadError) -> Progress {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch state {
            case .size(let value, let digits):
                if let digit = Router<Never>.hexValue(byte) {
                    guard digits < 15 else { throw .malformed("a chunk size is too long") }
                    state = .size(value: value << 4 | Int(digit), digits: digits + 1)
                } else {
                    guard digits > 0 else { throw .malformed("a chunk does not start with its size in hex") }
                    guard value <= limit - body.count else { throw Self.tooLarge(limit) }
                    switch byte {
                    case UInt8(ascii: ";"): state = .extensions(size: value)
                    case 0x0D: state = .sizeLineFeed(size: value)
                    default: throw .malformed("a chunk size is followed by something other than ; or CRLF")
                    }
                    if value > 0 { body.reserveCapacity(body.count + value) }
                }
            case .extensions(let size):
                if byte == 0x0D {
                    state = .sizeLineFeed(size: size)
                } else {
                    guard RequestHeadParser.isTokenByte(byte) || byte == UInt8(ascii: "=") || byte == UInt8(ascii: ";") || byte == UInt8(ascii: "\"") else {
                        throw .malformed("a chunk extension with a character it cannot have")
                    }
                }
            case .sizeLineFeed(let size):
                guard byte == 0x0A else { throw .malformed("a chunk size line does not end in CRLF") }
                state = size == 0 ? .trailerStart : .data(left: size)
            case .data(let left):
                let count = min(left, bytes.count - index)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + count)]))
                index += count
                state = left - count == 0 ? .dataCarriageReturn : .data(left: left - count)
                continue
            case .dataCarriageReturn:
                guard byte == 0x0D else { throw .malformed("chunk data is longer than its size") }
                state = .dataLineFeed
            case .dataLineFeed:
                guard byte == 0x0A else { throw .malformed("chunk data does not end in CRLF") }
                state = .size(value: 0, digits: 0)
            case .trailerStart:
                if byte == 0x0D {
                    state = .trailerLineFeed(empty: true)
                } else {
                    guard RequestHeadParser.isTokenByte(byte) else { throw .malformed("a trailer line does not start with a field name") }
                    try countTrailer()
                    state = .trailerName
                }
            case .trailerName:
                try countTrailer()
                if byte == UInt8(ascii: ":") {
                    state = .trailerValue
                } else if !RequestHeadParser.isTokenByte(byte) {
                    throw .malformed("a trailer field name with a character a name cannot have")
                }
            case .trailerValue:
                try countTrailer()
                if byte == 0x0D {
                    state = .trailerLineFeed(empty: false)
                } else if byte == 0x0A || (byte < 0x20 && byte != 0x09) || byte == 0x7F {
                    throw .malformed("a trailer value with a control character or a bare LF")
                }
            case .trailerLineFeed(let empty):
                guard byte == 0x0A else { throw .malformed("a trailer line does not end in CRLF") }
                if empty {
                    state = .done
                    return .complete(consumed: index + 1)
                }
                state = .trailerStart
            case .done:
                return .complete(consumed: index)
            }
            index += 1
        }
        if case .done = state { return .complete(consumed: bytes.count) }
        return .needMore
    }

    private mutating func countTrailer() throws(HeadError) {
        trailerBytes += 1
        guard trailerBytes <= 8 * 1024 else { throw RequestHeadParser.tooLarge(8 * 1024) }
    }

    static func tooLarge(_ limit: Int) -> HeadError {
        HeadError(status: 413, code: "body_too_large", message: "the request body is larger than \(limit) bytes")
    }
}
