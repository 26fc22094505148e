internal import CCurl

/// The global init libcurl needs once per process before any other call.
enum Curl {
    /// `curl_global_init` runs once, before the first handle is made (Swift runs a
    /// static `let` initializer exactly once, thread-safely).
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}

/// Options set on one easy handle, remembering the first one libcurl refused (so a run of
/// settings is checked once at its end), with the TLS settings both kinds of APNs transfer
/// share.
struct CurlOptions {
    let easy: UnsafeMutableRawPointer
    /// The first option libcurl refused; nil while all were taken.
    private(set) var failed: String?

    init(_ easy: UnsafeMutableRawPointer) { self.easy = easy }

    mutating func set(_ option: CURLoption, _ value: Int) {
        if failed == nil, pushfan_curl_easy_setopt_long(easy, option, value) != CURLE_OK { failed = "\(option)" }
    }

    mutating func set(_ option: CURLoption, _ value: String) {
        if failed == nil, value.withCString({ pushfan_curl_easy_setopt_pointer(easy, option, $0) }) != CURLE_OK { failed = "\(option)" }
    }

    /// TLS 1.2 or later; no verification when `verifyPeer` is off (throwaway servers only);
    /// the client certificate for certificate auth.
    mutating func tls(verifyPeer: Bool, credentials: APNsCredentials) {
        set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        if !verifyPeer {
            set(CURLOPT_SSL_VERIFYPEER, 0)
            set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        if case .certificate(let certificate) = credentials {
            set(CURLOPT_SSLCERT, certificate.certificateFile)
            set(CURLOPT_SSLCERTTYPE, certificate.format.rawValue)
            if let keyFile = certificate.keyFile { set(CURLOPT_SSLKEY, keyFile) }
            if let password = certificate.password { set(CURLOPT_KEYPASSWD, password) }
        }
    }
}
