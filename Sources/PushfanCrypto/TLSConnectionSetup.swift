import Foundation
internal import COpenSSL

/// OpenSSL calls the APNs sender makes on the TLS context libcurl creates for each
/// connection (libcurl hands it over as a raw pointer, from its SSL_CTX callback).
package enum TLSConnectionSetup {
    /// What the handshake agreed, written by OpenSSL's info callback when it completes.
    /// Used by one connection at a time: its attempt's thread during the handshake, the
    /// pool's thread after it (the hand-over is ordered by the attempt's mutex).
    package final class Handshake: @unchecked Sendable {
        /// The protocol the server chose by ALPN; nil if it chose none.
        package var negotiatedProtocol: String?
        package init() {}
    }

    /// The SSL_CTX ex-data slot that points at the connection's `Handshake` (unretained:
    /// the channel that owns the `Handshake` outlives the context).
    private static let handshakeSlot = pushfan_ssl_ctx_new_ex_index()

    /// Readies libcurl's `SSL_CTX` before the handshake: offers `h2` by ALPN (libcurl's own
    /// ALPN is off, so that it does not start its own HTTP/2 session on the connection),
    /// adds `extraCAFile`'s certificates to the store libcurl loaded with the system's CAs,
    /// and records the server's ALPN choice in `handshake`. Returns why it could not, or nil.
    package static func prepare(sslContext: UnsafeMutableRawPointer, extraCAFile: String?, handshake: Handshake) -> String? {
        let context = OpaquePointer(sslContext)
        let protocols: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        // SSL_CTX_set_alpn_protos returns 0 on success.
        guard SSL_CTX_set_alpn_protos(context, protocols, UInt32(protocols.count)) == 0 else {
            return "cannot offer h2 by ALPN" + TLSError.drainOpenSSLErrors()
        }
        if let extraCAFile, SSL_CTX_load_verify_locations(context, extraCAFile, nil) != 1 {
            return "cannot read CA certificates from \(extraCAFile) (PEM expected)" + TLSError.drainOpenSSLErrors()
        }
        guard handshakeSlot >= 0, SSL_CTX_set_ex_data(context, handshakeSlot, Unmanaged.passUnretained(handshake).toOpaque()) == 1 else {
            return "cannot attach to the TLS context" + TLSError.drainOpenSSLErrors()
        }
        SSL_CTX_set_info_callback(context) { ssl, event, _ in
            guard event & SSL_CB_HANDSHAKE_DONE != 0, let ssl, let context = SSL_get_SSL_CTX(ssl),
                  let pointer = SSL_CTX_get_ex_data(context, TLSConnectionSetup.handshakeSlot)
            else { return }
            var data: UnsafePointer<UInt8>?
            var length: UInt32 = 0
            SSL_get0_alpn_selected(ssl, &data, &length)
            Unmanaged<Handshake>.fromOpaque(pointer).takeUnretainedValue().negotiatedProtocol =
                data.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self) }
        }
        return nil
    }
}
