import Foundation
import PushfanAPNsModel
import PushfanSupport

/// Where notifications go: Apple's production or sandbox host (port 443 or
/// 2197), or an override for simulators and staging with an extra CA to trust.
package struct APNsEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// `scheme://host:port`, no trailing slash. `http://` means HTTP/2 with prior
    /// knowledge (h2c), for simulators only.
    package let baseURL: String
    /// PEM file of CA certificates trusted for this endpoint beside the system's
    /// (a simulator's or a staging proxy's CA); nil trusts the system's only, as
    /// Apple's hosts need.
    package let caFile: String?
    /// Skips certificate verification. Benchmarks against throwaway servers only.
    package let verifyPeer: Bool

    /// Apple's host for `environment`. Apple serves the same API on 443 and 2197
    /// (2197 for networks that block 443).
    package static func apple(_ environment: APNsEnvironment, port: Int = 443) throws(APNsSenderError) -> APNsEndpoint {
        guard port == 443 || port == 2197 else {
            throw .invalidEndpoint("APNs listens on port 443 or 2197; \(port) is neither")
        }
        return APNsEndpoint(uncheckedBaseURL: "https://\(environment.host):\(port)", caFile: nil, verifyPeer: true)
    }

    /// An override such as `https://127.0.0.1:8443` (a simulator) or a staging
    /// proxy. Only a scheme, host and optional port are allowed: the request path
    /// is always `/3/device/<token>`.
    package init(url: String, caFile: String? = nil, verifyPeer: Bool = true) throws(APNsSenderError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "https" || scheme == "http", let host = components.host, !host.isEmpty
        else {
            throw .invalidEndpoint("APNs URL must look like https://host[:port]; found '\(url)'")
        }
        guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil,
              components.user == nil, components.password == nil
        else {
            throw .invalidEndpoint("APNs URL must be only scheme, host and port (the path is always /3/device/<token>); found '\(url)'")
        }
        if let caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw .invalidEndpoint("CA file \(caFile) does not exist or is not readable")
            }
        }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        let hostPart = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        self.init(uncheckedBaseURL: "\(scheme)://\(hostPart):\(port)", caFile: caFile, verifyPeer: verifyPeer)
    }

    private init(uncheckedBaseURL: String, caFile: String?, verifyPeer: Bool) {
        self.baseURL = uncheckedBaseURL
        self.caFile = caFile
        self.verifyPeer = verifyPeer
    }

    /// The endpoint the configuration names: the override (`apns.url`,
    /// `PUSHFAN_APNS_URL`) when set, else Apple's host for `environment`.
    package static func configured(
        _ configuration: PushfanConfiguration.APNs, environment: APNsEnvironment
    ) throws(APNsSenderError) -> APNsEndpoint {
        if let url = configuration.url { return try APNsEndpoint(url: url, caFile: configuration.caFile) }
        return try .apple(environment)
    }

    /// True for plain-text HTTP/2 (h2c).
    package var isCleartext: Bool { baseURL.hasPrefix("http://") }

    package var description: String { baseURL }
}
