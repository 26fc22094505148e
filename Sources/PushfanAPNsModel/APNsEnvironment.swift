import Foundation

/// Where an app's APNs credentials live. The store keeps references (file paths and ids),
/// never key material; the sender loads them.
package enum APNsCredentialsReference: Sendable, Hashable {
    /// Token auth: a .p8 signing key.
    case token(teamID: String, keyID: String, keyFile: String)
    /// Certificate auth: a PEM certificate and key, or a PKCS#12 file (`keyFile` nil).
    case certificate(certificateFile: String, keyFile: String?)
}

/// APNs environment of a device token: tokens from debug builds belong to the sandbox.
package enum APNsEnvironment: String, Sendable, Hashable, CaseIterable {
    case production, sandbox

    /// Apple's host for this environment.
    package var host: String {
        switch self {
        case .production: return "api.push.apple.com"
        case .sandbox: return "api.sandbox.push.apple.com"
        }
    }

    /// Apple's host and port for broadcast channel management (iOS 18).
    package var channelManagementHost: String {
        switch self {
        case .production: return "api-manage-broadcast.push.apple.com:2196"
        case .sandbox: return "api-manage-broadcast.sandbox.push.apple.com:2195"
        }
    }
}
