import PushfanCrypto
import PushfanMessages
import PushfanSupport

/// An app's secret hashes as stored: each secret, and the predecessor a rotation left with
/// the moment it stops counting.
struct StoredSecrets: Sendable {
    let master: SecretHash
    let previousMaster: SecretHash
    let previousMasterUntil: Int64
    let application: SecretHash
    let previousApplication: SecretHash
    let previousApplicationUntil: Int64

    static let nobody = SecretHash(secret: SecretHash.generateSecret())
    /// What an unknown app is compared against, so that it costs what a known one does.
    static let unknownApp = StoredSecrets(
        master: nobody, previousMaster: nobody, previousMasterUntil: 0, application: nobody, previousApplication: nobody, previousApplicationUntil: 0)

    /// Which secret `secret` is at `now`. All four hashes are compared, whatever matches.
    func role(of secret: String, now: Int64) -> AppRole? {
        let master = [master.matches(secret), previousMaster.matches(secret) && previousMasterUntil > now]
        let application = [application.matches(secret), previousApplication.matches(secret) && previousApplicationUntil > now]
        return master.contains(true) ? .master : application.contains(true) ? .application : nil
    }
}

/// Secret hashes read in the last second, per app, so that a busy API does not read the
/// apps table on every request. Only a match is answered from them: a secret that does
/// not match is checked against a fresh read, so a new secret works at once; a rotation in
/// this process forgets the app, and one made elsewhere reaches this process within
/// `lifetime`. Grace periods are judged at the time of each call, never cached.
enum RecentSecrets {
    static let lifetime = Duration.seconds(1)

    static func make(clock: any ServiceClock) -> RecentReads<StoredSecrets> { RecentReads(clock: clock) { _ in lifetime } }
}
