/* Evidence per executed run: <workspace>/evidence/<run_id>/{stdout,stderr,meta.json}. The
 * directory has its final name from the open on (locked by its writer until the commit or abort);
 * it is evidence once meta.json is complete, and vouched for by the outcome record that names it
 * (appended after the commit). A crash leaves no directory taken for evidence with half a record
 * (docs/audit.md, "Evidence"). */
#ifndef RX_EVIDENCE_H
#define RX_EVIDENCE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "redact.h"
#include "rexec.h"

#define RX_RUN_ID_LEN 40 /* including the NUL */

/* A new run id, unique even for two calls in the same instant with the same output:
 * "20261202T101500Z-<16 hex random>" style (time sorts, OpenSSL RAND_bytes makes it unique). */
void rx_run_id_new(char out[RX_RUN_ID_LEN]);

/* Evidence written as the output arrives (call.c): open before the run, append the redacted,
 * capped streams piece by piece (a fixed buffer per stream, each flush scanned by r for a
 * handed-out secret first), then commit (meta.json, the files' fsyncs; the directory's name was
 * made durable off the call's path since the open, the commit waits for it) or abort (the
 * directory is removed). Memory stays fixed whatever the output size. */
typedef struct rx_evidence rx_evidence;

int rx_evidence_open(rx_evidence **out, const char *ws_dir, const char *run_id,
                     const rx_redactor *r, rexec_error *err);
/* stream 0 = stdout, 1 = stderr. A failure is kept and reported by rx_evidence_commit. */
void rx_evidence_append(rx_evidence *ev, int stream, const void *data, size_t len);
/* meta is completed with the stored sizes and the streams' SHA-256 (hex, of what was appended,
 * kept by the caller); ev is freed whatever the outcome. */
int rx_evidence_commit(rx_evidence *ev, cJSON *meta, const char *const sha_hex[2],
                       char **path_out, rexec_error *err);
void rx_evidence_abort(rx_evidence *ev); /* NULL is fine */
/* A spare evidence directory (evidence.c): made for the evidence/ of the last commit, once a
 * process has committed twice, so that the next rx_evidence_open renames it instead of making
 * four new inodes on the call's path. Fill runs off the call's path (the recorder, after its
 * calls are told); drop removes the spare (the recorder's close). Both thread-safe. */
void rx_evidence_spare_fill(void);
void rx_evidence_spare_drop(void);
/* What the commits of this process synced and how: fsyncs done by the helper thread, side by
 * side with the committing thread's (evidence.c), and directories synced at a commit (not a
 * synced spare's). For the tests. */
void rx_evidence_sync_counts(unsigned long *by_helper, unsigned long *dirs_at_commit);
/* More of the same, for the tests: directory fsyncs at commits (the run's directory, evidence/:
 * only when the dirsync thread could not be started) and the dirsync thread's fsyncs (the name's
 * and the directory's, off the call's path). */
typedef struct rx_evidence_counts {
    unsigned long by_helper, dirs_at_commit, parents_at_commit, early_syncs;
} rx_evidence_counts;
void rx_evidence_counts_get(rx_evidence_counts *c);

/* The evidence's directory, under its final name from the open on: <workspace>/evidence/<run_id>
 * (complete once committed). */
const char *rx_evidence_path(const rx_evidence *ev);

/* Writes the evidence of one run in one go (open, append, commit). out/err are the redacted, capped streams; meta is completed
 * here with sizes and sha256 of what is stored. r (may be NULL) scans everything first: a file
 * that would still hold a handed-out secret is refused (REXEC_EAUDIT) and nothing is written.
 * On success *path_out (malloc'd, caller frees; may be NULL) is the final directory. */
int rx_evidence_write(const char *ws_dir, const char *run_id, const unsigned char *out,
                      size_t out_len, const unsigned char *err_data, size_t err_len, cJSON *meta,
                      const rx_redactor *r, char **path_out, rexec_error *err);

#endif
