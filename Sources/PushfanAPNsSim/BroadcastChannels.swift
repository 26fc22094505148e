import Foundation
import PushfanAPNsModel
import PushfanSupport

/// The simulator's broadcast channels (iOS 18), per bundle id, shared by every loop: what
/// channel management requests create, read, list and delete, and what broadcasts are
/// checked against. A deleted id is never made again (APNs does not reuse them either).
package final class SimChannels: Sendable {
    private let channels = Locked<[String: [String: BroadcastChannel.StoragePolicy]]>([:])

    package init() {}

    /// A new channel of `bundle`, or CannotCreateChannelConfig at Apple's limit per app.
    func create(bundle: String, policy: BroadcastChannel.StoragePolicy, random: inout FastRandom) -> Result<String, SimRejection> {
        var bytes: [UInt8] = []
        for _ in 0..<2 { withUnsafeBytes(of: random.next()) { bytes.append(contentsOf: $0) } }
        let id = Data(bytes).base64EncodedString()
        return channels.withLock { all in
            guard all[bundle, default: [:]].count < BroadcastChannel.maxPerApp else {
                return .failure(SimRejection(.cannotCreateChannelConfig))
            }
            all[bundle, default: [:]][id] = policy
            return .success(id)
        }
    }

    package func policy(bundle: String, id: String) -> BroadcastChannel.StoragePolicy? {
        channels.withLock { $0[bundle]?[id] }
    }

    package func list(bundle: String) -> [String] {
        channels.withLock { ($0[bundle] ?? [:]).keys.sorted() }
    }

    func delete(bundle: String, id: String) -> Bool {
        channels.withLock { $0[bundle]?.removeValue(forKey: id) != nil }
    }

    /// Live channels over all bundle ids.
    package var count: Int { channels.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}

/// APNs' rules for channel management and broadcast requests, pure but for the channel
/// table they read and change (Apple's "Sending channel management requests to APNs" and
/// "Sending broadcast push notification requests to APNs"; docs/apns-sim.md):
///
/// - management, `/1/apps/<bundle>/channels`: POST creates (body
///   `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`, 201 with
///   `apns-channel-id`), GET reads and DELETE deletes the channel `apns-channel-id` names
///   (200 with the body above, 204); `/1/apps/<bundle>/all-channels` GET lists
///   (`{"channels": […]}`). A missing channel id is 400 MissingChannelId, one that is not
///   base64 400 BadChannelId, an unknown one 400 ChannelNotRegistered; a bad body 400
///   BadRequestPayload; another method 405 MethodNotAllowed.
/// - broadcast, POST `/4/broadcasts/apps/<bundle>`: `apns-channel-id` as above; no topic
///   header with a push type's suffix (TopicDisallowed); `apns-push-type` liveactivity
///   (MissingPushType, InvalidPushType); `apns-priority` 10, 5 or 1 and
///   `apns-expiration` given (BadPriority, BadExpirationDate), 0 on a channel that stores
///   no message; a payload of at most 5,120 bytes whose `aps` updates or ends an activity
///   with a `timestamp` (PayloadEmpty, PayloadTooLarge, BadRequestPayload: a broadcast
///   cannot start one).
package enum ChannelRules {
    package enum Target: Equatable {
        case channels(bundle: String)
        case allChannels(bundle: String)
        case broadcast(bundle: String)
    }

    /// What a management request gets back.
    package struct Answer: Equatable {
        package var status: Int
        package var channelID: String?
        package var body: [UInt8]?
    }

    /// The channel request `path` makes, nil for any other path (a device push, the
    /// simulator's own endpoints); a malformed channel path is BadPath.
    package static func target(of path: String) -> Result<Target, SimRejection>? {
        // Device pushes (`/3/…`), nearly every request, leave at the first bytes.
        let version = path.utf8.dropFirst().first
        guard version == UInt8(ascii: "1") || version == UInt8(ascii: "4") else { return nil }
        func bundle(_ rest: Substring) -> String? {
            rest.isEmpty || rest.contains("/") ? nil : String(rest)
        }
        if path.hasPrefix("/4/broadcasts/apps/") {
            guard let id = bundle(path.dropFirst("/4/broadcasts/apps/".count)) else { return .failure(SimRejection(.badPath)) }
            return .success(.broadcast(bundle: id))
        }
        guard path.hasPrefix("/1/apps/") else { return nil }
        let rest = path.dropFirst("/1/apps/".count)
        guard let slash = rest.firstIndex(of: "/"), let id = bundle(rest[..<slash]) else { return .failure(SimRejection(.badPath)) }
        switch rest[rest.index(after: slash)...] {
        case "channels": return .success(.channels(bundle: id))
        case "all-channels": return .success(.allChannels(bundle: id))
        default: return .failure(SimRejection(.badPath))
        }
    }

    /// A management request that passed the credentials check.
    static func manage(_ request: SimRequest, _ target: Target, channels: SimChannels, random: inout FastRandom) -> Result<Answer, SimRejection> {
        if request.duplicateHeader != nil { return .failure(SimRejection(.duplicateHeaders)) }
        switch (target, request.method ?? "") {
        case (.allChannels(let bundle), "GET"):
            return .success(Answer(status: 200, body: json(["channels": channels.list(bundle: bundle)])))
        case (.channels(let bundle), "POST"):
            guard let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
                  let number = object["message-storage-policy"] as? Int, let policy = BroadcastChannel.StoragePolicy(rawValue: number),
                  (object["push-type"] as? String)?.lowercased() == "liveactivity", object.count == 2
            else { return .failure(SimRejection(.badRequestPayload)) }
            return channels.create(bundle: bundle, policy: policy, random: &random).map { Answer(status: 201, channelID: $0) }
        case (.channels(let bundle), "GET"):
            return existing(request, bundle: bundle, channels: channels).map { _, policy in
                Answer(status: 200, body: json(["message-storage-policy": policy.rawValue, "push-type": "LiveActivity"]))
            }
        case (.channels(let bundle), "DELETE"):
            return existing(request, bundle: bundle, channels: channels).map { id, _ in
                _ = channels.delete(bundle: bundle, id: id)
                return Answer(status: 204)
            }
        default:
            return .failure(SimRejection(.methodNotAllowed))
        }
    }

    /// The channel `apns-channel-id` names, with its policy.
    private static func existing(
        _ request: SimRequest, bundle: String, channels: SimChannels
    ) -> Result<(String, BroadcastChannel.StoragePolicy), SimRejection> {
        guard let id = request.channelID, !id.isEmpty else { return .failure(SimRejection(.missingChannelId)) }
        guard BroadcastChannel.problem(withID: id) == nil else { return .failure(SimRejection(.badChannelId)) }
        guard let policy = channels.policy(bundle: bundle, id: id) else { return .failure(SimRejection(.channelNotRegistered)) }
        return .success((id, policy))
    }

    /// A broadcast that passed the credentials check: the request as the loop records it
    /// (its `token` is the channel id).
    static func checkBroadcast(_ request: SimRequest, bundle: String, channels: SimChannels) -> Result<CheckedRequest, SimRejection> {
        guard request.method == "POST" else { return .failure(SimRejection(.methodNotAllowed)) }
        if request.duplicateHeader != nil { return .failure(SimRejection(.duplicateHeaders)) }
        let id: String
        let policy: BroadcastChannel.StoragePolicy
        switch existing(request, bundle: bundle, channels: channels) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let found): (id, policy) = found
        }
        if let topic = request.topic, topic != bundle { return .failure(SimRejection(.topicDisallowed)) }
        guard let pushType = request.pushType else { return .failure(SimRejection(.missingPushType)) }
        guard pushType.lowercased() == "liveactivity" else { return .failure(SimRejection(.invalidPushType)) }
        guard let priority = request.priority.flatMap(Int.init), [10, 5, 1].contains(priority) else { return .failure(SimRejection(.badPriority)) }
        guard let expiration = request.expiration, let seconds = Int64(expiration), seconds >= 0,
              policy == .mostRecentMessageStored || seconds == 0
        else { return .failure(SimRejection(.badExpirationDate)) }
        if let apnsID = request.apnsID, !RequestRules.isUUID(apnsID) { return .failure(SimRejection(.badMessageId)) }
        if request.bodyBytes == 0 { return .failure(SimRejection(.payloadEmpty)) }
        if request.bodyBytes > BroadcastChannel.maxPayloadBytes { return .failure(SimRejection(.payloadTooLarge)) }
        guard let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
              let aps = object["aps"] as? [String: Any], let event = aps["event"] as? String, ["update", "end"].contains(event),
              aps["timestamp"] is NSNumber
        else { return .failure(SimRejection(.badRequestPayload)) }
        return .success(CheckedRequest(
            token: id, topic: bundle, bundleID: bundle, pushType: .liveactivity, priority: priority, collapseID: nil,
            apnsID: request.apnsID?.lowercased()))
    }

    static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8))
    }
}
