import Foundation

/// Reads newline-separated records from a file descriptor in large chunks into one
/// fixed buffer, handing each line out as raw bytes without copying it.
struct LineReader: ~Copyable {
    /// One line of input, without its newline.
    enum Line {
        case text(UnsafeRawBufferPointer)
        /// Longer than the buffer: skipped whole, so one over-long line is one line.
        case tooLong(bytes: Int)
    }

    private let descriptor: Int32
    private let buffer: UnsafeMutableRawBufferPointer
    private var start = 0
    private var end = 0
    private var atEnd = false

    /// The longest line handed out as text.
    var maxLineBytes: Int { buffer.count }

    init(descriptor: Int32, chunkSize: Int = 1 << 20) {
        self.descriptor = descriptor
        buffer = .allocate(byteCount: chunkSize, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// Calls `body` with the next line; false at end of input.
    mutating func next(_ body: (Line) -> Void) -> Bool {
        while true {
            let base = buffer.baseAddress!
            if start < end, let hit = memchr(base + start, 0x0A, end - start) {
                let newline = UnsafeRawPointer(hit) - UnsafeRawPointer(base)
                body(.text(UnsafeRawBufferPointer(start: base + start, count: newline - start)))
                start = newline + 1
                return true
            }
            if atEnd {
                guard start < end else { return false }
                body(.text(UnsafeRawBufferPointer(start: base + start, count: end - start)))
                start = end
                return true
            }
            if start == 0 && end == buffer.count {
                body(.tooLong(bytes: skipLine()))
                return true
            }
            // Move the partial line to the front and fill the rest.
            if start > 0 {
                memmove(base, base + start, end - start)
                end -= start
                start = 0
            }
            fill()
        }
    }

    /// Reads past the rest of a line that fills the buffer; returns its whole length.
    private mutating func skipLine() -> Int {
        var skipped = 0
        while true {
            let base = buffer.baseAddress!
            if start < end, let hit = memchr(base + start, 0x0A, end - start) {
                let newline = UnsafeRawPointer(hit) - UnsafeRawPointer(base)
                skipped += newline - start
                start = newline + 1
                return skipped
            }
            skipped += end - start
            start = 0
            end = 0
            if atEnd { return skipped }
            fill()
        }
    }

    private mutating func fill() {
        while true {
            let got = read(descriptor, buffer.baseAddress! + end, buffer.count - end)
            if got > 0 {
                end += got
            } else if got < 0 && errno == EINTR {
                continue
            } else {
                atEnd = true
            }
            return
        }
    }
}

/// Accumulates output and writes it with few system calls.
struct OutputBuffer {
    private var bytes: [UInt8] = []
    private let descriptor: Int32

    init(descriptor: Int32 = 1) { self.descriptor = descriptor }

    mutating func append(_ data: some Sequence<UInt8>) { bytes.append(contentsOf: data) }
    mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
    mutating func append(_ byte: UInt8) { bytes.append(byte) }

    /// Writes everything; false when the reader went away (EPIPE) or writing failed.
    @discardableResult
    mutating func flush() -> Bool {
        defer { bytes.removeAll(keepingCapacity: true) }
        return bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }
}

/// SIGINT and SIGTERM as events, so commands can stop cleanly (commit, flush, leave the group).
enum ShutdownSignal {
    /// Calls `handler` once, on the first SIGINT or SIGTERM.
    static func install(_ handler: @escaping @Sendable (Int32) -> Void) {
        let once = OnceFlag()
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if once.claim() { handler(number) }
            }
            source.resume()
            // Dispatch sources stop when released; this one lives as long as the process.
            _ = Unmanaged.passRetained(source as AnyObject)
        }
    }

    /// Installs the handlers now and returns a wait for the first SIGINT or SIGTERM. Call it
    /// before announcing readiness: a signal that arrives between the announcement and the
    /// wait is kept, not lost to the default action (which kills the process).
    static func prepare() -> @Sendable () async -> Int32 {
        let (signals, continuation) = AsyncStream<Int32>.makeStream()
        install { continuation.yield($0) }
        return {
            for await signal in signals { return signal }
            return SIGTERM
        }
    }
}

/// True for the first caller only.
final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var claimed = false
    func claim() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if claimed { return false }
        claimed = true
        return true
    }
}

/// Writes a file atomically (temporary file + rename), so readers never see half of it.
func writeAtomically(_ text: String, to path: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
}

/// A progress line on a terminal, redrawn in place; silent when stderr is not a terminal.
struct ProgressLine {
    let enabled = isatty(2) == 1
    func show(_ text: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K\(text)".utf8))
    }
    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }
}
