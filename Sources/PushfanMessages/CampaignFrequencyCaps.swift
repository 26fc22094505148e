extension Campaign {
    /// The reason of a `skipped` result for a device its app's caps held back.
    package static let frequencyCapReason = "frequency_cap"

    /// Whether the app's frequency caps apply: alert pushes that are sent for real, unless
    /// the campaign is transactional (`ignore_frequency_caps`).
    package var countsTowardFrequencyCaps: Bool {
        notification.pushType == .alert && !options.dryRun && !options.ignoreFrequencyCaps
    }
}
