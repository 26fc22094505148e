
/// Why the sender could not be set up: configuration and credentials problems,
/// reported at startup rather than as a rejection of every notification.
package struct APNsSenderError: Error, CustomStringConvertible, Equatable, Sendable {
    private enum Code: String {
        case invalidEndpoint = "invalid_endpoint"
        case invalidCredentials = "invalid_credentials"
        case invalidConfiguration = "invalid_configuration"
        case libcurl
    }

    private let kind: Code
    /// The full message, safe to show a user.
    package let description: String

    private init(_ kind: Code, _ description: String) {
        self.kind = kind
        self.description = description
    }

    /// A short code without details, safe as a metric label.
    package var code: String { kind.rawValue }

    package static func invalidEndpoint(_ reason: String) -> APNsSenderError { APNsSenderError(.invalidEndpoint, reason) }
    package static func invalidCredentials(_ reason: String) -> APNsSenderError { APNsSenderError(.invalidCredentials, reason) }
    package static func invalidConfiguration(_ reason: String) -> APNsSenderError { APNsSenderError(.invalidConfiguration, reason) }
    static func libcurl(_ call: String, _ reason: String) -> APNsSenderError { APNsSenderError(.libcurl, "libcurl \(call) failed: \(reason)") }
}
