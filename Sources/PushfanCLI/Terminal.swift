import Foundation

/// Reads newline-separated records from a file descriptor in large chunks.
struct LineReader {
    private let descriptor: Int32
    private var buffer = [UInt8]()
    private var start = 0
    private var atEnd = false

    init(descriptor: Int32) { self.descriptor = descriptor }

    /// The next line without its newline (a trailing "\r" is kept), or nil at end of input.
    mutating func next() -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = buffer[start..<newline]
                start = newline + 1
                return line
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = buffer[start...]
                start = buffer.count
                return line
            }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            let chunk = 1 << 20
            let oldCount = buffer.count
            buffer.reserveCapacity(oldCount + chunk)
            buffer.append(contentsOf: repeatElement(0, count: chunk))
            let got = buffer.withUnsafeMutableBytes { raw in read(descriptor, raw.baseAddress! + oldCount, chunk) }
            buffer.removeLast(chunk - max(got, 0))
            if got <= 0 { atEnd = true }
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

    /// Resolves on the first SIGINT or SIGTERM with the signal number.
    static func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            install { continuation.resume(returning: $0) }
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
