import Foundation
import PushfanAPNsModel
import PushfanCrypto

/// How a connection authenticates to APNs, loaded and checked.
package enum APNsCredentials: Sendable {
    /// Token auth: every request carries an ES256 provider token signed with the
    /// team's .p8 key. One key per connection pool.
    case token(ProviderSigningKey)
    /// Certificate auth: the TLS client certificate identifies the app.
    case certificate(APNsClientCertificate)

    /// Loads what `reference` names. A missing, unreadable or malformed key
    /// fails here, at startup, with the file in the message.
    package static func load(_ reference: APNsCredentialsReference) throws(APNsSenderError) -> APNsCredentials {
        switch reference {
        case .token(let teamID, let keyID, let keyFile):
            let key: ES256PrivateKey
            do { key = try ES256PrivateKey(contentsOfFile: keyFile) } catch { throw .invalidCredentials(error.description) }
            return try token(teamID: teamID, keyID: keyID, key: key)
        case .certificate(let certificateFile, let keyFile):
            return .certificate(try APNsClientCertificate(certificateFile: certificateFile, keyFile: keyFile))
        }
    }

    /// Token auth with a key already in memory (benchmarks use a throwaway one).
    package static func token(teamID: String, keyID: String, key: ES256PrivateKey) throws(APNsSenderError) -> APNsCredentials {
        do {
            return .token(try ProviderSigningKey(teamID: teamID, keyID: keyID) { message in try key.sign(message) })
        } catch {
            throw .invalidCredentials(error.description)
        }
    }

    /// Names the connection pool: connections are never shared between keys or
    /// certificates (APNs answers UnrelatedKeyIdInToken otherwise).
    package var poolIdentity: String {
        switch self {
        case .token(let key): return "token:\(key.teamID):\(key.keyID)"
        case .certificate(let certificate): return "certificate:\(certificate.certificateFile)"
        }
    }
}

/// A TLS client certificate for certificate-based APNs auth: a PEM certificate
/// with its PEM key, or one PKCS#12 file holding both.
package struct APNsClientCertificate: Sendable, Hashable {
    package enum Format: String, Sendable, Hashable {
        case pem = "PEM"
        case pkcs12 = "P12"
    }

    package let certificateFile: String
    /// The PEM private key; nil for PKCS#12 (the key is inside).
    package let keyFile: String?
    /// Password of the PKCS#12 file or the encrypted key, if any.
    package let password: String?
    package let format: Format

    /// Checks that the files exist and look like what they claim to be; libcurl
    /// reads them when the first connection is made.
    package init(certificateFile: String, keyFile: String?, password: String? = nil) throws(APNsSenderError) {
        let certificate = try Self.read(certificateFile, what: "certificate")
        if let keyFile {
            guard Self.contains(certificate, "-----BEGIN CERTIFICATE-----") else {
                throw .invalidCredentials("certificate file \(certificateFile) has no PEM certificate ('-----BEGIN CERTIFICATE-----')")
            }
            let key = try Self.read(keyFile, what: "certificate key")
            guard Self.contains(key, "PRIVATE KEY-----") else {
                throw .invalidCredentials("certificate key file \(keyFile) has no PEM private key ('-----BEGIN … PRIVATE KEY-----')")
            }
            format = .pem
        } else {
            // PKCS#12 is DER: it starts with an ASN.1 SEQUENCE tag.
            guard certificate.first == 0x30 else {
                throw .invalidCredentials(
                    "certificate file \(certificateFile) is not PKCS#12; a PEM certificate needs its key file (--cert-key)")
            }
            format = .pkcs12
        }
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.password = password
    }

    private static func read(_ path: String, what: String) throws(APNsSenderError) -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidCredentials("cannot read \(what) file \(path)")
        }
        guard !data.isEmpty else { throw .invalidCredentials("\(what) file \(path) is empty") }
        return data
    }

    private static func contains(_ data: Data, _ marker: String) -> Bool {
        data.range(of: Data(marker.utf8)) != nil
    }
}
