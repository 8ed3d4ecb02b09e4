/* Retention of evidence: `rexec evidence prune` (docs/audit.md, "Retention"). */
#ifndef RX_EVIDENCE_PRUNE_H
#define RX_EVIDENCE_PRUNE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "rexec.h"

typedef struct rx_evidence_prune_stats {
    size_t removed, kept;
    size_t incomplete; /* leftovers removed: incomplete, .tmp-, .spare- (not runs) */
    uint64_t bytes_freed;
} rx_evidence_prune_stats;

/* What an entry of evidence/ is (docs/audit.md, "Evidence"): the evidence of a run only when its
 * meta.json is complete (names the run, both streams' SHA-256 and sizes, the files that long);
 * a directory whose writer still holds its lock is a call (or a spare) in progress; any other
 * (no or incomplete meta.json, a hidden .tmp-/.spare- directory) is a leftover of a crash or
 * failed commit, never evidence. On COMPLETE and INCOMPLETE, *lock_fd holds the directory's
 * lock (close it); NOT_A_DIR: the entry is no directory that can be opened; GONE: no such entry
 * (any more). */
typedef enum rx_evidence_dir_state {
    RX_EV_COMPLETE,
    RX_EV_INCOMPLETE,
    RX_EV_IN_PROGRESS,
    RX_EV_NOT_A_DIR,
    RX_EV_GONE,
} rx_evidence_dir_state;
rx_evidence_dir_state rx_evidence_dir_state_at(int evidence_dfd, const char *name, int *lock_fd);

/* Removes <ws_dir>/evidence/<run_id>/ directories of runs older than before (by the time in the
 * run id, else the directory's mtime), except the newest keep runs, and leftovers (incomplete,
 * .tmp-, .spare- directories) older than before whose writer is gone (not locked); a directory
 * in progress (locked) stays. Returns 0 or REXEC_EAUDIT naming what could not be removed. */
int rx_evidence_prune(const char *ws_dir, time_t before, size_t keep, rx_evidence_prune_stats *st,
                      rexec_error *err);

#endif
