import Foundation
internal import COpenSSL

/// A client-side TLS configuration for HTTP/2 (ALPN `h2`, TLS 1.2 or newer): the
/// APNs sender's side of a connection.
///
/// Trusts the system's CA store, or only `caFile` (a simulator's or staging
/// proxy's CA); checks the server's name unless `verifyPeer` is false (load
/// tests against throwaway servers). Optionally presents a client certificate
/// (APNs certificate auth): PEM certificate and key, or a PKCS#12 file.
///
/// `@unchecked Sendable`: OpenSSL allows creating connections from one `SSL_CTX`
/// on any thread; the context is never changed after `init`.
package final class TLSClientContext: @unchecked Sendable {
    package enum ClientCertificate: Sendable {
        case pem(certificateFile: String, keyFile: String, password: String?)
        case pkcs12(file: String, password: String?)
    }

    private let context: OpaquePointer
    private let verifyPeer: Bool

    package init(caFile: String?, verifyPeer: Bool = true, certificate: ClientCertificate? = nil) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new failed") }
        _ = pushfan_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION)
        let protocols: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        _ = SSL_CTX_set_alpn_protos(context, protocols, UInt32(protocols.count))
        do throws(TLSError) {
            if verifyPeer {
                if let caFile {
                    guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                        throw TLSError("cannot read CA certificates from \(caFile) (PEM expected)")
                    }
                } else {
                    guard SSL_CTX_set_default_verify_paths(context) == 1 else { throw TLSError("cannot load the system's CA store") }
                }
                SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            } else {
                SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
            }
            if let certificate { try Self.use(certificate, in: context) }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.context = context
        self.verifyPeer = verifyPeer
    }

    deinit { SSL_CTX_free(context) }

    /// A client connection over a connected (or connecting), non-blocking socket,
    /// for `hostname` (SNI, and the name the certificate must carry). The caller
    /// keeps owning the descriptor.
    package func makeConnection(socket: Int32, hostname: String) throws(TLSError) -> TLSConnection {
        guard let ssl = SSL_new(context) else { throw TLSError("SSL_new failed") }
        SSL_set_fd(ssl, socket)
        SSL_set_connect_state(ssl)
        _ = pushfan_ssl_set_mode(ssl, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        let isAddress = hostname.contains(":") || hostname.allSatisfy { $0.isNumber || $0 == "." }
        if !isAddress { _ = pushfan_ssl_set_tlsext_host_name(ssl, hostname) }
        if verifyPeer {
            let checked = isAddress ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), hostname) : SSL_set1_host(ssl, hostname)
            guard checked == 1 else {
                SSL_free(ssl)
                throw TLSError("cannot check the server name \(hostname)")
            }
        }
        return TLSConnection(ssl: ssl)
    }

    private static func use(_ certificate: ClientCertificate, in context: OpaquePointer) throws(TLSError) {
        switch certificate {
        case .pem(let certificateFile, let keyFile, let password):
            if let password {
                // OpenSSL reads the password through a callback; the context keeps
                // a copy of the text until it is freed.
                let copy = strdup(password)
                SSL_CTX_set_default_passwd_cb_userdata(context, copy)
            }
            guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
                throw TLSError("cannot use the client certificate in \(certificateFile)")
            }
            guard SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1 else {
                throw TLSError("cannot use the client key in \(keyFile)")
            }
        case .pkcs12(let file, let password):
            guard let handle = fopen(file, "rb") else { throw TLSError("cannot open \(file)") }
            defer { fclose(handle) }
            guard let bundle = d2i_PKCS12_fp(handle, nil) else { throw TLSError("\(file) is not a PKCS#12 file") }
            defer { PKCS12_free(bundle) }
            var key: OpaquePointer?
            var leaf: OpaquePointer?
            guard PKCS12_parse(bundle, password ?? "", &key, &leaf, nil) == 1, let key, let leaf else {
                throw TLSError("cannot open \(file) (wrong password?)")
            }
            defer {
                EVP_PKEY_free(key)
                X509_free(leaf)
            }
            guard SSL_CTX_use_certificate(context, leaf) == 1, SSL_CTX_use_PrivateKey(context, key) == 1 else {
                throw TLSError("cannot use the certificate and key in \(file)")
            }
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError("the client key does not belong to the client certificate")
        }
    }
}
