import Foundation
import PushfanAPNsModel

/// Counters of one event-loop thread. Each thread updates its own (behind an uncontended
/// lock); `GET /_sim/stats` merges all of them.
package struct ThreadStats: Sendable {
    package var requests = 0
    /// Counts per status code 0...599, an array so the per-request update hashes nothing.
    package var statusCounts = [Int](repeating: 0, count: 600)
    package var reasons: [String: Int] = [:]
    /// Accepted notifications per topic (as sent) and per push type (by case index).
    package var topics: [String: Int] = [:]
    package var pushTypeCounts = [Int](repeating: 0, count: APNsPushType.allCases.count)
    /// Tokens with at least one accepted notification.
    package var acceptedTokens: Set<String> = []
    /// Acceptances per (token, collapse id), for requests with a collapse id.
    package var collapseAcceptances: [String: Int] = [:]
    package var refusedStreams = 0
    package var goawaysSent = 0
    package var droppedConnections = 0
    package var connectionsAccepted = 0
    package var connectionsClosed = 0
    /// Most streams one connection of this thread has had open at once.
    package var peakStreams = 0
    /// Accepted broadcasts per channel id.
    package var broadcasts: [String: Int] = [:]
    /// Channel management requests per method (`POST`, `GET`, `DELETE`), answered or not.
    package var channelRequests: [String: Int] = [:]

    package init() {}

    package var statuses: [Int: Int] {
        Dictionary(uniqueKeysWithValues: statusCounts.enumerated().filter { $0.element > 0 }.map { ($0.offset, $0.element) })
    }

    package var pushTypes: [String: Int] {
        Dictionary(uniqueKeysWithValues: zip(APNsPushType.allCases, pushTypeCounts).filter { $0.1 > 0 }.map { ($0.0.rawValue, $0.1) })
    }

    package mutating func recordAccepted(token: String, topic: String, pushType: APNsPushType, collapseID: String?) {
        requests += 1
        statusCounts[200] += 1
        topics[topic, default: 0] += 1
        pushTypeCounts[ThreadStats.pushTypeIndex[pushType] ?? 0] += 1
        acceptedTokens.insert(token)
        if let collapseID { collapseAcceptances[token + " " + collapseID, default: 0] += 1 }
    }

    /// One broadcast accepted: one request, whatever the channel's subscribers.
    package mutating func recordBroadcast(channel: String, topic: String) {
        requests += 1
        statusCounts[200] += 1
        topics[topic, default: 0] += 1
        pushTypeCounts[ThreadStats.pushTypeIndex[.liveactivity] ?? 0] += 1
        broadcasts[channel, default: 0] += 1
    }

    package mutating func recordChannelRequest(method: String, status: Int) {
        requests += 1
        statusCounts[min(max(status, 0), 599)] += 1
        channelRequests[method, default: 0] += 1
    }

    private static let pushTypeIndex: [APNsPushType: Int] =
        Dictionary(uniqueKeysWithValues: APNsPushType.allCases.enumerated().map { ($0.element, $0.offset) })

    package mutating func recordRejected(_ rejection: SimRejection) {
        requests += 1
        statusCounts[min(max(rejection.status, 0), 599)] += 1
        reasons[rejection.reason.rawValue, default: 0] += 1
    }

    package mutating func recordRefused() {
        requests += 1
        refusedStreams += 1
    }
}

/// The merged view, as `GET /_sim/stats` returns it.
package struct SimStatsSnapshot: Sendable, Equatable {
    package var requests = 0
    package var accepted = 0
    package var statuses: [Int: Int] = [:]
    package var reasons: [String: Int] = [:]
    package var topics: [String: Int] = [:]
    package var pushTypes: [String: Int] = [:]
    package var distinctTokensAccepted = 0
    /// Acceptances beyond the first of the same (token, collapse id).
    package var duplicateAcceptances = 0
    package var jwtChanges: [String: Int] = [:]
    package var refusedStreams = 0
    package var goawaysSent = 0
    package var droppedConnections = 0
    package var connectionsAccepted = 0
    package var connectionsOpen = 0
    /// Most streams any one connection has had open at once.
    package var peakStreams = 0
    /// Accepted broadcasts per channel id, and channel management requests per method.
    package var broadcasts: [String: Int] = [:]
    package var channelRequests: [String: Int] = [:]
    /// Channels that exist now.
    package var channels = 0

    package init() {}

    package init(merging threads: [ThreadStats], jwtChanges: [String: Int]) {
        var tokens: Set<String> = []
        var collapse: [String: Int] = [:]
        for stats in threads {
            requests += stats.requests
            statuses.merge(stats.statuses, uniquingKeysWith: +)
            reasons.merge(stats.reasons, uniquingKeysWith: +)
            topics.merge(stats.topics, uniquingKeysWith: +)
            pushTypes.merge(stats.pushTypes, uniquingKeysWith: +)
            tokens.formUnion(stats.acceptedTokens)
            collapse.merge(stats.collapseAcceptances, uniquingKeysWith: +)
            refusedStreams += stats.refusedStreams
            goawaysSent += stats.goawaysSent
            droppedConnections += stats.droppedConnections
            connectionsAccepted += stats.connectionsAccepted
            connectionsOpen += stats.connectionsAccepted - stats.connectionsClosed
            peakStreams = max(peakStreams, stats.peakStreams)
            broadcasts.merge(stats.broadcasts, uniquingKeysWith: +)
            channelRequests.merge(stats.channelRequests, uniquingKeysWith: +)
        }
        accepted = statuses[200] ?? 0
        distinctTokensAccepted = tokens.count
        duplicateAcceptances = collapse.values.reduce(0) { $0 + max(0, $1 - 1) }
        self.jwtChanges = jwtChanges
    }

    package var jsonObject: [String: Any] {
        [
            "requests": requests,
            "accepted": accepted,
            "status": Dictionary(uniqueKeysWithValues: statuses.map { (String($0.key), $0.value) }),
            "reason": reasons,
            "topic": topics,
            "push_type": pushTypes,
            "distinct_tokens_accepted": distinctTokensAccepted,
            "duplicate_acceptances": duplicateAcceptances,
            "jwt_changes": jwtChanges,
            "refused_streams": refusedStreams,
            "goaways_sent": goawaysSent,
            "dropped_connections": droppedConnections,
            "connections_accepted": connectionsAccepted,
            "connections_open": connectionsOpen,
            "peak_streams": peakStreams,
            "broadcasts": broadcasts,
            "channel_requests": channelRequests,
            "channels": channels,
        ]
    }

    package var jsonBytes: [UInt8] {
        let data = (try? JSONSerialization.data(withJSONObject: jsonObject, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Array(data)
    }
}
