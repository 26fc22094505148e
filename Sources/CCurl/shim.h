#ifndef PUSHFAN_CCURL_SHIM_H
#define PUSHFAN_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic: Swift
   calls them through these typed wrappers. */
static inline CURLcode pushfan_curl_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode pushfan_curl_easy_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode pushfan_curl_easy_setopt_pointer(CURL *easy, CURLoption option, const void *value) {
    return curl_easy_setopt(easy, option, value);
}
typedef size_t (*pushfan_curl_data_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode pushfan_curl_easy_setopt_data_callback(CURL *easy, CURLoption option, pushfan_curl_data_callback callback) {
    return curl_easy_setopt(easy, option, callback);
}
static inline CURLcode pushfan_curl_easy_setopt_opensocket(CURL *easy, curl_opensocket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback);
}
static inline CURLcode pushfan_curl_easy_setopt_closesocket(CURL *easy, curl_closesocket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, callback);
}
static inline CURLcode pushfan_curl_easy_getinfo_socket(CURL *easy, CURLINFO info, curl_socket_t *socket) {
    return curl_easy_getinfo(easy, info, socket);
}
static inline curl_socket_t pushfan_curl_socket_bad(void) { return CURL_SOCKET_BAD; }
static inline CURLcode pushfan_curl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode pushfan_curl_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLMcode pushfan_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/* CURLMsg keeps the transfer's result in a union. */
static inline CURLcode pushfan_curl_msg_result(const CURLMsg *message) { return message->data.result; }
#endif
