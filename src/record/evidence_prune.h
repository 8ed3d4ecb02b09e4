/* Retention of evidence: `rexec evidence prune` (docs/audit.md, "Retention"). */
#ifndef RX_EVIDENCE_PRUNE_H
#define RX_EVIDENCE_PRUNE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "rexec.h"

typedef struct rx_evidence_prune_stats {
    size_t removed, kept;
    uint64_t bytes_freed;
} rx_evidence_prune_stats;

/* Removes <ws_dir>/evidence/<run_id>/ directories of runs older than before (by the time in the
 * run id, else the directory's mtime), except the newest keep runs, and leftover .tmp- build
 * directories older than before. Returns 0 or REXEC_EAUDIT naming what could not be removed. */
int rx_evidence_prune(const char *ws_dir, time_t before, size_t keep, rx_evidence_prune_stats *st,
                      rexec_error *err);

#endif
