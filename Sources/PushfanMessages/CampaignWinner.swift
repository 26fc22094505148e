import PushfanSupport

/// A/B with a winner: the variants go to a test group of `test_percent` % of the audience
/// first; `after_s` seconds later the variant with the best open (or conversion) rate is
/// picked from the counted events, the decision is written into the campaign's stored
/// record, and the rest of the audience gets the winner. The holdout stays the holdout in
/// both phases. A device's group is a function of the campaign id and the device id, like
/// its variant (docs/messages.md, "A/B with a winner").
extension Campaign {
    package struct Winner: Hashable, Sendable, Codable {
        package enum Metric: String, Codable, Sendable, CaseIterable {
            case openRate = "open_rate"
            case conversionRate = "conversion_rate"

            package init(from decoder: any Decoder) throws {
                self = try StringEnum.decode(Self.self, from: decoder, what: "metric")
            }
        }

        /// The test group's share of the audience, 1 to 99.
        package var testPercent: Int
        /// Seconds from the campaign's start to the decision.
        package var afterSeconds: Int
        package var metric: Metric

        package init(testPercent: Int, afterSeconds: Int, metric: Metric) {
            (self.testPercent, self.afterSeconds, self.metric) = (testPercent, afterSeconds, metric)
        }

        private enum CodingKeys: String, CodingKey { case testPercent = "test_percent", afterSeconds = "after_s", metric }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            testPercent = try container.field(.testPercent)
            afterSeconds = try container.field(.afterSeconds)
            metric = try container.optionalField(.metric) ?? .openRate
        }
    }

    /// What the winner's decision chose and what it saw: each variant's rate and the devices
    /// it was measured over (delivered ones).
    package struct Decision: Hashable, Sendable, Codable {
        package var variant: String
        package var metric: Winner.Metric
        package var rates: [String: Double]
        package var devices: [String: Int]
        /// When it was made, ms.
        package var at: Int64

        package init(variant: String, metric: Winner.Metric, rates: [String: Double], devices: [String: Int], at: Int64) {
            (self.variant, self.metric, self.rates, self.devices, self.at) = (variant, metric, rates, devices, at)
        }
    }

    /// Which half of a winner campaign a task sends.
    package enum Phase: String, Codable, Sendable {
        /// The test group, with the variants by their weights.
        case test
        /// Everyone else, with the decided winner.
        case rest
    }

    /// Which phase sends `device` (nil for a campaign without a winner).
    package func phase(of device: String) -> Phase? {
        guard let winner else { return nil }
        let point = Self.spread(FNV1a.hash("test\n\(id)/\(device)")) % 100
        return point < UInt64(winner.testPercent) ? .test : .rest
    }

    /// The decision from each variant's delivered devices and how many of them opened (or
    /// converted): the best rate wins, a tie goes to the variant listed first, and with
    /// nothing delivered the first variant wins.
    package func decide(delivered: [String: Int], engaged: [String: Int], at: Int64) -> Decision? {
        guard let winner else { return nil }
        var rates: [String: Double] = [:]
        var best: (id: String, rate: Double)?
        for variant in variants {
            let devices = delivered[variant.id] ?? 0
            let rate = devices > 0 ? Double(engaged[variant.id] ?? 0) / Double(devices) : 0
            rates[variant.id] = rate
            if best == nil || rate > best!.rate { best = (variant.id, rate) }
        }
        guard let best else { return nil }
        return Decision(
            variant: best.id, metric: winner.metric, rates: rates,
            devices: Dictionary(uniqueKeysWithValues: variants.map { ($0.id, delivered[$0.id] ?? 0) }), at: at)
    }

    /// The rules of `winner` and `decision`.
    func validateWinner() throws(MessageDecodingError) {
        if let winner {
            guard variants.count >= 2 else { throw .invalidField("winner", "needs at least two variants to choose from") }
            guard (1...99).contains(winner.testPercent) else {
                throw .invalidField("winner.test_percent", "must be from 1 to 99, got \(winner.testPercent)")
            }
            guard (1...7 * 86_400).contains(winner.afterSeconds) else {
                throw .invalidField("winner.after_s", "must be from 1 to 604800 (a week), got \(winner.afterSeconds)")
            }
            if options.sendAt != nil || options.localTime != nil {
                throw .invalidField("winner", "cannot be combined with options.send_at or options.local_time: the test starts when the campaign is planned")
            }
        }
        if let decision {
            guard winner != nil else { throw .invalidField("decision", "is a winner campaign's; this campaign has no winner") }
            guard variants.contains(where: { $0.id == decision.variant }) else {
                throw .invalidField("decision.variant", "must name one of the variants, got \(decision.variant.debugDescription)")
            }
        }
    }
}
