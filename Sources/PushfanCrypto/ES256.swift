import Foundation
internal import COpenSSL

/// What went wrong in a cryptographic operation, in words a user can act on.
package struct CryptoError: Error, CustomStringConvertible, Equatable, Sendable {
    package let description: String

    package init(_ description: String) { self.description = description }

    /// Adds OpenSSL's first queued error, if any, and clears the queue so a later
    /// failure does not report a stale one.
    static func openSSL(_ what: String) -> CryptoError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return CryptoError(what) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return CryptoError("\(what) (\(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))")
    }
}

/// A P-256 private key for ES256: Apple's .p8 token-auth keys and throwaway keys
/// for benchmarks and tests.
///
/// `@unchecked Sendable`: the `EVP_PKEY` is never mutated after init, and OpenSSL
/// allows concurrent signing with one key when each call has its own context.
package final class ES256PrivateKey: @unchecked Sendable {
    private let key: OpaquePointer

    private init(key: OpaquePointer) { self.key = key }

    deinit { EVP_PKEY_free(key) }

    /// A new random key.
    package static func generate() -> ES256PrivateKey {
        guard let key = pushfan_ec_generate_p256() else {
            // Only an exhausted entropy source or memory can fail here.
            fatalError("\(CryptoError.openSSL("generating a P-256 key failed"))")
        }
        return ES256PrivateKey(key: key)
    }

    /// Reads a PEM key: PKCS#8 (`BEGIN PRIVATE KEY`, Apple's .p8 format) or SEC1
    /// (`BEGIN EC PRIVATE KEY`). Refuses anything that is not a P-256 EC key.
    package convenience init(pem: String) throws(CryptoError) {
        guard pem.contains("-----BEGIN") else {
            throw CryptoError("not a PEM key: expected a '-----BEGIN PRIVATE KEY-----' block like Apple's .p8 files")
        }
        self.init(key: try Self.readP256(pem, what: "private key") { bio in PEM_read_bio_PrivateKey(bio, nil, nil, nil) })
    }

    /// Reads a PEM key file (see `init(pem:)`); errors name the file.
    package convenience init(contentsOfFile path: String) throws(CryptoError) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CryptoError("cannot read key file \(path): \((error as NSError).localizedDescription)")
        }
        do {
            try self.init(pem: text)
        } catch {
            throw CryptoError("key file \(path): \(error.description)")
        }
    }

    /// Signs `message` with ECDSA over SHA-256 and returns the JWS form of the
    /// signature: r and s as 32-byte big-endian numbers, concatenated.
    package func sign(_ message: some DataProtocol) throws(CryptoError) -> Data {
        guard let context = EVP_MD_CTX_new() else { throw .openSSL("out of memory") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else { throw .openSSL("ES256 sign init failed") }
        var der = [UInt8](repeating: 0, count: 80)
        var derLength = der.count
        let bytes = Array(message)
        let signed = bytes.withUnsafeBufferPointer { input in
            EVP_DigestSign(context, &der, &derLength, input.baseAddress, input.count)
        }
        guard signed == 1 else { throw .openSSL("ES256 signing failed") }
        return try ES256Signature.raw(fromDER: der.prefix(derLength))
    }

    /// The matching public key.
    package var publicKey: ES256PublicKey {
        // Through DER: OpenSSL 3 has no direct "public half" copy for EVP_PKEY.
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(key, &pointer)
        guard length > 0, let pointer else { fatalError("\(CryptoError.openSSL("encoding a public key failed"))") }
        defer { CRYPTO_free(pointer, #fileID, #line) }
        var cursor: UnsafePointer<UInt8>? = UnsafePointer(pointer)
        guard let publicKey = d2i_PUBKEY(nil, &cursor, Int(length)) else {
            fatalError("\(CryptoError.openSSL("decoding a public key failed"))")
        }
        return ES256PublicKey(key: publicKey)
    }

    /// The key as PKCS#8 PEM, the .p8 format Apple hands out.
    package var pkcs8PEM: String {
        Self.pemString { bio in PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) }
    }

    static func withBIO<T>(_ text: String, _ body: (OpaquePointer?) -> T) throws(CryptoError) -> T {
        let bytes = Array(text.utf8)
        guard let bio = bytes.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else {
            throw .openSSL("out of memory")
        }
        defer { BIO_free(bio) }
        return body(bio)
    }

    static func pemString(_ write: (OpaquePointer?) -> Int32) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { fatalError("out of memory") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { fatalError("\(CryptoError.openSSL("writing PEM failed"))") }
        var data: UnsafeMutablePointer<CChar>?
        let length = pushfan_bio_get_mem_data(bio, &data)
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    /// The key `read` takes from a PEM text, if it is a P-256 key (`what` names it in errors);
    /// the caller owns it.
    static func readP256(_ pem: String, what: String, _ read: (OpaquePointer?) -> OpaquePointer?) throws(CryptoError) -> OpaquePointer {
        guard let key = try withBIO(pem, read) else { throw .openSSL("the PEM block is not a readable \(what)") }
        do {
            try requireP256(key, what: what)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        return key
    }

    static func requireP256(_ key: OpaquePointer, what: String) throws(CryptoError) {
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else {
            throw CryptoError("the \(what) is not an EC key; ES256 needs a P-256 (prime256v1) key")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1,
              String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
        else {
            throw CryptoError("the \(what) is an EC key on another curve; ES256 needs P-256 (prime256v1)")
        }
    }
}

/// A P-256 public key that checks ES256 signatures (the APNs simulator verifies
/// provider tokens with the keys teams register).
///
/// `@unchecked Sendable`: immutable after init; each verification has its own context.
package final class ES256PublicKey: @unchecked Sendable {
    private let key: OpaquePointer

    fileprivate init(key: OpaquePointer) { self.key = key }

    deinit { EVP_PKEY_free(key) }

    /// Reads a `BEGIN PUBLIC KEY` PEM block holding a P-256 key.
    package convenience init(pem: String) throws(CryptoError) {
        guard pem.contains("-----BEGIN PUBLIC KEY-----") else {
            throw CryptoError("not a PEM public key: expected a '-----BEGIN PUBLIC KEY-----' block")
        }
        self.init(key: try ES256PrivateKey.readP256(pem, what: "public key") { bio in PEM_read_bio_PUBKEY(bio, nil, nil, nil) })
    }

    /// True when `signature` (raw r||s, 64 bytes) is a valid ES256 signature of `message`.
    package func isValidSignature(_ signature: some DataProtocol, for message: some DataProtocol) -> Bool {
        guard let der = ES256Signature.der(fromRaw: Array(signature)) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let bytes = Array(message)
        let verified = bytes.withUnsafeBufferPointer { input in
            EVP_DigestVerify(context, der, der.count, input.baseAddress, input.count)
        }
        ERR_clear_error()
        return verified == 1
    }

    /// The key as a `BEGIN PUBLIC KEY` PEM block.
    package var pem: String {
        ES256PrivateKey.pemString { bio in PEM_write_bio_PUBKEY(bio, key) }
    }
}

/// Converts between OpenSSL's DER `ECDSA-Sig-Value` and the JWS raw r||s form.
enum ES256Signature {
    static func raw(fromDER der: some Collection<UInt8>) throws(CryptoError) -> Data {
        let bytes = Array(der)
        let parsed = bytes.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature = parsed else { throw .openSSL("OpenSSL returned an unreadable signature") }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var raw = [UInt8](repeating: 0, count: 64)
        let written = raw.withUnsafeMutableBufferPointer { out in
            (BN_bn2binpad(r, out.baseAddress, 32), BN_bn2binpad(s, out.baseAddress! + 32, 32))
        }
        guard written == (32, 32) else { throw CryptoError("signature numbers do not fit 32 bytes") }
        return Data(raw)
    }

    /// Nil unless `raw` is 64 bytes.
    static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &pointer)
        guard length > 0, let pointer else { return nil }
        defer { CRYPTO_free(pointer, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: pointer, count: Int(length)))
    }
}
