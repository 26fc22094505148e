#ifndef PUSHFAN_CLIBPQ_SHIM_H
#define PUSHFAN_CLIBPQ_SHIM_H
#include <libpq-fe.h>

/* PG_DIAG_SQLSTATE is a character-literal macro. */
static inline int pushfan_pq_diag_sqlstate(void) { return PG_DIAG_SQLSTATE; }
#endif
