#ifndef PUSHFAN_CEPOLL_SHIM_H
#define PUSHFAN_CEPOLL_SHIM_H
/* Linux event-loop calls that Swift's Glibc module does not export. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>
#endif
