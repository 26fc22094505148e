import Foundation
import PushfanAPNs
import PushfanAPNsModel
import PushfanCrypto
import PushfanMessages
import PushfanSupport
import Testing

/// Endpoints, credentials and pool settings: mistakes fail at startup with a
/// message that names the problem.
@Suite struct APNsSetupTests {
    private static let directory: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-apns-setup-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    private static func file(_ name: String, _ contents: String) -> String {
        let path = directory + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: Data(contents.utf8))
        return path
    }

    @Test func appleHosts() throws {
        #expect(try APNsEndpoint.apple(.production).baseURL == "https://api.push.apple.com:443")
        #expect(try APNsEndpoint.apple(.sandbox, port: 2197).baseURL == "https://api.sandbox.push.apple.com:2197")
        #expect(try APNsEndpoint.apple(.production).caFile == nil)
        let error = #expect(throws: APNsSenderError.self) { try APNsEndpoint.apple(.production, port: 8443) }
        #expect(error?.description == "APNs listens on port 443 or 2197; 8443 is neither")
    }

    @Test func endpointOverrides() throws {
        #expect(try APNsEndpoint(url: "https://127.0.0.1:8443").baseURL == "https://127.0.0.1:8443")
        #expect(try APNsEndpoint(url: "https://staging.example.com/").baseURL == "https://staging.example.com:443")
        #expect(try APNsEndpoint(url: "http://[::1]:9000").baseURL == "http://[::1]:9000")
        #expect(try APNsEndpoint(url: "http://127.0.0.1:9000").isCleartext)
        let ca = Self.file("ca.pem", "-----BEGIN CERTIFICATE-----\n")
        #expect(try APNsEndpoint(url: "https://sim:1", caFile: ca).caFile == ca)
    }

    @Test("bad endpoint overrides are refused with the reason", arguments: [
        ("api.push.apple.com", "must look like https://host[:port]"),
        ("ftp://host", "must look like https://host[:port]"),
        ("https://", "must look like https://host[:port]"),
        ("https://host:1/3/device", "only scheme, host and port"),
        ("https://host:1?x=1", "only scheme, host and port"),
        ("https://user:pw@host:1", "only scheme, host and port"),
    ])
    func badEndpoints(url: String, message: String) {
        let error = #expect(throws: APNsSenderError.self) { try APNsEndpoint(url: url) }
        #expect(error?.description.contains(message) == true, "\(error?.description ?? "")")
        #expect(error?.code == "invalid_endpoint")
    }

    @Test func missingCAFile() {
        let error = #expect(throws: APNsSenderError.self) { try APNsEndpoint(url: "https://sim:1", caFile: "/nonexistent/ca.pem") }
        #expect(error?.description == "CA file /nonexistent/ca.pem does not exist or is not readable")
    }

    @Test func tokenCredentialsLoadAP8Key() throws {
        let key = ES256PrivateKey.generate()
        let path = Self.file("AuthKey_OK.p8", key.pkcs8PEM)
        let credentials = try APNsCredentials.load(.token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: path))
        guard case .token(let signing) = credentials else {
            Issue.record("expected token credentials")
            return
        }
        let token = try ProviderTokenCache(clock: SystemClock()).token(for: signing)
        let parts = token.jwt.split(separator: ".")
        #expect(parts.count == 3)
        let signature = try #require(Base64URL.decode(String(parts[2])))
        #expect(key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(credentials.poolIdentity == "token:TEAM123456:KEY1234567")
    }

    @Test("broken token credentials fail at startup with the file named", arguments: [
        ("missing", "cannot read key file"),
        ("empty", "not a PEM key"),
        ("garbage", "not a readable private key"),
    ])
    func badTokenCredentials(kind: String, message: String) {
        let path: String
        switch kind {
        case "missing": path = Self.directory + "/nope.p8"
        case "empty": path = Self.file("empty.p8", "")
        default: path = Self.file("garbage.p8", "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
        }
        let error = #expect(throws: APNsSenderError.self) {
            try APNsCredentials.load(.token(teamID: "TEAM123456", keyID: "KEY1234567", keyFile: path))
        }
        #expect(error?.description.contains(message) == true, "\(error?.description ?? "")")
        #expect(error?.description.contains(path) == true)
        #expect(error?.code == "invalid_credentials")
    }

    @Test func badTeamOrKeyID() {
        let error = #expect(throws: APNsSenderError.self) {
            try APNsCredentials.token(teamID: "TEAM 1", keyID: "KEY1234567", key: .generate())
        }
        #expect(error?.description.contains("team id must be letters and digits") == true)
    }

    @Test func certificateCredentials() throws {
        let certificate = Self.file("cert.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        let key = Self.file("key.pem", "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")
        let pem = try APNsClientCertificate(certificateFile: certificate, keyFile: key)
        #expect(pem.format == .pem)
        let p12Path = Self.directory + "/cert.p12"
        _ = FileManager.default.createFile(atPath: p12Path, contents: Data([0x30, 0x82, 0x01, 0x00]))
        #expect(try APNsClientCertificate(certificateFile: p12Path, keyFile: nil, password: "pw").format == .pkcs12)

        let cases: [(String, String?, String)] = [
            (Self.directory + "/none.pem", key, "cannot read certificate file"),
            (key, key, "has no PEM certificate"),
            (certificate, certificate, "has no PEM private key"),
            (certificate, nil, "is not PKCS#12; a PEM certificate needs its key file"),
            (Self.file("blank.pem", ""), key, "is empty"),
        ]
        for (certificateFile, keyFile, message) in cases {
            let error = #expect(throws: APNsSenderError.self) { try APNsClientCertificate(certificateFile: certificateFile, keyFile: keyFile) }
            #expect(error?.description.contains(message) == true, "\(error?.description ?? "")")
        }
    }

    @Test func poolSettingsAreChecked() throws {
        let endpoint = try APNsEndpoint(url: "https://127.0.0.1:1")
        let credentials = try APNsCredentials.token(teamID: "TEAM123456", keyID: "KEY1234567", key: .generate())
        let cases: [((inout APNsClientConfiguration) -> Void, String)] = [
            ({ $0.connections = 0 }, "connections must be 1 to 64; found 0"),
            ({ $0.streamsPerConnection = 0 }, "streams per connection must be 1 to 10000; found 0"),
            ({ $0.maxQueued = 0 }, "max queued must be at least 1; found 0"),
            ({ $0.requestTimeout = .zero }, "request timeout must be positive"),
        ]
        for (change, message) in cases {
            var configuration = APNsClientConfiguration()
            change(&configuration)
            let error = #expect(throws: APNsSenderError.self) {
                try APNsClient(endpoint: endpoint, credentials: credentials, configuration: configuration)
            }
            #expect(error?.description.hasPrefix(message) == true, "\(error?.description ?? "")")
        }
    }
}
