/// An iOS 18 broadcast channel: APNs makes its id when a provider creates it (channel
/// management requests), devices subscribe their Live Activities to it, and one broadcast
/// request reaches every subscriber. Channels are per bundle id and environment; the
/// message storage policy is fixed at creation.
package enum BroadcastChannel {
    /// Apple's limit per app and environment.
    package static let maxPerApp = 10_000
    /// A broadcast's payload limit (larger than a device push's).
    package static let maxPayloadBytes = 5_120
    /// Longest channel id Pushfan accepts. Apple says not to assume a size; its ids are
    /// base64 of a few dozen bytes.
    package static let maxIDLength = 256

    /// Checks a channel id as APNs gives it: standard base64 (`A-Z a-z 0-9 + /`, `=`
    /// padding), 4 to `maxIDLength` characters. Returns why not, or nil.
    package static func problem(withID id: String) -> String? {
        let bytes = Array(id.utf8)
        guard (4...maxIDLength).contains(bytes.count), bytes.count % 4 == 0 else {
            return "must be base64 as APNs made it (a multiple of 4 characters, 4 to \(maxIDLength)); found \(bytes.count) characters"
        }
        let padding = bytes.reversed().prefix(while: { $0 == UInt8(ascii: "=") }).count
        guard padding <= 2 else { return "is not base64: more than two '=' at its end" }
        for byte in bytes.dropLast(padding) {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "+"), UInt8(ascii: "/"):
                continue
            default:
                return "is not base64: it holds \(APNsQuote.character(Character(Unicode.Scalar(byte))))"
            }
        }
        return nil
    }

    /// `message-storage-policy`: whether APNs keeps a channel's latest message for
    /// subscribers that join later (at most 8 hours). Without storage a channel has a
    /// higher publishing budget, and its broadcasts must carry `apns-expiration: 0`.
    package enum StoragePolicy: Int, Sendable, Hashable, CaseIterable {
        case noMessageStored = 0
        case mostRecentMessageStored = 1

        /// The name Pushfan's API and store use.
        package var name: String { self == .noMessageStored ? "none" : "most_recent" }

        package init?(name: String) {
            guard let policy = Self.allCases.first(where: { $0.name == name }) else { return nil }
            self = policy
        }
    }
}
