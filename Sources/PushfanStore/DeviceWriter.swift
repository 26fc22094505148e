import PushfanAPNsModel
import PushfanMessages
import PushfanSupport

/// The one write path for devices, used by registration (one device) and bulk import: a
/// token follows the device that registers it last, re-registration revives a device, tags
/// are replaced. Each backend writes in its fastest way (SQLite: statements prepared once
/// with values bound per row; PostgreSQL: COPY into a staging table, then set-based SQL),
/// with the same rules; `SQLBackend.upsert` picks the backend's writer.
enum DeviceWriter {
    /// What was written: the device count, row keys (when asked for) and, per device, the
    /// device ids its token was taken from.
    struct Written {
        var rowKeys: [String: Int64] = [:]
        var movedFrom: [String: [String]] = [:]
        var count = 0
    }

    private struct TokenKey: Hashable {
        let environment: APNsEnvironment
        let token: String
    }

    /// Within a batch the last line for a device id or a token wins, so that no statement
    /// meets the same row twice.
    static func lastWins(_ devices: [ValidatedDevice]) -> [ValidatedDevice] {
        guard devices.count > 1 else { return devices }
        var lastForDevice: [String: Int] = [:]
        var lastForToken: [TokenKey: Int] = [:]
        lastForDevice.reserveCapacity(devices.count)
        lastForToken.reserveCapacity(devices.count)
        for (index, device) in devices.enumerated() {
            lastForDevice[device.deviceID] = index
            lastForToken[TokenKey(environment: device.environment, token: device.token)] = index
        }
        if lastForDevice.count == devices.count && lastForToken.count == devices.count { return devices }
        return devices.indices.filter { index in
            lastForDevice[devices[index].deviceID] == index && lastForToken[TokenKey(environment: devices[index].environment, token: devices[index].token)] == index
        }.map { devices[$0] }
    }

    /// `devices` in `count` parts by device id, each in its original order: parts share no
    /// device, so they can be written at once and every device still sees its lines in order.
    static func split(_ devices: [ValidatedDevice], into count: Int) -> [[ValidatedDevice]] {
        var parts = Array(repeating: [ValidatedDevice](), count: count)
        for device in devices { parts[Int(FNV1a.hash(device.deviceID) % UInt64(count))].append(device) }
        return parts
    }
}
