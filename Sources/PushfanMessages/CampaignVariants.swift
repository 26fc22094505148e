import PushfanSupport

/// A/B variants: a campaign may split its audience among up to `maxVariants` variants, each
/// overriding the notification's content, `aps` keys or data, plus a holdout that receives
/// nothing. A device's share is a function of the campaign id and the device id only, so it
/// is the same on every worker, retry and re-plan.
extension Campaign {
    package static let maxVariants = 8
    /// Largest weight of one variant or the holdout.
    package static let maxVariantWeight = 10_000

    /// One variant: its id (in device results), its weight, and what it changes.
    package struct Variant: Hashable, Sendable, Codable {
        package var id: String
        package var weight: Int
        /// Replaces the notification's texts, when given.
        package var content: Content?
        /// Keys set over the notification's `aps` (a key given here replaces the base one).
        package var aps: [String: JSONValue]?
        /// Keys set over the notification's custom data.
        package var data: [String: JSONValue]?

        package init(id: String, weight: Int, content: Content? = nil, aps: [String: JSONValue]? = nil, data: [String: JSONValue]? = nil) {
            (self.id, self.weight, self.content, self.aps, self.data) = (id, weight, content, aps, data)
        }

        private enum CodingKeys: String, CodingKey { case id, weight, content, aps, data }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.field(.id)
            weight = try container.field(.weight)
            content = try container.optionalField(.content)
            aps = try container.optionalField(.aps)
            data = try container.optionalField(.data)
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(weight, forKey: .weight)
            try container.encodeIfPresent(content, forKey: .content)
            try container.encodeIfPresent(aps, forKey: .aps)
            try container.encodeIfPresent(data, forKey: .data)
        }
    }

    /// What a device gets.
    package enum Share: Hashable, Sendable {
        /// The notification as given (a campaign without variants).
        case base
        /// The variant at this index of `variants`.
        case variant(Int)
        /// Nothing: it ends `skipped`, reason `holdout`.
        case holdout
    }

    /// The reason of a held-out device's `skipped` result.
    package static let holdoutReason = "holdout"

    /// `device`'s share: its point in `0 ..< total weight`, from a hash of the campaign id and
    /// the device id, falls in one variant's weight or the holdout's (after the variants).
    /// Once a winner campaign has decided, every device outside its test group and its
    /// holdout gets the winner.
    package func share(of device: String) -> Share {
        let weighted = weightedShare(of: device)
        guard let decision, weighted != .holdout, phase(of: device) == .rest,
              let winner = variants.firstIndex(where: { $0.id == decision.variant }) else { return weighted }
        return .variant(winner)
    }

    private func weightedShare(of device: String) -> Share {
        guard !variants.isEmpty || holdout > 0 else { return .base }
        let total = variants.reduce(holdout) { $0 + $1.weight }
        var point = Int(Self.spread(FNV1a.hash(device, after: FNV1a.hash("\(id)/"))) % UInt64(total))
        for (index, variant) in variants.enumerated() {
            if point < variant.weight { return .variant(index) }
            point -= variant.weight
        }
        return .holdout
    }

    /// The variant id a device's results carry (nil without variants or in the holdout).
    package func variantID(of device: String) -> String? { variantID(of: share(of: device)) }

    /// A share's variant id (nil for the base and the holdout).
    package func variantID(of share: Share) -> String? {
        if case .variant(let index) = share { return variants[index].id }
        return nil
    }

    /// What a share is counted under: its variant's id, `holdout`, or nil for a campaign
    /// without variants.
    package func countedName(of share: Share) -> String? {
        share == .holdout ? Self.holdoutReason : variantID(of: share)
    }

    /// The campaign as one variant's devices get it: the variant's overrides applied, no
    /// variants left.
    package func applying(variant index: Int) -> Campaign {
        var copy = self
        let variant = variants[index]
        if let content = variant.content { copy.notification.content = content }
        if let aps = variant.aps { copy.notification.aps = (notification.aps ?? [:]).merging(aps) { $1 } }
        if let data = variant.data { copy.notification.data = (notification.data ?? [:]).merging(data) { $1 } }
        copy.variants = []
        copy.holdout = 0
        return copy
    }

    /// FNV-1a's low bits follow the last bytes closely; a 64-bit finalizer (SplitMix64's)
    /// spreads every bit over the result before it is reduced to a weight.
    static func spread(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The `aps` keys a campaign's tokens are chosen by (`Campaign.Notification.tokenKind`
    /// and the push-to-start token's attributes type).
    static let tokenChoosingKeys = ["event", "attributes-type"]

    /// Ids unique and well formed, weights in range, and every variant's notification valid
    /// as a whole (its texts, `aps` and size), reported at its own fields.
    func validateVariants() throws(MessageDecodingError) {
        if variants.count > Self.maxVariants {
            throw .invalidField("variants", "has \(variants.count) variants, at most \(Self.maxVariants) are allowed")
        }
        if !(0...Self.maxVariantWeight).contains(holdout) {
            throw .invalidField("holdout", "must be a weight from 0 to \(Self.maxVariantWeight), got \(holdout)")
        }
        if variants.isEmpty && holdout > 0 {
            throw .invalidField("holdout", "needs variants to hold out from; list them in variants")
        }
        var seen: [String: Int] = [:]
        for (index, variant) in variants.enumerated() {
            let field = "variants[\(index)]"
            try Rules.identifier(variant.id, field: field + ".id")
            if variant.id == Self.holdoutReason {
                throw .invalidField(field + ".id", "\"holdout\" names the holdout's counts; give the variant another id")
            }
            if let earlier = seen.updateValue(index, forKey: variant.id) {
                throw .invalidField(field + ".id", "repeats variants[\(earlier)].id (\(variant.id.debugDescription))")
            }
            if !(1...Self.maxVariantWeight).contains(variant.weight) {
                throw .invalidField(field + ".weight", "must be from 1 to \(Self.maxVariantWeight), got \(variant.weight)")
            }
            // The campaign's tokens are chosen once, from its base notification: a variant may
            // not change which token a push goes to (a Live Activity start's push-to-start
            // token of one type, an update's running activities).
            for key in Self.tokenChoosingKeys where variant.aps?[key] != nil && variant.aps?[key] != notification.aps?[key] {
                throw .invalidField(
                    "\(field).aps.\(key)", "decides which token the push goes to, which every variant shares; set it in notification.aps, not per variant")
            }
            do {
                try applying(variant: index).validateNotification(variant: variant.id)
            } catch {
                let moved = error.field.hasPrefix("notification") ? field + error.field.dropFirst("notification".count) : field
                throw error.moved(to: String(moved))
            }
        }
    }
}
