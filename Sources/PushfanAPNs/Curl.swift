internal import CCurl

/// The global init libcurl needs once per process before any other call.
enum Curl {
    /// `curl_global_init` runs once, before the first handle is made (Swift runs a
    /// static `let` initializer exactly once, thread-safely).
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}
