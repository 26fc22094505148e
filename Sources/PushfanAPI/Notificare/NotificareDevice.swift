import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport

/// A device as Notificare's SDK describes it (its field names), kept whole so the SDK's reads
/// answer in its terms, and the device row campaigns reach derived from it. A pure value:
/// `apply` merges a request body, `registration` maps it onto the device model.
///
/// Mapping (docs/api.md): `deviceID` is the APNs token in hex once `transport` is `APNS`
/// (before that the device is temporary: kept here, not reachable by campaigns);
/// `language` + `region` → locale; `timeZoneOffset` (hours, no daylight-saving rule) →
/// the fixed zone `Etc/GMT∓N` for whole hours, else none (the offset is kept as an
/// attribute); `userID`/`userName` → attributes `user_id`/`user_name`; user data →
/// attributes `userdata.<key>`; `dnd` → quiet hours; tags → tags.
struct NotificareDevice: Codable, Equatable, Sendable {
    struct DoNotDisturb: Codable, Equatable, Sendable {
        var start: String
        var end: String
    }

    var deviceID: String
    var transport: String?
    var userID: String?
    var userName: String?
    var language: String?
    var region: String?
    var timeZoneOffset: Double?
    var osVersion: String?
    var sdkVersion: String?
    var appVersion: String?
    var deviceString: String?
    var allowedUI: Bool?
    var backgroundAppRefresh: Bool?
    var bluetoothEnabled: Bool?
    var tags: [String] = []
    var userData: [String: String] = [:]
    var dnd: DoNotDisturb?

    init(deviceID: String) { self.deviceID = deviceID }

    var isAPNs: Bool { transport == "APNS" }

    /// Merges the members of a registration or update body; `null` clears. Members the
    /// device model has no place for (location, platform) are passed over.
    mutating func apply(_ body: [String: JSONValue]) throws(APIError) {
        func text(_ key: String) throws(APIError) -> String?? {
            switch body[key] {
            case nil: return .none
            case .null?: return .some(nil)
            case .string(let value)?: return .some(value)
            default: throw APIError(400, "invalid_input", "\(key): expected a string", field: key)
            }
        }
        func flag(_ key: String) throws(APIError) -> Bool?? {
            switch body[key] {
            case nil: return .none
            case .null?: return .some(nil)
            case .bool(let value)?: return .some(value)
            default: throw APIError(400, "invalid_input", "\(key): expected true or false", field: key)
            }
        }
        // Ids are the path's or the registration's; a wrong type is refused all the same.
        _ = try text("deviceID")
        _ = try text("oldDeviceID")
        if let value = try text("transport") { transport = value }
        if let value = try text("userID") { userID = value }
        if let value = try text("userName") { userName = value }
        if let value = try text("language") { language = value }
        if let value = try text("region") { region = value }
        if let value = try text("osVersion") { osVersion = value }
        if let value = try text("sdkVersion") { sdkVersion = value }
        if let value = try text("appVersion") { appVersion = value }
        if let value = try text("deviceString") { deviceString = value }
        if let value = try flag("allowedUI") { allowedUI = value }
        if let value = try flag("backgroundAppRefresh") { backgroundAppRefresh = value }
        if let value = try flag("bluetoothEnabled") { bluetoothEnabled = value }
        switch body["timeZoneOffset"] {
        case nil: break
        case .null?: timeZoneOffset = nil
        case let value? where value.doubleValue != nil && abs(value.doubleValue ?? 99) <= 14: timeZoneOffset = value.doubleValue
        default: throw APIError(400, "invalid_input", "timeZoneOffset: expected hours east of UTC, from -14 to 14", field: "timeZoneOffset")
        }
    }

    /// The fixed-offset zone for a whole-hour offset (`Etc/GMT-1` is UTC+1: POSIX signs).
    static func zone(forOffsetHours hours: Double?) -> String? {
        guard let hours, hours == hours.rounded(), (-12...14).contains(hours) else { return nil }
        let whole = Int(hours)
        return whole == 0 ? "UTC" : "Etc/GMT\(whole > 0 ? "-" : "+")\(abs(whole))"
    }

    /// The device row campaigns reach; nil while the device is temporary (no APNs token).
    func registration(environment: APNsEnvironment) throws(APIError) -> DeviceRegistration? {
        guard isAPNs else { return nil }
        var registration = DeviceRegistration(deviceID: deviceID, token: deviceID)
        registration.environment = environment
        if let language, !language.isEmpty { registration.locale = language + (region.map { $0.isEmpty ? "" : "_" + $0 } ?? "") }
        registration.timezone = Self.zone(forOffsetHours: timeZoneOffset)
        registration.appVersion = appVersion
        registration.osVersion = osVersion
        registration.tags = tags
        var attributes: [String: JSONValue] = [:]
        if let userID { attributes["user_id"] = .string(userID) }
        if let userName { attributes["user_name"] = .string(userName) }
        if let timeZoneOffset { attributes["time_zone_offset"] = .number(timeZoneOffset) }
        if let deviceString { attributes["device_model"] = .string(deviceString) }
        if let sdkVersion { attributes["sdk_version"] = .string(sdkVersion) }
        if let allowedUI { attributes["allowed_ui"] = .bool(allowedUI) }
        for (key, value) in userData { attributes["userdata." + key] = .string(value) }
        registration.attributes = attributes
        if let dnd {
            do { registration.quietHours = try QuietHours(start: dnd.start, end: dnd.end) } catch {
                throw APIError(400, "invalid_input", "dnd: \(error.description)", field: "dnd")
            }
        }
        return registration
    }
}
