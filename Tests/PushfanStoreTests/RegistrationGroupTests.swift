import Foundation
import PushfanMessages
@testable import PushfanStore
import PushfanSupport
import PushfanTestSupport
import Testing

/// Registrations committed together (`GroupCommit`) and secrets answered from the
/// last second's read (`RecentSecrets`), on both backends.
@Suite(.timeLimit(.minutes(5)))
struct RegistrationGroupTests {
    @Test(arguments: Backend.enabled)
    func concurrentRegistrationsAreEachAnsweredAsIfAlone(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        // 300 at once: more than one group (128 at most), every answer its own.
        let results = try await withThrowingTaskGroup(of: (Int, RegistrationResult).self) { group in
            for index in 0..<300 {
                group.addTask { (index, try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "d\(index)", token: Synthetic.token(index)))) }
            }
            return try await group.reduce(into: [Int: RegistrationResult]()) { $0[$1.0] = $1.1 }
        }
        #expect(results.count == 300 && results.values.allSatisfy(\.created))
        #expect(Set(results.values.map(\.rowKey)).count == 300)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 300)
    }

    @Test(arguments: Backend.enabled)
    func oneFailingRegistrationDoesNotFailItsGroup(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let outcomes = await withTaskGroup(of: (String, Result<RegistrationResult, StoreError>).self) { group in
            for index in 0..<40 {
                // Every tenth call names an app that does not exist.
                let app = index % 10 == 3 ? "no-such-app" : "shop-ios"
                group.addTask {
                    do throws(StoreError) {
                        return (app, .success(try await store.devices.register(app: app, DeviceRegistration(deviceID: "d\(index)", token: Synthetic.token(index)))))
                    } catch { return (app, .failure(error)) }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let failures = outcomes.filter { if case .failure = $0.1 { true } else { false } }
        #expect(failures.count == 4 && failures.allSatisfy { $0.0 == "no-such-app" })
        for (_, outcome) in failures {
            #expect(throws: StoreError.notFound("unknown app 'no-such-app'; add it with `pushfan apps add`")) { try outcome.get() }
        }
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 36)
    }

    @Test(arguments: Backend.enabled)
    func theSameDeviceTwiceAtOnceEndsAsOneRowCreatedOnce(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        let results = try await withThrowingTaskGroup(of: RegistrationResult.self) { group in
            for index in 0..<2 {
                group.addTask { try await store.devices.register(app: "shop-ios", DeviceRegistration(deviceID: "phone", token: Synthetic.token(index))) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter(\.created).count == 1)
        #expect(Set(results.map(\.rowKey)).count == 1)
        let device = try #require(try await store.devices.get(app: "shop-ios", deviceID: "phone"))
        #expect([Synthetic.token(0), Synthetic.token(1)].contains(device.token))
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 1)
    }

    @Test("an application claim is checked where the registration is written: a token held elsewhere moves only to the named previous device, a user changes only with the device's own token, and of many devices claiming one token at once exactly one gets it", arguments: Backend.enabled)
    func applicationClaimsAreCheckedInTheWritingTransaction(_ backend: Backend) async throws {
        let store = try await backend.openFresh()
        try await store.addTestApp()
        func register(_ device: String, _ token: Int, user: String? = nil, previous: String? = nil) async throws -> Result<RegistrationResult, RegistrationRefusal> {
            var registration = DeviceRegistration(deviceID: device, token: Synthetic.token(token))
            if let user { registration.attributes[Users.attribute] = .string(user) }
            let validated = try Validation.device(registration, now: store.clock.wallMillis)
            return try await store.devices.register(app: "shop-ios", validated: validated, claim: ApplicationClaim(previousDeviceID: previous))
        }
        #expect(try await register("phone", 1, user: "ann").get().created)
        // Another device id with phone's token: refused, and nothing was written.
        #expect(try await register("thief", 1) == .failure(.tokenRegisteredElsewhere))
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "thief") == nil)
        #expect(try await register("reinstall", 1, user: "ann", previous: "some-other-device") == .failure(.tokenRegisteredElsewhere))
        // Naming the registration it moves from is the proof.
        #expect(try await register("reinstall", 1, user: "ann", previous: "phone").get().tokenMovedFrom == ["phone"])
        // Changing the user needs the device's own token, dropping the user as well.
        #expect(try await register("reinstall", 2, user: "bob") == .failure(.userChangeNeedsDevice))
        #expect(try await register("reinstall", 2) == .failure(.userChangeNeedsDevice))
        #expect(try await store.devices.get(app: "shop-ios", deviceID: "reinstall")?.token == Synthetic.token(1))
        #expect(try await register("reinstall", 1, user: "bob").get().created == false)
        // A user_id stored before it had to be text is matched as JSON: 5 is not "5".
        _ = try await store.devices.executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE devices SET attributes = \(#"{"user_id":5}"#) WHERE app = 'shop-ios' AND device_id = 'reinstall'")
        }
        #expect(try await register("reinstall", 2, user: "5") == .failure(.userChangeNeedsDevice))
        #expect(try await register("reinstall", 2) == .failure(.userChangeNeedsDevice))
        // Eight new devices claim one new token in one group: the first written holds it,
        // and each later one sees that write before its own.
        let outcomes = try await withThrowingTaskGroup(of: Result<RegistrationResult, RegistrationRefusal>.self) { group in
            for index in 0..<8 { group.addTask { try await register("racer-\(index)", 9) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { (try? $0.get()) != nil }.count == 1)
        #expect(outcomes.filter { $0 == .failure(.tokenRegisteredElsewhere) }.count == 7)
        #expect(try await store.audience.count(app: "shop-ios", segment: nil, now: store.clock.wallMillis) == 2)
    }

    @Test(arguments: Backend.enabled)
    func secretsRotatedElsewhereCountAtOnceAndOldOnesStopWithinASecond(_ backend: Backend) async throws {
        let url = try backend.freshDatabase()
        // Two processes on one clock the test moves: the API's read ages without waiting.
        let clock = ManualClock()
        let api = try await DeviceStore.open(url, logger: quietLogger, clock: clock)
        let admin = try await DeviceStore.open(url, logger: quietLogger, clock: clock)
        let secrets = try await api.apps.add(AppRegistration(app: "news", topic: "com.example.news", credentials: .certificate(certificateFile: "/c.pem", keyFile: nil)))
        #expect(try await api.apps.authenticate(app: "news", secret: secrets.master, now: api.clock.wallMillis) == .master)
        // Another process rotates with no grace: this one may answer from its last read for
        // up to a second (documented), no longer.
        let rotated = try await admin.apps.rotate(app: "news", .master, grace: .zero, now: admin.clock.wallMillis)
        clock.advance(by: RecentSecrets.lifetime - .milliseconds(1))
        #expect(try await api.apps.authenticate(app: "news", secret: secrets.master, now: api.clock.wallMillis) == .master, "the last read counts for its lifetime")
        clock.advance(by: .milliseconds(1))
        #expect(try await api.apps.authenticate(app: "news", secret: secrets.master, now: api.clock.wallMillis) == nil)
        #expect(try await api.apps.authenticate(app: "news", secret: rotated, now: api.clock.wallMillis) == .master)
        // A new secret is never refused for a stale read: it does not match, so it is read again.
        let second = try await admin.apps.rotate(app: "news", .master, grace: .zero, now: admin.clock.wallMillis)
        #expect(try await api.apps.authenticate(app: "news", secret: second, now: api.clock.wallMillis) == .master)
        // A rotation in this process forgets what it read: no second of grace at all.
        #expect(try await api.apps.authenticate(app: "news", secret: secrets.application, now: api.clock.wallMillis) == .application)
        let rotatedHere = try await api.apps.rotate(app: "news", .application, grace: .zero, now: api.clock.wallMillis)
        #expect(try await api.apps.authenticate(app: "news", secret: secrets.application, now: api.clock.wallMillis) == nil)
        #expect(try await api.apps.authenticate(app: "news", secret: rotatedHere, now: api.clock.wallMillis) == .application)
    }
}
