import Foundation
import PushfanSupport

/// The body of `POST /v1/apps/{app}/messages`, read in one pass: the recipients as given
/// (the API's `MessageRecipients` reads them), and the notification and options by the
/// campaign's own decoding. A message is checked by a campaign's rules without being rebuilt
/// as a campaign record and parsed a second time.
///
/// What is not a message's is noted rather than thrown, so the API answers it as a refusal
/// of the body (`invalid_input`) and not as a malformed campaign; once something is noted,
/// nothing after it is read.
package struct MessageBody: Decodable, Sendable {
    package static let members = ["recipients", "notification", "options"]
    /// The campaign options a message may set; the rest (`send_at`, `local_time`, `rate`…)
    /// are a campaign's.
    package static let optionNames: Set<String> = [
        "priority", "expiration", "collapse_id", "ignore_quiet_hours", "ignore_frequency_caps", "attribution_window_s", "dry_run",
    ]

    package enum Refusal: Sendable, Equatable {
        /// A member other than `members` (the first in sorted order).
        case unknownMember(String)
        /// `options` is not an object.
        case optionsNotAnObject
        /// An option other than `optionNames`.
        case unknownOption(String)
    }

    package private(set) var refusal: Refusal?
    package private(set) var recipients: JSONValue?
    package private(set) var notification = Campaign.Notification()
    /// Quiet hours and frequency caps do not hold a message back unless its options say so.
    package private(set) var options: Campaign.Options

    package init(from decoder: any Decoder) throws {
        var options = Campaign.Options(ignoreQuietHours: true)
        options.ignoreFrequencyCaps = true
        self.options = options
        let container = try decoder.container(keyedBy: AnyCodingKey.self)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { !Self.members.contains($0) }) {
            refusal = .unknownMember(unknown)
            return
        }
        recipients = try container.optionalField(AnyCodingKey(stringValue: "recipients"))
        let optionsKey = AnyCodingKey(stringValue: "options")
        if container.contains(optionsKey) {
            guard let given = try? container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: optionsKey) else {
                refusal = .optionsNotAnObject
                return
            }
            let names = Set(given.allKeys.map(\.stringValue))
            if let other = names.sorted().first(where: { !Self.optionNames.contains($0) }) {
                refusal = .unknownOption(other)
                return
            }
            var read: Campaign.Options = try container.field(optionsKey)
            // Absent or null (as docs/messages.md has null everywhere): a message's default.
            func unset(_ name: String) -> Bool {
                !names.contains(name) || (try? given.decodeNil(forKey: AnyCodingKey(stringValue: name))) == true
            }
            if unset("ignore_quiet_hours") { read.ignoreQuietHours = true }
            if unset("ignore_frequency_caps") { read.ignoreFrequencyCaps = true }
            self.options = read
        }
        notification = try container.field(AnyCodingKey(stringValue: "notification"))
    }

    /// The message as a campaign of `app` with the id the API chose, its audience `devices`
    /// (resolved from the recipients), checked by the campaign's rules.
    package func campaign(id: String, app: String, devices: [String], now: Date) throws(MessageDecodingError) -> Campaign {
        let campaign = Campaign(
            id: id, app: app, audience: .devices(devices), notification: notification, options: options,
            submittedAt: Int64(now.timeIntervalSince1970 * 1000))
        try campaign.validate()
        try campaign.checkSubmittable(now: now)
        return campaign
    }
}
