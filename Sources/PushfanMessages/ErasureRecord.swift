import PushfanSupport

/// A tombstone: a user's devices (or one device) of an app were erased on request
/// (`DELETE /v1/apps/{app}/users/{user}`, `POST …/devices/{device}/erase`). Written to the
/// results and events topics, Kafka key `<app>/erasure`, so that whoever keeps those
/// topics' records (a warehouse, a dashboard, a compacted copy) drops every record of these
/// devices: results carry `device`, events `device_id`. `type` is `erasure`, which no
/// result or event has; readers that do not know it skip it.
package struct ErasureRecord: VersionedMessage, Hashable {
    package static let currentVersion = 1
    package static let type = "erasure"

    package var app: String
    /// The erased user, when a user was erased.
    package var user: String?
    /// The erased devices' ids (possibly none: a user known only by its aliases).
    package var devices: [String]
    /// When, in milliseconds since the epoch.
    package var at: Int64

    package init(app: String, user: String?, devices: [String], at: Int64) {
        (self.app, self.user, self.devices, self.at) = (app, user, devices, at)
    }

    /// Devices one tombstone names at most: a user with thousands of devices is erased by
    /// several, each well within a Kafka record's size (about 40 KB at most ids' length).
    package static let devicesPerRecord = 1_000

    /// This erasure as the tombstones that carry it: the devices in order, at most
    /// `devicesPerRecord` each; one without devices for a user known only by its aliases.
    package var parts: [ErasureRecord] {
        stride(from: 0, to: max(devices.count, 1), by: Self.devicesPerRecord).map { start in
            ErasureRecord(app: app, user: user, devices: Array(devices[start..<min(start + Self.devicesPerRecord, devices.count)]), at: at)
        }
    }

    package var kafkaKey: String { app + "/" + Self.type }

    private enum CodingKeys: String, CodingKey {
        case v, type, app, user, devices, at
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type: String = try container.field(.type)
        guard type == Self.type else {
            throw MessageDecodingError.invalidField("type", "must be \(Self.type.debugDescription), got \(Quote.clip(type, max: 40))")
        }
        app = try container.field(.app)
        user = try container.optionalField(.user)
        devices = try container.field(.devices)
        at = try container.field(.at)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.currentVersion, forKey: .v)
        try container.encode(Self.type, forKey: .type)
        try container.encode(app, forKey: .app)
        try container.encodeIfPresent(user, forKey: .user)
        try container.encode(devices, forKey: .devices)
        try container.encode(at, forKey: .at)
    }

    package func validate() throws(MessageDecodingError) {
        try Rules.identifier(app, field: "app")
        try Rules.epochMillis(at, field: "at")
    }
}
