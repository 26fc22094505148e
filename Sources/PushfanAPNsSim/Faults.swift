import Foundation

/// Response latency: none, fixed, uniform in a range, exponential with a mean, or `apns`,
/// the profile of Apple's servers as a provider in a data centre sees them (below).
/// Written `5` (ms), `5-20`, `exp:10`, `apns` or `0` (none) on the command line and in
/// control JSON.
package enum LatencyModel: Sendable, Equatable, CustomStringConvertible {
    case none
    case fixed(milliseconds: Double)
    case uniform(low: Double, high: Double)
    case exponential(mean: Double)
    /// Lognormal with a median of `APNsProfile.median` ms and a p99 of `APNsProfile.p99`,
    /// a share `APNsProfile.stallShare` of 1-3 s stalls, each connection slower or faster
    /// by its own factor (docs/apns-sim.md#latency-profile-apns).
    case apns

    /// The figures of the `apns` profile.
    package enum APNsProfile {
        package static let median = 80.0
        package static let p99 = 300.0
        /// Lognormal sigma giving that p99 (z of the 99th percentile: 2.326).
        package static let sigma = log(p99 / median) / 2.326
        package static let stallShare = 0.002
        package static let stallRange = 1_000.0...3_000.0
        /// Sigma of each connection's lognormal factor: about ±10 % between connections.
        package static let connectionSigma = 0.1
    }

    package init(spec: String) throws(SimConfigurationError) {
        let text = spec.trimmingCharacters(in: .whitespaces)
        if text == "apns" {
            self = .apns
            return
        }
        func number(_ part: Substring) throws(SimConfigurationError) -> Double {
            guard let value = Double(part.trimmingCharacters(in: .whitespaces)), value.isFinite, value >= 0, value <= 600_000 else {
                throw SimConfigurationError("latency \"\(spec)\": \"\(part)\" is not a number of milliseconds in 0...600000")
            }
            return value
        }
        if text.hasPrefix("exp:") {
            let mean = try number(text.dropFirst(4))
            self = mean == 0 ? .none : .exponential(mean: mean)
        } else if let dash = text.firstIndex(of: "-"), dash != text.startIndex {
            let low = try number(text[..<dash])
            let high = try number(text[text.index(after: dash)...])
            guard low <= high else { throw SimConfigurationError("latency \"\(spec)\": the range must go from low to high") }
            self = high == 0 ? .none : .uniform(low: low, high: high)
        } else {
            let value = try number(Substring(text))
            self = value == 0 ? .none : .fixed(milliseconds: value)
        }
    }

    package var description: String {
        switch self {
        case .none: return "0"
        case .fixed(let ms): return Self.format(ms)
        case .uniform(let low, let high): return Self.format(low) + "-" + Self.format(high)
        case .exponential(let mean): return "exp:" + Self.format(mean)
        case .apns: return "apns"
        }
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// A delay in milliseconds for a request on a connection whose own factor is
    /// `connectionFactor` (`connectionFactor(_:)`; only the `apns` profile uses it).
    package func sample(_ random: inout FastRandom, connectionFactor: Double = 1) -> Double {
        switch self {
        case .none: return 0
        case .fixed(let ms): return ms
        case .uniform(let low, let high): return low + (high - low) * random.unit()
        case .exponential(let mean): return -mean * log(1 - random.unit())
        case .apns:
            if random.unit() < APNsProfile.stallShare {
                let range = APNsProfile.stallRange
                return range.lowerBound + (range.upperBound - range.lowerBound) * random.unit()
            }
            return APNsProfile.median * connectionFactor * exp(APNsProfile.sigma * random.normal())
        }
    }

    /// A new connection's latency factor: lognormal around 1 for the `apns` profile (one
    /// route or server is slower than another), 1 for the others.
    package func connectionFactor(_ random: inout FastRandom) -> Double {
        self == .apns ? exp(APNsProfile.connectionSigma * random.normal()) : 1
    }
}

/// Everything that can be changed while the simulator runs, from flags at start and then
/// `POST /_sim/control`. Defaults: no faults, 1,000 concurrent streams, token-auth
/// connections starting at 1 stream (as APNs does), no drop to 1 after rejections.
package struct FaultSettings: Sendable, Equatable {
    /// Probability (0...1) that an otherwise acceptable request gets 500 InternalServerError.
    package var p500 = 0.0
    /// Probability of 503 ServiceUnavailable.
    package var p503 = 0.0
    /// Probability of 429 TooManyRequests.
    package var p429 = 0.0
    /// Tokens that always get 429 TooManyRequests (lowercase hex).
    package var throttledTokens: Set<String> = []
    /// Delay before each APNs response (not the `/_sim` endpoints).
    package var latency: LatencyModel = .none
    /// After this many requests on a connection, GOAWAY (NO_ERROR) with that request's stream
    /// as last-stream-id; later streams get REFUSED_STREAM. 0: never.
    package var goawayAfter = 0
    /// Fraction (0...1) of requests answered with RST_STREAM REFUSED_STREAM, unprocessed.
    package var refuseFraction = 0.0
    /// On this request of a connection, close the socket without answering it or anything
    /// else still in flight. 0: never.
    package var dropAfter = 0
    /// SETTINGS_MAX_CONCURRENT_STREAMS in normal operation.
    package var maxConcurrentStreams = 1000
    /// A token-auth connection advertises 1 stream until its first accepted request.
    package var startAtOne = true
    /// After a rejected request, advertise 1 stream until the next accepted one.
    package var dropToOneAfterRejection = false
    /// Added to the wall clock for every time rule (JWT age and the 20-minute rule, 410
    /// timestamps, log times): lets tests move time.
    package var clockOffsetSeconds = 0.0

    package init() {}

    /// Applies control JSON; members not given keep their value. Throws for unknown members
    /// and bad values, leaving `self` unchanged.
    package mutating func apply(json object: [String: Any]) throws(SimConfigurationError) {
        var next = self
        for (key, value) in object {
            switch key {
            case "p500": next.p500 = try Self.probability(value, key)
            case "p503": next.p503 = try Self.probability(value, key)
            case "p429": next.p429 = try Self.probability(value, key)
            case "refuse_fraction": next.refuseFraction = try Self.probability(value, key)
            case "throttle_tokens":
                guard let list = value as? [String] else { throw SimConfigurationError("\"throttle_tokens\" must be an array of hex tokens") }
                var tokens: Set<String> = []
                for token in list {
                    guard let normal = RequestRules.lowercaseHexToken(Array(token.utf8)) else {
                        throw SimConfigurationError("\"throttle_tokens\": \"\(token.prefix(16))\" is not a hex device token")
                    }
                    tokens.insert(normal)
                }
                next.throttledTokens = tokens
            case "latency":
                if let text = value as? String {
                    next.latency = try LatencyModel(spec: text)
                } else if let number = value as? NSNumber {
                    next.latency = try LatencyModel(spec: number.stringValue)
                } else {
                    throw SimConfigurationError("\"latency\" must be like \"5\", \"5-20\", \"exp:10\" (milliseconds) or \"apns\"")
                }
            case "goaway_after": next.goawayAfter = try Self.count(value, key, 0...Int(Int32.max))
            case "drop_after": next.dropAfter = try Self.count(value, key, 0...Int(Int32.max))
            case "max_concurrent_streams": next.maxConcurrentStreams = try Self.count(value, key, 1...Int(Int32.max))
            case "start_at_one": next.startAtOne = try Self.flag(value, key)
            case "drop_to_one_after_rejection": next.dropToOneAfterRejection = try Self.flag(value, key)
            case "clock_offset_s":
                guard let number = value as? NSNumber, number.doubleValue.isFinite else {
                    throw SimConfigurationError("\"clock_offset_s\" must be a number of seconds")
                }
                next.clockOffsetSeconds = number.doubleValue
            default:
                throw SimConfigurationError(
                    "unknown control member \"\(key)\"; known: p500, p503, p429, throttle_tokens, latency, goaway_after, "
                        + "refuse_fraction, drop_after, max_concurrent_streams, start_at_one, drop_to_one_after_rejection, clock_offset_s")
            }
        }
        self = next
    }

    /// As control JSON (what `GET /_sim/control` returns).
    package var jsonObject: [String: Any] {
        [
            "p500": p500, "p503": p503, "p429": p429, "throttle_tokens": throttledTokens.sorted(),
            "latency": latency.description, "goaway_after": goawayAfter, "refuse_fraction": refuseFraction,
            "drop_after": dropAfter, "max_concurrent_streams": maxConcurrentStreams, "start_at_one": startAtOne,
            "drop_to_one_after_rejection": dropToOneAfterRejection, "clock_offset_s": clockOffsetSeconds,
        ]
    }

    private static func probability(_ value: Any, _ key: String) throws(SimConfigurationError) -> Double {
        guard let number = value as? NSNumber, (0...1).contains(number.doubleValue) else {
            throw SimConfigurationError("\"\(key)\" must be a probability from 0 to 1")
        }
        return number.doubleValue
    }

    private static func count(_ value: Any, _ key: String, _ range: ClosedRange<Int>) throws(SimConfigurationError) -> Int {
        guard let number = value as? NSNumber, number.doubleValue == number.doubleValue.rounded(),
              range.contains(number.intValue)
        else { throw SimConfigurationError("\"\(key)\" must be a whole number in \(range.lowerBound)...\(range.upperBound)") }
        return number.intValue
    }

    private static func flag(_ value: Any, _ key: String) throws(SimConfigurationError) -> Bool {
        // JSONSerialization gives booleans as NSNumber 0/1; accept exactly those.
        guard let number = value as? NSNumber, number.intValue == 0 || number.intValue == 1, number.doubleValue == Double(number.intValue) else {
            throw SimConfigurationError("\"\(key)\" must be true or false")
        }
        return number.boolValue
    }
}

/// What faults do to one request, decided from the settings and uniform random numbers, so
/// the rule is testable with fixed draws.
package enum FaultDecision: Sendable, Equatable {
    case proceed
    case refuse
    case reject(SimRejection)

    /// `draws` are three uniform numbers in [0, 1): refuse, server error, throttle.
    package static func decide(_ settings: FaultSettings, token: String, draws: (Double, Double, Double)) -> FaultDecision {
        if settings.refuseFraction > 0, draws.0 < settings.refuseFraction { return .refuse }
        if settings.p500 > 0 || settings.p503 > 0 {
            if draws.1 < settings.p500 { return .reject(SimRejection(.internalServerError)) }
            if draws.1 < settings.p500 + settings.p503 { return .reject(SimRejection(.serviceUnavailable)) }
        }
        if !settings.throttledTokens.isEmpty, settings.throttledTokens.contains(token) { return .reject(SimRejection(.tooManyRequests)) }
        if settings.p429 > 0, draws.2 < settings.p429 { return .reject(SimRejection(.tooManyRequests)) }
        return .proceed
    }
}

/// A small, fast generator (xorshift64*) for fault draws and generated ids; one per thread.
package struct FastRandom: RandomNumberGenerator {
    private var state: UInt64

    package init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }

    package mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }

    /// Uniform in [0, 1).
    package mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// A standard normal sample (Box-Muller; one of the pair is enough here).
    package mutating func normal() -> Double {
        let u1 = 1 - unit()  // in (0, 1]: log is finite
        return (-2 * log(u1)).squareRoot() * cos(2 * .pi * unit())
    }
}
