import Foundation
internal import COpenSSL

/// Why a TLS endpoint could not be set up: what was being done, and OpenSSL's own words.
package struct TLSError: Error, CustomStringConvertible, Sendable {
    package let description: String

    init(_ what: String) {
        self.description = what + TLSError.drainOpenSSLErrors()
    }

    /// OpenSSL's queued errors as "; openssl: ..." (empty when there are none), and clears the queue.
    static func drainOpenSSLErrors() -> String {
        var messages: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "" : "; openssl: " + messages.joined(separator: "; ")
    }
}

/// A server-side TLS configuration (OpenSSL `SSL_CTX`) that offers only HTTP/2 through
/// ALPN, TLS 1.2 or newer.
///
/// Either loads a certificate chain and key from PEM files, or generates a throwaway
/// certificate authority and a leaf certificate for `localhost`, 127.0.0.1 and ::1 signed by
/// it: clients trust `certificateAuthorityPEM` and connect by name or loopback address.
///
/// `@unchecked Sendable`: OpenSSL allows creating connections from one `SSL_CTX` on any
/// thread; the context is never changed after `init`.
package final class TLSServerContext: @unchecked Sendable {
    private let context: OpaquePointer
    /// The CA that signed the generated certificate, PEM; nil when the certificate came from files.
    package let certificateAuthorityPEM: String?

    /// Loads a certificate chain (leaf first) and its private key from PEM files.
    package init(certificateFile: String, keyFile: String) throws(TLSError) {
        let context = try Self.makeContext()
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            SSL_CTX_free(context)
            throw TLSError("cannot use the certificate in \(certificateFile) (a PEM certificate chain is expected)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1 else {
            SSL_CTX_free(context)
            throw TLSError("cannot use the private key in \(keyFile) (a PEM private key is expected)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            SSL_CTX_free(context)
            throw TLSError("the key in \(keyFile) does not belong to the certificate in \(certificateFile)")
        }
        self.context = context
        certificateAuthorityPEM = nil
    }

    /// Generates a P-256 CA and a leaf certificate for localhost, 127.0.0.1 and ::1 (and
    /// `extraHostnames`), valid from an hour ago for a year.
    package init(selfSignedFor extraHostnames: [String] = []) throws(TLSError) {
        let caKey = try Self.generateKey()
        defer { EVP_PKEY_free(caKey) }
        let leafKey = try Self.generateKey()
        defer { EVP_PKEY_free(leafKey) }
        let ca = try Self.makeCertificate(
            subject: "Pushfan APNs simulator CA", key: caKey, issuer: nil, issuerKey: caKey,
            extensions: [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")])
        defer { X509_free(ca) }
        let names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"] + extraHostnames.map { "DNS:" + $0 }
        let leaf = try Self.makeCertificate(
            subject: "localhost", key: leafKey, issuer: ca, issuerKey: caKey,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "serverAuth"),
                (NID_subject_alt_name, names.joined(separator: ",")),
            ])
        defer { X509_free(leaf) }
        let context = try Self.makeContext()
        guard SSL_CTX_use_certificate(context, leaf) == 1, SSL_CTX_use_PrivateKey(context, leafKey) == 1 else {
            SSL_CTX_free(context)
            throw TLSError("cannot use the generated certificate")
        }
        self.context = context
        certificateAuthorityPEM = try Self.pem(ca)
    }

    deinit { SSL_CTX_free(context) }

    /// Asks every client for a certificate and verifies the ones presented against the CAs
    /// in `caFile` (PEM); a certificate that does not verify fails the handshake. Clients
    /// without one are still served (they may use token auth). Call before any connection.
    package func verifyClientCertificates(caFile: String) throws(TLSError) {
        guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
            throw TLSError("cannot load client CA certificates from \(caFile) (PEM expected)")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    }

    /// A server-side connection over a connected, non-blocking socket. The caller keeps
    /// owning (and closes) the descriptor.
    package func makeConnection(socket: Int32) throws(TLSError) -> TLSConnection {
        guard let ssl = SSL_new(context) else { throw TLSError("SSL_new failed") }
        SSL_set_fd(ssl, socket)
        SSL_set_accept_state(ssl)
        _ = pushfan_ssl_set_mode(ssl, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        return TLSConnection(ssl: ssl)
    }

    // MARK: - Setup

    private static func makeContext() throws(TLSError) -> OpaquePointer {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError("SSL_CTX_new failed") }
        _ = pushfan_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION)
        // OpenSSL 3 already leaves compression off, and TLS 1.3 has no renegotiation.
        // ALPN: pick "h2" or refuse the handshake; HTTP/2 is all an APNs server speaks.
        SSL_CTX_set_alpn_select_cb(context, { _, out, outLength, offered, offeredLength, _ in
            guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            var index = 0
            let count = Int(offeredLength)
            while index < count {
                let length = Int(offered[index])
                let start = index + 1
                if length == 2, start + 1 < count, offered[start] == UInt8(ascii: "h"), offered[start + 1] == UInt8(ascii: "2") {
                    out.pointee = offered + start
                    outLength.pointee = 2
                    return SSL_TLSEXT_ERR_OK
                }
                index = start + length
            }
            return SSL_TLSEXT_ERR_ALERT_FATAL
        }, nil)
        return context
    }

    private static func generateKey() throws(TLSError) -> OpaquePointer {
        guard let keyContext = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw TLSError("EVP_PKEY_CTX_new_id failed") }
        defer { EVP_PKEY_CTX_free(keyContext) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(keyContext) == 1,
              EVP_PKEY_CTX_set_ec_paramgen_curve_nid(keyContext, NID_X9_62_prime256v1) == 1,
              EVP_PKEY_keygen(keyContext, &key) == 1, let key
        else { throw TLSError("cannot generate a P-256 key") }
        return key
    }

    private static func makeCertificate(
        subject: String, key: OpaquePointer, issuer: OpaquePointer?, issuerKey: OpaquePointer,
        extensions: [(Int32, String)]
    ) throws(TLSError) -> OpaquePointer {
        guard let certificate = X509_new() else { throw TLSError("X509_new failed") }
        var ok = X509_set_version(certificate, 2) == 1
        let serial = Crypto.randomBytes(8).reduce(0) { ($0 << 8) | Int($1) } & 0x3FFF_FFFF_FFFF_FFFF
        ok = ok && ASN1_INTEGER_set_int64(X509_get_serialNumber(certificate), Int64(serial)) == 1
        ok = ok && X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil
        ok = ok && X509_gmtime_adj(X509_getm_notAfter(certificate), 365 * 24 * 3600) != nil
        ok = ok && X509_set_pubkey(certificate, key) == 1
        let name = X509_get_subject_name(certificate)
        ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, subject, -1, -1, 0) == 1
        ok = ok && X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0) } ?? name) == 1
        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, issuer ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions where ok {
            guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else { ok = false; break }
            ok = X509_add_ext(certificate, ext, -1) == 1
            X509_EXTENSION_free(ext)
        }
        ok = ok && X509_sign(certificate, issuerKey, EVP_sha256()) > 0
        guard ok else {
            X509_free(certificate)
            throw TLSError("cannot build the certificate for \(subject)")
        }
        return certificate
    }

    private static func pem(_ certificate: OpaquePointer) throws(TLSError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TLSError("BIO_new failed") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, certificate) == 1 else { throw TLSError("cannot write the certificate as PEM") }
        var data: UnsafeMutablePointer<CChar>?
        let length = pushfan_bio_get_mem_data(bio, &data)
        guard let data, length > 0 else { throw TLSError("cannot write the certificate as PEM") }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}

/// One server-side TLS connection over a non-blocking socket. Used by one thread at a time
/// (not `Sendable`); frees its `SSL` on deinit but never closes the socket.
package final class TLSConnection {
    /// What a non-blocking step did.
    package enum Progress: Equatable {
        /// Done (handshake) or this many bytes moved (read, write).
        case done(Int)
        /// Call again when the socket is readable.
        case wantRead
        /// Call again when the socket is writable.
        case wantWrite
        /// The peer closed the TLS session cleanly.
        case closed
        /// The connection is broken; the text says why.
        case failed(String)
    }

    private let ssl: OpaquePointer

    init(ssl: OpaquePointer) { self.ssl = ssl }

    deinit { SSL_free(ssl) }

    /// Advances the handshake.
    package func handshake() -> Progress {
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        return rc == 1 ? .done(0) : progress(rc, doing: "handshake")
    }

    /// The protocol chosen through ALPN ("h2"), nil if none.
    package var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The verified client certificate's subject UID (Apple's provider certificates carry the
    /// bundle id there), or its CN when it has no UID; nil without a client certificate.
    package var peerCertificateTopic: String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard SSL_get_verify_result(ssl) == X509_V_OK, let name = X509_get_subject_name(certificate) else { return nil }
        for nid in [NID_userId, NID_commonName] {
            let index = X509_NAME_get_index_by_NID(name, nid, -1)
            guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry),
                  let bytes = ASN1_STRING_get0_data(data)
            else { continue }
            return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(data))), as: UTF8.self)
        }
        return nil
    }

    /// Reads decrypted bytes into `buffer`.
    package func read(into buffer: UnsafeMutableRawBufferPointer) -> Progress {
        ERR_clear_error()
        let rc = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        return rc > 0 ? .done(Int(rc)) : progress(rc, doing: "read")
    }

    /// Encrypts and writes (part of) `bytes`. After `.wantRead`/`.wantWrite`, call again
    /// with the same bytes.
    package func write(_ bytes: UnsafeRawBufferPointer) -> Progress {
        guard bytes.count > 0 else { return .done(0) }
        ERR_clear_error()
        let rc = SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
        return rc > 0 ? .done(Int(rc)) : progress(rc, doing: "write")
    }

    /// Sends close_notify (best effort; the socket is about to close anyway).
    package func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
    }

    private func progress(_ rc: Int32, doing what: String) -> Progress {
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            let detail = TLSError.drainOpenSSLErrors()
            return detail.isEmpty && errno == 0 ? .closed : .failed("TLS \(what): errno \(errno)\(detail)")
        default:
            return .failed("TLS \(what) failed" + TLSError.drainOpenSSLErrors())
        }
    }
}
