import Foundation
internal import COpenSSL

/// Hashing and randomness from OpenSSL (ES256 keys are in ES256.swift).
package enum Crypto {
    /// SHA-256 of `data`.
    package static func sha256(_ data: some DataProtocol) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let bytes = Array(data)
        var length: UInt32 = 0
        bytes.withUnsafeBytes { input in
            _ = EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
        }
        return digest
    }

    /// Cryptographically strong random bytes.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        if RAND_bytes(&bytes, Int32(count)) != 1 {
            // OpenSSL's generator failing is not recoverable; fall back to the system's.
            var generator = SystemRandomNumberGenerator()
            for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
        }
        return bytes
    }

    /// Compares without leaking where the first difference is.
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }
}

/// An app secret: 32 random bytes shown once as hex, stored only as salt + SHA-256(salt ‖ secret).
/// A plain salted hash suffices because the secret has 256 bits of entropy (nothing to
/// brute-force), and it keeps per-request verification cheap.
package struct SecretHash: Sendable, Equatable {
    package let salt: String
    package let hash: String

    package static func generateSecret() -> String { hex(Crypto.randomBytes(32)) }

    package init(secret: String) {
        let salt = SecretHash.hex(Crypto.randomBytes(16))
        self.init(salt: salt, hash: SecretHash.hex(Crypto.sha256(Data((salt + secret).utf8))))
    }

    package init(salt: String, hash: String) {
        self.salt = salt
        self.hash = hash
    }

    package func matches(_ secret: String) -> Bool {
        var input = Array(salt.utf8)
        input.append(contentsOf: secret.utf8)
        return Crypto.constantTimeEqual(SecretHash.hexDigits(Crypto.sha256(input)), Array(hash.utf8))
    }

    static func hex(_ bytes: [UInt8]) -> String { String(decoding: hexDigits(bytes), as: UTF8.self) }

    private static func hexDigits(_ bytes: [UInt8]) -> [UInt8] {
        let digits: StaticString = "0123456789abcdef"
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits.utf8Start[Int(byte >> 4)])
            out.append(digits.utf8Start[Int(byte & 0x0F)])
        }
        return out
    }
}
