#ifndef PUSHFAN_CMICROHTTPD_SHIM_H
#define PUSHFAN_CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <string.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/* MHD_start_daemon and MHD_get_connection_info are variadic: Swift cannot call them. */

/* One internal epoll thread, suspend/resume for handlers that answer later, bounded
   connections, memory per connection (headers beyond it are refused with 431) and an idle
   timeout. Port 0 picks a free one (read it back with pushfan_mhd_port). */
static inline struct MHD_Daemon *pushfan_mhd_start(
    uint16_t port, int loopback_only, MHD_AccessHandlerCallback handler, void *handler_cls,
    MHD_RequestCompletedCallback completed, void *completed_cls,
    unsigned int connection_limit, unsigned int timeout_s, size_t memory_limit) {
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
    return MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME,
        port, NULL, NULL, handler, handler_cls,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
        MHD_OPTION_END);
}

static inline uint16_t pushfan_mhd_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/* The client's IP address as text ("" when unknown). */
static inline void pushfan_mhd_client_address(struct MHD_Connection *connection, char *out, size_t size) {
    out[0] = 0;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr) return;
    const struct sockaddr *address = info->client_addr;
    if (address->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, out, (socklen_t)size);
    } else if (address->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, out, (socklen_t)size);
    }
}

/* Closed C enums import under names that differ between Swift versions; these keep one. */
static inline enum MHD_Result pushfan_mhd_yes(void) { return MHD_YES; }
static inline enum MHD_Result pushfan_mhd_no(void) { return MHD_NO; }
static inline enum MHD_ValueKind pushfan_mhd_header_kind(void) { return MHD_HEADER_KIND; }
static inline enum MHD_ValueKind pushfan_mhd_query_kind(void) { return MHD_GET_ARGUMENT_KIND; }
static inline struct MHD_Response *pushfan_mhd_response_copy(size_t size, const void *data) {
    return MHD_create_response_from_buffer(size, (void *)data, MHD_RESPMEM_MUST_COPY);
}
/* A body of unknown length (sent chunked), read from `reader` as it is written. */
static inline struct MHD_Response *pushfan_mhd_response_stream(
    MHD_ContentReaderCallback reader, void *cls, MHD_ContentReaderFreeCallback release) {
    return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, cls, release);
}
static inline ssize_t pushfan_mhd_end_of_stream(void) { return MHD_CONTENT_READER_END_OF_STREAM; }

#endif
