/// What a connection knows of its client's credentials between requests.
package struct ConnectionCredentials: Sendable {
    /// Certificate auth: the verified client certificate's topic (bundle id).
    package var certificateTopic: String?
    /// APNs: one signing key per connection, fixed by its first authenticated push.
    package var keyIndex: Int?
    /// The last authorization header verified on this connection (clients send the same
    /// token for long stretches), so most requests skip even the token table.
    package var lastAuthorization: String?
    package var lastVerified = VerifiedToken(keyIndex: -1, issuedAt: 0)
    /// The 20-minute rule on this connection (when the authority's scope is `.connection`).
    package var tokenClock = ConnectionTokenClock()

    package init(certificateTopic: String? = nil) {
        self.certificateTopic = certificateTopic
    }
}

/// What one request's judgement reads beyond the request and its connection: the
/// credentials rules, fault settings and device rules in force.
package struct JudgeContext {
    /// Token auth's keys; nil when the simulator checks no provider tokens.
    package var authority: ProviderAuthority?
    /// Verifies an authorization header (the loop's token table).
    package var verify: (_ authorization: String?, _ authority: ProviderAuthority, _ nowSeconds: Int64) -> Result<VerifiedToken, SimRejection>
    /// The bundle ids a key may push to (nil: any).
    package var allowedTopics: (_ keyIndex: Int, _ authority: ProviderAuthority) -> Set<String>?
    package var faults: FaultSettings
    package var deviceRules: DeviceRules?
    /// The broadcast channels that management requests change and broadcasts address.
    package var channels: SimChannels

    package init(
        authority: ProviderAuthority?,
        verify: @escaping (String?, ProviderAuthority, Int64) -> Result<VerifiedToken, SimRejection>,
        allowedTopics: @escaping (Int, ProviderAuthority) -> Set<String>?,
        faults: FaultSettings, deviceRules: DeviceRules?, channels: SimChannels = SimChannels()
    ) {
        self.authority = authority
        self.verify = verify
        self.allowedTopics = allowedTopics
        self.faults = faults
        self.deviceRules = deviceRules
        self.channels = channels
    }
}

/// The decision on one request.
package enum Judgement: Equatable {
    case accepted(CheckedRequest, token: String)
    case rejected(SimRejection)
    /// RST_STREAM REFUSED_STREAM: not processed.
    case refused
    /// A channel management request, done.
    case answered(ChannelRules.Answer)
}

/// APNs' rules for one request, in `RequestRules`' order, with credentials, faults and device
/// rules: a decision, and nothing else. The connection records stats, writes the log and
/// answers; this only reads its inputs and updates the connection's credentials state.
package enum RequestJudge {
    package static func judge(
        _ received: SimRequest, credentials: inout ConnectionCredentials, context: JudgeContext, random: inout FastRandom, nowMillis: Int64
    ) -> Judgement {
        if let path = received.path, let target = ChannelRules.target(of: path) {
            return judgeChannel(received, target, credentials: &credentials, context: context, random: &random, nowMillis: nowMillis)
        }
        var request = received
        let token: String
        switch RequestRules.checkTarget(request) {
        case .failure(let rejection): return .rejected(rejection)
        case .success(let value): token = value
        }
        let allowedTopics: Set<String>?
        switch authenticate(&request, credentials: &credentials, context: context, nowMillis: nowMillis) {
        case .failure(let rejection): return .rejected(rejection)
        case .success(let topics): allowedTopics = topics
        }
        let checked: CheckedRequest
        switch RequestRules.checkHeadersAndPayload(request, token: token) {
        case .failure(let rejection): return .rejected(rejection)
        case .success(let value): checked = value
        }
        if let allowedTopics, !allowedTopics.contains(checked.bundleID) { return .rejected(SimRejection(.topicDisallowed)) }
        switch FaultDecision.decide(context.faults, token: token, draws: (random.unit(), random.unit(), random.unit())) {
        case .refuse: return .refused
        case .reject(let rejection): return .rejected(rejection)
        case .proceed: break
        }
        if let rejection = context.deviceRules?.outcome(token: token, bundleID: checked.bundleID, nowMillis: nowMillis) { return .rejected(rejection) }
        return .accepted(checked, token: token)
    }

    /// A channel management request or a broadcast: the same credentials as a push, the
    /// bundle id taken from the path; a broadcast meets the same random faults.
    private static func judgeChannel(
        _ received: SimRequest, _ target: Result<ChannelRules.Target, SimRejection>, credentials: inout ConnectionCredentials,
        context: JudgeContext, random: inout FastRandom, nowMillis: Int64
    ) -> Judgement {
        let found: ChannelRules.Target
        switch target {
        case .failure(let rejection): return .rejected(rejection)
        case .success(let value): found = value
        }
        var request = received
        let allowedTopics: Set<String>?
        switch authenticate(&request, credentials: &credentials, context: context, nowMillis: nowMillis) {
        case .failure(let rejection): return .rejected(rejection)
        case .success(let topics): allowedTopics = topics
        }
        let bundle: String
        switch found {
        case .channels(let id), .allChannels(let id), .broadcast(let id): bundle = id
        }
        if let allowedTopics, !allowedTopics.contains(bundle) { return .rejected(SimRejection(.topicDisallowed)) }
        guard case .broadcast = found else {
            switch ChannelRules.manage(request, found, channels: context.channels, random: &random) {
            case .failure(let rejection): return .rejected(rejection)
            case .success(let answer): return .answered(answer)
            }
        }
        // Certificate auth filled in the topic; a broadcast names its bundle in the path.
        if credentials.certificateTopic != nil { request.topic = received.topic }
        switch ChannelRules.checkBroadcast(request, bundle: bundle, channels: context.channels) {
        case .failure(let rejection): return .rejected(rejection)
        case .success(let checked):
            switch FaultDecision.decide(context.faults, token: checked.token, draws: (random.unit(), random.unit(), random.unit())) {
            case .refuse: return .refused
            case .reject(let rejection): return .rejected(rejection)
            case .proceed: return .accepted(checked, token: checked.token)
            }
        }
    }

    /// The credentials rules: a client certificate's topic, or the provider token (its
    /// key, age and the 20-minute rule). Returns the bundle ids the credentials may push to
    /// (nil: any).
    private static func authenticate(
        _ request: inout SimRequest, credentials: inout ConnectionCredentials, context: JudgeContext, nowMillis: Int64
    ) -> Result<Set<String>?, SimRejection> {
        var allowedTopics: Set<String>?
        let now = nowMillis / 1000
        if let certificateTopic = credentials.certificateTopic {
            // Certificate auth: no JWT; the topic defaults to the certificate's.
            allowedTopics = [certificateTopic]
            if request.topic == nil { request.topic = certificateTopic }
        } else if let authority = context.authority {
            let verified: VerifiedToken
            if let authorization = request.authorization, authorization == credentials.lastAuthorization {
                if let expired = ProviderAuthority.checkAge(credentials.lastVerified, now: now) { return .failure(expired) }
                verified = credentials.lastVerified
            } else {
                switch context.verify(request.authorization, authority, now) {
                case .failure(let rejection): return .failure(rejection)
                case .success(let value): verified = value
                }
                if let first = credentials.keyIndex, first != verified.keyIndex { return .failure(SimRejection(.unrelatedKeyIdInToken)) }
                if authority.updateScope == .connection, let tooSoon = credentials.tokenClock.use(verified, now: now) { return .failure(tooSoon) }
                credentials.lastAuthorization = request.authorization
                credentials.lastVerified = verified
            }
            credentials.keyIndex = verified.keyIndex
            allowedTopics = context.allowedTopics(verified.keyIndex, authority)
        }
        return .success(allowedTopics)
    }
}
