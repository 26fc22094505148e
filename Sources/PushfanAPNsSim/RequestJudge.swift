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

    package init(
        authority: ProviderAuthority?,
        verify: @escaping (String?, ProviderAuthority, Int64) -> Result<VerifiedToken, SimRejection>,
        allowedTopics: @escaping (Int, ProviderAuthority) -> Set<String>?,
        faults: FaultSettings, deviceRules: DeviceRules?
    ) {
        self.authority = authority
        self.verify = verify
        self.allowedTopics = allowedTopics
        self.faults = faults
        self.deviceRules = deviceRules
    }
}

/// The decision on one request.
package enum Judgement: Equatable {
    case accepted(CheckedRequest, token: String)
    case rejected(SimRejection)
    /// RST_STREAM REFUSED_STREAM: not processed.
    case refused
}

/// APNs' rules for one request, in `RequestRules`' order, with credentials, faults and device
/// rules: a decision, and nothing else. The connection records stats, writes the log and
/// answers; this only reads its inputs and updates the connection's credentials state.
package enum RequestJudge {
    package static func judge(
        _ received: SimRequest, credentials: inout ConnectionCredentials, context: JudgeContext, random: inout FastRandom, nowMillis: Int64
    ) -> Judgement {
        var request = received
        let token: String
        switch RequestRules.checkTarget(request) {
        case .failure(let rejection): return .rejected(rejection)
        case .success(let value): token = value
        }
        var allowedTopics: Set<String>?
        let now = nowMillis / 1000
        if let certificateTopic = credentials.certificateTopic {
            // Certificate auth: no JWT; the topic defaults to the certificate's.
            allowedTopics = [certificateTopic]
            if request.topic == nil { request.topic = certificateTopic }
        } else if let authority = context.authority {
            let verified: VerifiedToken
            if let authorization = request.authorization, authorization == credentials.lastAuthorization {
                if let expired = ProviderAuthority.checkAge(credentials.lastVerified, now: now) { return .rejected(expired) }
                verified = credentials.lastVerified
            } else {
                switch context.verify(request.authorization, authority, now) {
                case .failure(let rejection): return .rejected(rejection)
                case .success(let value): verified = value
                }
                if let first = credentials.keyIndex, first != verified.keyIndex { return .rejected(SimRejection(.unrelatedKeyIdInToken)) }
                if authority.updateScope == .connection, let tooSoon = credentials.tokenClock.use(verified, now: now) { return .rejected(tooSoon) }
                credentials.lastAuthorization = request.authorization
                credentials.lastVerified = verified
            }
            credentials.keyIndex = verified.keyIndex
            allowedTopics = context.allowedTopics(verified.keyIndex, authority)
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
}
