import Foundation
import PushfanAPNsSim
import PushfanMessages
import Testing

/// The simulator's decision on one request, as a pure function of the request, the
/// connection's credentials state, the faults and the device rules.
@Suite("Request judge")
struct RequestJudgeTests {
    let now: Int64 = 1_800_000_000_000
    let key = TestKey()

    /// A context over `authority`, counting the token-table lookups it is asked for.
    final class Lookups: @unchecked Sendable { var count = 0 }

    func context(
        authority: ProviderAuthority?, faults: FaultSettings = FaultSettings(), rules: DeviceRules? = nil,
        topics: Set<String>? = nil, lookups: Lookups = Lookups()
    ) -> JudgeContext {
        JudgeContext(
            authority: authority,
            verify: { authorization, authority, now in
                lookups.count += 1
                return authority.admit(authorization: authorization, now: now)
            },
            allowedTopics: { _, _ in topics }, faults: faults, deviceRules: rules)
    }

    func request(authorization: String? = nil, topic: String? = "com.example.app", token: String = RequestRulesTests.token) -> SimRequest {
        RequestRulesTests.request {
            $0.authorization = authorization
            $0.topic = topic
            $0.path = "/3/device/" + token
        }
    }

    func judge(_ request: SimRequest, _ credentials: inout ConnectionCredentials, _ context: JudgeContext) -> Judgement {
        var random = FastRandom(seed: 7)
        return RequestJudge.judge(request, credentials: &credentials, context: context, random: &random, nowMillis: now)
    }

    @Test("token auth: accepted; the same header again skips the token table; a second key on the connection is UnrelatedKeyIdInToken")
    func tokenAuth() throws {
        let other = TestKey(keyID: "KEY0000002")
        let authority = ProviderAuthority(keys: [key.registered, other.registered])
        let lookups = Lookups()
        let context = context(authority: authority, lookups: lookups)
        var credentials = ConnectionCredentials()
        let header = "bearer " + (try key.jwt(issuedAt: now / 1000 - 5))
        guard case .accepted(let checked, let token) = judge(request(authorization: header), &credentials, context) else {
            Issue.record("the first request was not accepted")
            return
        }
        #expect(token == RequestRulesTests.token && checked.bundleID == "com.example.app")
        #expect(credentials.keyIndex == 0 && lookups.count == 1)
        guard case .accepted = judge(request(authorization: header), &credentials, context) else {
            Issue.record("the second request was not accepted")
            return
        }
        #expect(lookups.count == 1, "the connection's last header is not looked up again")
        let otherHeader = "bearer " + (try other.jwt(issuedAt: now / 1000 - 5))
        #expect(judge(request(authorization: otherHeader), &credentials, context) == .rejected(SimRejection(.unrelatedKeyIdInToken)))
        #expect(judge(request(authorization: nil), &credentials, context) == .rejected(SimRejection(.missingProviderToken)))
    }

    @Test("certificate auth: no JWT, the topic defaults to the certificate's, another topic is TopicDisallowed")
    func certificateAuth() {
        let context = context(authority: ProviderAuthority(keys: [key.registered]))
        var credentials = ConnectionCredentials(certificateTopic: "com.example.app")
        guard case .accepted(let checked, _) = judge(request(topic: nil), &credentials, context) else {
            Issue.record("a request without a topic was not accepted")
            return
        }
        #expect(checked.bundleID == "com.example.app")
        #expect(judge(request(topic: "com.other.app"), &credentials, context) == .rejected(SimRejection(.topicDisallowed)))
    }

    @Test("a key's allowed topics are enforced")
    func keyTopics() throws {
        let context = context(authority: ProviderAuthority(keys: [key.registered]), topics: ["com.example.other"])
        var credentials = ConnectionCredentials()
        let header = "bearer " + (try key.jwt(issuedAt: now / 1000))
        #expect(judge(request(authorization: header), &credentials, context) == .rejected(SimRejection(.topicDisallowed)))
    }

    @Test("the order of rules: a bad path first, then credentials, then faults, then device rules")
    func order() throws {
        var faults = FaultSettings()
        faults.refuseFraction = 1
        let rules = DeviceRules(prefixes: ["abab": DeviceRules.Rule(reason: .unregistered)])
        var credentials = ConnectionCredentials()
        let authority = ProviderAuthority(keys: [key.registered])
        // A missing token beats missing credentials.
        #expect(judge(request(token: ""), &credentials, context(authority: authority)) == .rejected(SimRejection(.missingDeviceToken)))
        // Credentials beat faults.
        #expect(judge(request(), &credentials, context(authority: authority, faults: faults)) == .rejected(SimRejection(.missingProviderToken)))
        // Faults beat device rules.
        #expect(judge(request(), &credentials, context(authority: nil, faults: faults, rules: rules)) == .refused)
        // Device rules last, with the time given.
        #expect(judge(request(), &credentials, context(authority: nil, rules: rules)) == .rejected(SimRejection(.unregistered, timestampMillis: now)))
        var always503 = FaultSettings()
        always503.p503 = 1
        #expect(judge(request(), &credentials, context(authority: nil, faults: always503)) == .rejected(SimRejection(.serviceUnavailable)))
    }
}
