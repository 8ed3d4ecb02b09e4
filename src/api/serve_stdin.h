/* A serve request's stdin as it streams in (docs/serve-protocol.md, "Streaming stdin"): the
 * chunks go into an unlinked file in the workspace's evidence/ directory, never into memory, and
 * the calls read it back like `rexec run --stdin FILE`. It is spooled whole before any call
 * starts because a call sends its stdin's length first (the remote contract) and an approval
 * binds its SHA-256, both known only once the last byte is in. Private to src/api. */
#ifndef RX_SERVE_STDIN_H
#define RX_SERVE_STDIN_H

#include <stddef.h>
#include <stdint.h>

#include "rexec.h"

typedef struct rx_spool {
    int fd;        /* -1 when closed */
    char path[40]; /* "/proc/self/fd/N": what the calls open (the file has no name) */
    uint64_t len;  /* bytes taken so far */
    uint64_t max;  /* limits.max_stdin_bytes */
} rx_spool;

void rx_spool_init(rx_spool *sp);

/* A new empty spool in ws_dir/evidence (created 0700 when missing): O_TMPFILE, or a mkstemp name
 * unlinked at once where the file system lacks it. 0, or REXEC_EAUDIT naming the directory. */
int rx_spool_open(rx_spool *sp, const char *ws_dir, uint64_t max, rexec_error *err);

/* Appends n bytes. REXEC_EREQUEST when they would take it past max (nothing is written),
 * REXEC_EAUDIT when the write fails (disk full, I/O error), naming why. */
int rx_spool_add(rx_spool *sp, const void *data, size_t n, rexec_error *err);

/* Closes the file; its blocks are freed once the calls that read it have closed theirs. */
void rx_spool_close(rx_spool *sp);

#endif
