internal import CNghttp2

/// A reusable header list for one request or response: names and values are copied into
/// one scratch buffer, and the entries nghttp2 reads point into it. nghttp2 copies them when
/// a request or response is submitted, so the list is free again right after. A value that
/// does not fit in what is left of the buffer is cut short.
package final class HTTP2Headers {
    private let scratch: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    let entries: UnsafeMutablePointer<nghttp2_nv>
    private let maxEntries: Int
    package private(set) var count = 0
    private var used = 0

    package init(bytes: Int = 16 * 1024, entries: Int = 16) {
        capacity = bytes
        maxEntries = entries
        scratch = .allocate(capacity: bytes)
        self.entries = .allocate(capacity: entries)
    }

    deinit {
        scratch.deallocate()
        entries.deallocate()
    }

    /// Empties the list for the next request or response.
    package func reset() {
        count = 0
        used = 0
    }

    package func add(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        guard count < maxEntries, used + name.utf8CodeUnitCount <= capacity else { return }
        let nameStart = scratch + used
        nameStart.update(from: name.utf8Start, count: name.utf8CodeUnitCount)
        used += name.utf8CodeUnitCount
        let valueStart = scratch + used
        let valueCount = min(value.count, capacity - used)
        if valueCount > 0 { valueStart.update(from: value.baseAddress!.assumingMemoryBound(to: UInt8.self), count: valueCount) }
        used += valueCount
        entries[count] = nghttp2_nv(
            name: nameStart, value: valueStart, namelen: name.utf8CodeUnitCount, valuelen: valueCount,
            flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        count += 1
    }

    package func add(_ name: StaticString, _ value: String) {
        var value = value
        value.withUTF8 { add(name, UnsafeRawBufferPointer($0)) }
    }

    package func add(_ name: StaticString, _ value: [UInt8]) {
        value.withUnsafeBytes { add(name, $0) }
    }
}
