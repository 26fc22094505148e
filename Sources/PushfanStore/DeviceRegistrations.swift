import PushfanMessages
import PushfanSupport

/// Single-device registrations, written in groups (`GroupCommit`). Measured with 64 clients
/// registering over the API (scripts/bench-api), one transaction per registration left the
/// 99th percentile near 100 ms while the median was under 10; the waits were writers taking
/// turns at the lock.
///
/// A registration made with the application secret carries an `ApplicationClaim`, checked
/// in the same transaction that writes it, so the API's call costs one trip to the store, not
/// three (measured with scripts/bench-api: 21-23k registrations/s with the checks as reads of
/// their own, 32k with them here). No registration of the same process comes between the
/// check and the write (groups are written one after another), nor, on SQLite, of another
/// process (the write lock is taken at BEGIN). On PostgreSQL, at read committed, a device
/// another process commits with the same token in between can still lose it to this one.
enum DeviceRegistrations {
    typealias Item = (app: String, device: ValidatedDevice, claim: ApplicationClaim?)

    static func groups(_ executor: StoreExecutor) -> GroupCommit<Item, Result<RegistrationResult, RegistrationRefusal>> {
        GroupCommit(executor: executor) { connection, backend, items, now throws(StoreError) in
            // Each app once per group, not once per device.
            for app in Set(items.map(\.app)) { try StoreExecutor.requireApp(connection, app) }
            return try items.map { item throws(StoreError) in try register(connection, backend, item, now: now) }
        }
    }

    private static func register(
        _ connection: any SQLConnection, _ backend: any SQLBackend, _ item: Item, now: Int64
    ) throws(StoreError) -> Result<RegistrationResult, RegistrationRefusal> {
        let (app, device) = (item.app, item.device)
        // nil: no such device; otherwise its attributes as stored.
        let existing = try connection.queryOne("SELECT attributes FROM devices WHERE app = \(app) AND device_id = \(device.deviceID)") { $0.text(0) }
        if let claim = item.claim {
            let holder = try connection.queryOne(
                "SELECT device_id FROM devices WHERE app = \(app) AND environment = \(device.environment.rawValue) AND token = \(device.token)"
            ) { $0.text(0) ?? "" }
            if let holder, holder != device.deviceID, holder != claim.previousDeviceID { return .failure(.tokenRegisteredElsewhere) }
            // Compared as JSON: a user_id stored before it had to be text never matches.
            let user = device.userID.map { JSONValue.string($0) }
            if holder != device.deviceID, let existing, DeviceDirectory.attributes(existing)[Users.attribute] != user {
                return .failure(.userChangeNeedsDevice)
            }
        }
        let written = try backend.upsert(connection, app: app, devices: [device], now: now, returningRowKeys: true)
        guard let rowKey = written.rowKeys[device.deviceID] else { throw StoreError.database("upsert returned no row key") }
        try DeviceTokens.write(connection, app: app, devices: [device], rowKeys: written.rowKeys, now: now)
        return .success(RegistrationResult(rowKey: rowKey, created: existing == nil, tokenMovedFrom: written.movedFrom[device.deviceID] ?? []))
    }
}

/// What a registration made with the application secret must prove. That secret ships in
/// every copy of the app, so knowing a token or a device id is not being that device: a
/// token another device holds moves only when the caller names that registration, and a
/// device's user changes only in a registration that brings the device's own token.
package struct ApplicationClaim: Sendable, Equatable {
    /// The registration the caller says the token moves from (`?previous_device_id=`).
    package var previousDeviceID: String?

    package init(previousDeviceID: String?) { self.previousDeviceID = previousDeviceID }
}

/// Why a registration's `ApplicationClaim` did not hold; nothing was written.
package enum RegistrationRefusal: Error, Sendable, Equatable {
    /// The token is another device's, and the caller did not name that registration.
    case tokenRegisteredElsewhere
    /// The registration would change the device's user without bringing its own token.
    case userChangeNeedsDevice
}
