#ifndef PUSHFAN_CEPOLL_SHIM_H
#define PUSHFAN_CEPOLL_SHIM_H
/* Linux event-loop calls that Swift's Glibc module does not export. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/tcp.h>

/* accept4 needs _GNU_SOURCE, which Swift's Glibc module does not define. */
int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);
static inline int pushfan_accept_nonblocking(int listener) {
    return accept4(listener, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif
