#ifndef PUSHFAN_CSQLITE_SHIM_H
#define PUSHFAN_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer: Swift cannot import it. */
static inline sqlite3_destructor_type pushfan_sqlite_transient(void) { return SQLITE_TRANSIENT; }

/* sqlite3_config is variadic, which Swift cannot call. Memory statistics take a global
   mutex on every allocation; Pushfan never reads them. Must run before the first open. */
static inline int pushfan_sqlite_disable_memstatus(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

#endif
