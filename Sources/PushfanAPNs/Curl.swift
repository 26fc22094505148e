internal import CCurl

/// The one place libcurl return codes become errors, and the global init libcurl
/// needs once per process before any other call.
enum Curl {
    /// `curl_global_init` runs once, before the first handle is made (Swift runs a
    /// static `let` initializer exactly once, thread-safely).
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    static func check(_ code: CURLcode, _ call: String) throws(APNsSenderError) {
        guard code != CURLE_OK else { return }
        throw .libcurl(call, String(cString: curl_easy_strerror(code)))
    }

    static func check(_ code: CURLMcode, _ call: String) throws(APNsSenderError) {
        guard code != CURLM_OK else { return }
        throw .libcurl(call, String(cString: curl_multi_strerror(code)))
    }
}
