import Foundation
import PushfanSupport

/// A record Pushfan could not process, kept with the reason and its original
/// bytes so nothing is lost and it can be fixed and sent again. Topic
/// `deadletter`, Kafka key = the original record's key.
package struct DeadLetterRecord: VersionedMessage, Hashable {
    package static let currentVersion = 1

    /// Topic the original record came from.
    package var topic: String
    /// Its partition.
    package var partition: Int
    /// Its offset in that partition.
    package var offset: Int64
    /// Its key, if it had one (non-UTF-8 key bytes arrive here with U+FFFD
    /// replacement characters; the value bytes are kept exactly in `original`).
    package var key: String?
    /// Machine code: a `MessageDecodingError.code` (`not_json`, `wrong_schema`,
    /// `unsupported_version`, `invalid_field`) or a processing code such as
    /// `unknown_app` or `payload_too_large`. Lowercase letters, digits and `_`.
    package var error: String
    /// What is wrong, for people: the field and the problem.
    package var reason: String
    /// The original record value, base64 (standard alphabet, padded); only its first
    /// `maxOriginalBytes` when `truncated`.
    package var original: String
    /// The whole original's size in bytes and SHA-256 (lowercase hex), set when `original`
    /// holds only a prefix: the dead letter itself must fit in a Kafka message.
    package var originalSize: Int?
    package var originalSHA256: String?
    /// `original` is a prefix of the record, not all of it.
    package var truncated: Bool { originalSize != nil }
    /// When the record was dead-lettered, in milliseconds since the epoch.
    package var at: Int64

    package init(
        topic: String, partition: Int, offset: Int64, key: String?,
        error: String, reason: String, original: String, at: Int64
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.error = error
        self.reason = reason
        self.original = original
        self.at = at
    }

    /// Largest original kept whole: `Campaign.maxRecordBytes`, so any campaign the planner
    /// may accept is kept exactly.
    package static let maxOriginalBytes = Campaign.maxRecordBytes
    /// What is kept of a larger original: enough to see its id, app and shape.
    package static let truncatedPrefixBytes = 64 * 1024

    /// From the original value bytes, which are stored base64-encoded. An original over
    /// `maxOriginalBytes` keeps its first `truncatedPrefixBytes`, with its size and the
    /// SHA-256 that `sha256` computes (the messages have no hashing of their own).
    package init(
        topic: String, partition: Int, offset: Int64, key: String?,
        error: String, reason: String, originalBytes: [UInt8], at: Int64, sha256: ([UInt8]) -> String
    ) {
        let whole = originalBytes.count <= Self.maxOriginalBytes
        let kept = whole ? originalBytes[...] : originalBytes.prefix(Self.truncatedPrefixBytes)
        self.init(
            topic: topic, partition: partition, offset: offset, key: key, error: error, reason: reason,
            original: Data(kept).base64EncodedString(), at: at)
        if !whole {
            originalSize = originalBytes.count
            originalSHA256 = sha256(originalBytes)
        }
    }

    /// From original value bytes that are known to be small (tests, tools).
    package init(
        topic: String, partition: Int, offset: Int64, key: String?,
        error: String, reason: String, originalBytes: some Sequence<UInt8>, at: Int64
    ) {
        self.init(
            topic: topic, partition: partition, offset: offset, key: key, error: error, reason: reason,
            original: Data(originalBytes).base64EncodedString(), at: at)
    }

    /// For a record `MessageCodec.decode` refused: `error` is the failure's
    /// code, `reason` its description.
    package init(
        topic: String, partition: Int, offset: Int64, key: String?,
        failure: MessageDecodingError, originalBytes: some Sequence<UInt8>, at: Int64
    ) {
        self.init(
            topic: topic, partition: partition, offset: offset, key: key, error: failure.code,
            reason: failure.description, originalBytes: originalBytes, at: at)
    }

    /// The original record value; nil if `original` is not valid base64.
    package func originalBytes() -> Data? {
        Data(base64Encoded: original)
    }

    /// The original record's key, so the dead letter lands beside its kin.
    package var kafkaKey: String? { key }

    private enum CodingKeys: String, CodingKey {
        case v, topic, partition, offset, key, error, reason, original, at
        case originalSize = "original_size", originalSHA256 = "original_sha256"
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        topic = try container.field(.topic)
        partition = try container.field(.partition)
        offset = try container.field(.offset)
        key = try container.optionalField(.key)
        error = try container.field(.error)
        reason = try container.field(.reason)
        original = try container.field(.original)
        originalSize = try container.optionalField(.originalSize)
        originalSHA256 = try container.optionalField(.originalSHA256)
        at = try container.field(.at)
    }

    /// A missing key is written as an explicit `null`.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.currentVersion, forKey: .v)
        try container.encode(topic, forKey: .topic)
        try container.encode(partition, forKey: .partition)
        try container.encode(offset, forKey: .offset)
        try container.encode(key, forKey: .key)
        try container.encode(error, forKey: .error)
        try container.encode(reason, forKey: .reason)
        try container.encode(original, forKey: .original)
        try container.encodeIfPresent(originalSize, forKey: .originalSize)
        try container.encodeIfPresent(originalSHA256, forKey: .originalSHA256)
        try container.encode(at, forKey: .at)
    }

    package func validate() throws(MessageDecodingError) {
        let topicBytes = topic.utf8
        guard !topicBytes.isEmpty, topicBytes.count <= 249,
              topicBytes.allSatisfy({ Rules.isIdentifierByte($0) && $0 != UInt8(ascii: ":") })
        else {
            throw .invalidField("topic", "must be a Kafka topic name (1 to 249 of A-Z a-z 0-9 . _ -), got \(Quote.clip(topic, max: 40))")
        }
        try Rules.nonNegative(partition, field: "partition")
        try Rules.nonNegative(offset, field: "offset")
        let errorBytes = error.utf8
        guard !errorBytes.isEmpty, errorBytes.count <= 64, errorBytes.allSatisfy({ byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "_")
        }) else {
            throw .invalidField("error", "must be a code of 1 to 64 lowercase letters, digits and _, got \(Quote.clip(error, max: 40))")
        }
        guard originalBytes() != nil else {
            throw .invalidField("original", "must be the original bytes in base64")
        }
        if let originalSize { try Rules.nonNegative(originalSize, field: "original_size") }
        if let digest = originalSHA256, digest.utf8.count != 64 || !digest.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) {
            throw .invalidField("original_sha256", "must be 64 lowercase hex digits")
        }
        try Rules.nonNegative(at, field: "at")
    }
}
