import Foundation
import PushfanTestSupport
import Testing
@testable import PushfanCrypto

/// ES256 against the `openssl` command-line tool as an independent implementation.
@Suite struct ES256Tests {
    private let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-es256-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    private func openssl(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try ChildExit.start(process)
        return ChildExit.wait(process)
    }

    private func write(_ name: String, _ data: Data) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func signsWithRawSignaturesThatVerify() throws {
        let key = ES256PrivateKey.generate()
        let message = Data("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJUIn0".utf8)
        let signature = try key.sign(message)
        #expect(signature.count == 64)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        var tampered = signature
        tampered[10] ^= 0x01
        #expect(!key.publicKey.isValidSignature(tampered, for: message))
        #expect(!key.publicKey.isValidSignature(signature, for: Data("other".utf8)))
        #expect(!key.publicKey.isValidSignature(signature.prefix(63), for: message))
        #expect(!ES256PrivateKey.generate().publicKey.isValidSignature(signature, for: message))
    }

    @Test func readsKeysMadeByOpenSSLAndItsToolVerifiesOurSignatures() throws {
        let keyPath = directory.appendingPathComponent("AuthKey.p8").path
        #expect(try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath]) == 0)
        let key = try ES256PrivateKey(contentsOfFile: keyPath)
        let message = Data("header.claims".utf8)
        let raw = try key.sign(message)
        let der = try #require(ES256Signature.der(fromRaw: Array(raw)))
        let publicPath = try write("public.pem", Data(key.publicKey.pem.utf8))
        let messagePath = try write("message", message)
        let signaturePath = try write("signature.der", Data(der))
        #expect(try openssl(["dgst", "-sha256", "-verify", publicPath, "-signature", signaturePath, messagePath]) == 0)
        // The PEM forms read back as the same key.
        let reread = try ES256PrivateKey(pem: key.pkcs8PEM)
        #expect(reread.publicKey.pem == key.publicKey.pem)
        #expect(try ES256PublicKey(pem: key.publicKey.pem).isValidSignature(raw, for: message))
        // SEC1 ("BEGIN EC PRIVATE KEY") too.
        let sec1Path = directory.appendingPathComponent("sec1.pem").path
        #expect(try openssl(["ec", "-in", keyPath, "-out", sec1Path]) == 0)
        #expect(try ES256PrivateKey(contentsOfFile: sec1Path).publicKey.pem == key.publicKey.pem)
    }

    @Test func refusesWhatIsNotAP256Key() throws {
        let rsaPath = directory.appendingPathComponent("rsa.pem").path
        #expect(try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", rsaPath]) == 0)
        let p384Path = directory.appendingPathComponent("p384.pem").path
        #expect(try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", p384Path]) == 0)
        let cases: [(String, String)] = [
            (rsaPath, "is not an EC key"),
            (p384Path, "another curve"),
            (try write("garbage.p8", Data("-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n".utf8)), "not a readable private key"),
            (try write("text.p8", Data("hello".utf8)), "not a PEM key"),
            (directory.appendingPathComponent("missing.p8").path, "cannot read key file"),
        ]
        for (path, expected) in cases {
            let error = #expect(throws: CryptoError.self) { try ES256PrivateKey(contentsOfFile: path) }
            #expect(error?.description.contains(expected) == true, "\(path): \(error?.description ?? "")")
            #expect(error?.description.contains(path) == true)
        }
        let publicError = #expect(throws: CryptoError.self) { try ES256PublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n") }
        #expect(publicError?.description.contains("not a readable public key") == true)
    }
}
