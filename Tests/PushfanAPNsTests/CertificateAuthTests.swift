import Foundation
import PushfanAPNs
import PushfanMessages
import PushfanTestSupport
import Testing

/// Certificate auth end to end: the simulator trusts a provider CA (`--client-ca`), and the
/// sender presents a certificate that CA signed, as PEM files or one PKCS#12 file.
@Suite(.serialized) struct CertificateAuthTests {
    private struct Files {
        let directory: String
        func path(_ name: String) -> String { directory + "/" + name }
    }

    private func openssl(_ arguments: [String]) async throws {
        let result = try await CommandLineTool.run("openssl", arguments)
        try #require(result.status == 0, "openssl \(arguments.first ?? ""): \(result.error)")
    }

    /// A provider CA, a certificate it signs for com.example.app (also as PKCS#12), and one
    /// signed by a stranger.
    private func makeCertificates() async throws -> Files {
        let files = Files(directory: FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-cert-\(UUID().uuidString.prefix(8))").path)
        try FileManager.default.createDirectory(atPath: files.directory, withIntermediateDirectories: true)
        for name in ["ca", "stranger"] {
            try await openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                               "-subj", "/CN=\(name)", "-keyout", files.path("\(name).key"), "-out", files.path("\(name).pem")])
        }
        for (name, signer) in [("client", "ca"), ("forged", "stranger")] {
            try await openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                               "-subj", "/UID=\(SenderHarness.topic)/CN=Apple Push Services: \(SenderHarness.topic)",
                               "-keyout", files.path("\(name).key"), "-out", files.path("\(name).csr")])
            try await openssl(["x509", "-req", "-in", files.path("\(name).csr"), "-CA", files.path("\(signer).pem"),
                               "-CAkey", files.path("\(signer).key"), "-CAcreateserial", "-days", "1", "-out", files.path("\(name).pem")])
        }
        try await openssl(["pkcs12", "-export", "-in", files.path("client.pem"), "-inkey", files.path("client.key"),
                           "-passout", "pass:secret", "-out", files.path("client.p12")])
        return files
    }

    @Test("a certificate the simulator trusts sends, as PEM or PKCS#12; a forged one never connects")
    func certificateAuth() async throws {
        let files = try await makeCertificates()
        let simulator = try await SimulatorProcess(["--client-ca", files.path("ca.pem"), "--accept-any-key", "--log", files.path("log.ndjson")])
        defer { simulator.stop() }
        var configuration = APNsClientConfiguration()
        configuration.connections = 1
        let endpoint = try APNsEndpoint(url: simulator.url, caFile: simulator.caFile)
        let certificates = [
            try APNsClientCertificate(certificateFile: files.path("client.pem"), keyFile: files.path("client.key")),
            try APNsClientCertificate(certificateFile: files.path("client.p12"), keyFile: nil, password: "secret"),
        ]
        for certificate in certificates {
            let client = try APNsClient(endpoint: endpoint, credentials: .certificate(certificate), configuration: configuration)
            let notification = try SenderHarness.alert()
            let result = await client.send(notification)
            await client.shutdown()
            #expect(result.isAccepted, "\(certificate.format): \(result)")
        }
        #expect((try await simulator.stats()).count("accepted") == 2)

        let forged = try APNsClient(
            endpoint: endpoint,
            credentials: .certificate(try APNsClientCertificate(certificateFile: files.path("forged.pem"), keyFile: files.path("forged.key"))),
            configuration: configuration)
        let refused = await forged.send(try SenderHarness.alert())
        await forged.shutdown()
        // With TLS 1.3 the server judges the client certificate after the handshake (an
        // "unknown ca" alert, or a reset when the alert loses the race): the sender has sent
        // nothing yet (it waits for SETTINGS), so the request was certainly not processed.
        let failure = try #require(refused.failure, "\(refused)")
        #expect(failure.certainty == .notProcessed, "\(failure)")
        #expect((try await simulator.stats()).count("accepted") == 2)
    }
}
