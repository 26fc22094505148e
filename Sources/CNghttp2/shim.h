#ifndef PUSHFAN_CNGHTTP2_SHIM_H
#define PUSHFAN_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>

/* One settings entry, so Swift need not build the C array by hand. */
static inline int pushfan_nghttp2_submit_max_streams(nghttp2_session *session, uint32_t value) {
    nghttp2_settings_entry entry = { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, value };
    return nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, &entry, 1);
}
#endif
