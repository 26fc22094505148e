import PushfanMessages
import PushfanSchedule
import PushfanStore
import PushfanSupport
import Testing

@testable import PushfanAPI

/// How a device in Notificare's terms maps onto Pushfan's device model.
@Suite struct NotificareDeviceTests {
    @Test func wholeHourOffsetsBecomeFixedZonesOthersNone() {
        #expect(NotificareDevice.zone(forOffsetHours: 1) == "Etc/GMT-1")
        #expect(NotificareDevice.zone(forOffsetHours: -5) == "Etc/GMT+5")
        #expect(NotificareDevice.zone(forOffsetHours: 0) == "UTC")
        #expect(NotificareDevice.zone(forOffsetHours: 14) == "Etc/GMT-14")
        #expect(NotificareDevice.zone(forOffsetHours: 5.5) == nil)
        #expect(NotificareDevice.zone(forOffsetHours: nil) == nil)
    }

    @Test func mapsOntoTheDeviceModelOnceItHasAToken() throws {
        var device = NotificareDevice(deviceID: String(repeating: "ab", count: 32))
        try device.apply(["transport": "Notificare", "language": "pt", "region": "BR", "timeZoneOffset": .int(-3), "userID": "u1", "allowedUI": false])
        #expect(try device.registration(environment: .sandbox) == nil, "a temporary device has no row")
        try device.apply(["transport": "APNS", "userID": .null])
        device.userData = ["plan": "pro"]
        device.dnd = .init(start: "22:00", end: "06:30")
        let registration = try #require(try device.registration(environment: .sandbox))
        #expect(registration.token == device.deviceID && registration.environment == .sandbox)
        #expect(registration.locale == "pt_BR" && registration.timezone == "Etc/GMT+3")
        #expect(registration.attributes == ["userdata.plan": "pro", "allowed_ui": false, "time_zone_offset": .number(-3)])
        #expect(registration.quietHours == (try QuietHours(start: "22:00", end: "06:30")))
    }

    @Test func refusesWrongTypes() {
        var device = NotificareDevice(deviceID: "d")
        for (key, value) in [("language", JSONValue.int(3)), ("allowedUI", "yes"), ("timeZoneOffset", .int(20)), ("timeZoneOffset", "1")] {
            #expect(throws: APIError.self, "\(key)") { try device.apply([key: value]) }
        }
    }
}
