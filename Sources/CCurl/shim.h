#ifndef PUSHFAN_CCURL_SHIM_H
#define PUSHFAN_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic: Swift calls them through these
   typed wrappers. */
static inline CURLcode pushfan_curl_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode pushfan_curl_easy_setopt_pointer(CURL *easy, CURLoption option, const void *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode pushfan_curl_easy_setopt_ssl_ctx(CURL *easy, curl_ssl_ctx_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, callback);
}
static inline CURLcode pushfan_curl_easy_getinfo_socket(CURL *easy, CURLINFO info, curl_socket_t *socket) {
    return curl_easy_getinfo(easy, info, socket);
}
static inline CURLcode pushfan_curl_easy_setopt_callback(CURL *easy, CURLoption option, curl_write_callback callback) {
    return curl_easy_setopt(easy, option, callback);
}
static inline CURLcode pushfan_curl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline curl_socket_t pushfan_curl_socket_bad(void) { return CURL_SOCKET_BAD; }
#endif
