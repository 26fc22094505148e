import Foundation
import PushfanAPNsModel
import PushfanMessages
import PushfanStore

/// `pushfan devices repair-tokens`: finds alert tokens that were invalidated by a push of
/// another kind, and with `--apply` makes their devices active again.
///
/// Before pushes were addressed by token kind, a VoIP or Live Activity campaign went to
/// the device's alert token; APNs answered `DeviceTokenNotForTopic` (or `BadDeviceToken`)
/// and the device was invalidated for every later alert. Such an answer says nothing about
/// the alert token, so the device is restored. An answer to an alert-kind push, or a 410
/// (the app is gone from the device, whatever the topic), is left standing.
struct DevicesRepairTokensCommand: Command {
    static let spec = CommandSpec(
        name: "devices repair-tokens",
        summary: "List (and with --apply restore) alert tokens invalidated by a push of another kind",
        discussion: """
            A device is restored when it is invalid now and every token rejection recorded for
            it since its last registration came from a campaign whose push type uses another
            kind of token (voip, liveactivity, widgets...) with reason BadDeviceToken or
            DeviceTokenNotForTopic. Without --apply nothing changes.
            """,
        options: [
            .app,
            .flag("apply", "restore the devices listed (default: only list them)"),
        ] + StoreOptions.specs)

    /// One device the repair would restore, with the campaign that invalidated it.
    struct Repair: Equatable {
        let deviceID: String
        let campaign: String
        let pushType: Campaign.PushType
        let reason: String
    }

    /// The devices to restore among `invalidations` (grouped by device id, as the store
    /// returns them). A device whose evidence includes an alert-kind push, a 410, or a
    /// campaign that cannot be read stays invalid.
    static func repairs(_ invalidations: [TokenInvalidation]) -> [Repair] {
        let wrongTopicReasons: Set<String> = [APNsReason.badDeviceToken.rawValue, APNsReason.deviceTokenNotForTopic.rawValue]
        // Each campaign's record is decoded once, not once per device it touched.
        var notifications: [String: Campaign.Notification?] = [:]
        func notification(_ row: TokenInvalidation) -> Campaign.Notification? {
            if let known = notifications[row.campaign] { return known }
            let decoded = row.definition.flatMap { try? MessageCodec.decode(Campaign.self, from: Data($0.utf8)).notification }
            notifications[row.campaign] = decoded
            return decoded
        }
        var repairs: [Repair] = []
        for (deviceID, rows) in Dictionary(grouping: invalidations, by: \.deviceID).sorted(by: { $0.key < $1.key }) {
            var chosen: Repair?
            var standing = false
            for row in rows {
                guard let reason = row.ledgerReason, wrongTopicReasons.contains(reason),
                      let sent = notification(row), sent.tokenKind != .alert
                else {
                    standing = true
                    break
                }
                chosen = chosen ?? Repair(deviceID: deviceID, campaign: row.campaign, pushType: sent.pushType, reason: reason)
            }
            if !standing, let chosen { repairs.append(chosen) }
        }
        return repairs
    }

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws -> Int32 {
        let app = try arguments.required("app")
        let store = try await StoreOptions.open(arguments, context)
        guard try await store.apps.get(app) != nil else {
            printError("pushfan devices repair-tokens: no app \(app) in the store")
            return 1
        }
        let repairs = Self.repairs(try await store.devices.tokenInvalidations(app: app))
        print(["device id", "campaign", "push type", "reason"].joined(separator: "\t"))
        for repair in repairs { print([repair.deviceID, repair.campaign, repair.pushType.rawValue, repair.reason].joined(separator: "\t")) }
        guard arguments.flag("apply") else {
            print("\(repairs.count) device(s) invalidated by a push of another kind; nothing changed (--apply restores them)")
            return 0
        }
        let restored = try await store.devices.restore(app: app, deviceIDs: repairs.map(\.deviceID))
        print("\(restored) device(s) restored to active")
        return 0
    }
}
