/* The audit log: one JSON object a line in <workspace>/audit/audit.log, hash-chained
 * (prev/hash), optionally keyed with HMAC, appended whole under flock by many processes. */
#ifndef RX_AUDIT_H
#define RX_AUDIT_H

#include <stdio.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "redact.h"
#include "rexec.h"

typedef struct rx_audit rx_audit;

/* Opens (creating dir 0700 / file 0600 whatever the umask) the audit log of the workspace at
 * ws_dir. key_file: an HMAC key kept outside the workspace, or NULL for a plain SHA-256 chain.
 * Refuses a symlinked or group/world-writable audit dir, file or key (REXEC_EAUDIT or
 * REXEC_ECONFIG, naming the path). */
int rx_audit_open(rx_audit **out, const char *ws_dir, const char *key_file, rexec_error *err);
void rx_audit_close(rx_audit *a); /* NULL is fine */

/* Appends rec (an object holding the docs/audit.md fields except prev and hash, which are added here):
 * under an exclusive flock, reads the chain head, writes the line with ONE write() (short writes
 * handled), fsyncs. Before writing, r (may be NULL) scans the line: a line still holding a
 * handed-out secret is refused. Returns 0 or REXEC_EAUDIT with err->msg saying why (disk full,
 * read-only, secret found...); on failure nothing partial remains in the log. */
int rx_audit_append(rx_audit *a, cJSON *rec, const rx_redactor *r, rexec_error *err);

/* ---- Added with the implementation (docs/audit.md has the format and the exact hash) ------- */

#define RX_AUDIT_HEX_LEN 65                  /* a SHA-256 / HMAC-SHA256 in hex, with the NUL */
#define RX_AUDIT_ROTATE_DEFAULT (64ull << 20) /* audit.log is rotated past 64 MiB */
#define RX_AUDIT_LINE_MAX (4u << 20)          /* a record longer than this is refused */
#define RX_AUDIT_TS_LEN 32

/* The rotation threshold: when a record would take audit.log past bytes, the file is renamed
 * audit-<UTC time>.log under the lock and a new audit.log continues the chain. 0 disables
 * rotation. rx_audit_open takes $REXEC_AUDIT_ROTATE_BYTES when set, else the default. */
void rx_audit_set_rotate_size(rx_audit *a, unsigned long long bytes);

/* Now, in the form of the "ts" field: "2026-12-02T10:15:00.123Z". rx_audit_append adds a "ts"
 * of this form to a record that has none. */
void rx_audit_timestamp(char out[RX_AUDIT_TS_LEN]);

/* rx_audit_verify's results (also `rexec audit verify`'s exit codes). Tampering outranks a
 * missing outcome. Errors that stop the check are negative: REXEC_ECONFIG (a key refused),
 * REXEC_EAUDIT (an audit file cannot be read), REXEC_ENOMEM. */
enum {
    RX_AUDIT_VERIFY_OK = 0,         /* every line whole, hashed and chained; every intent closed */
    RX_AUDIT_VERIFY_TAMPERED = 1,   /* an edited, removed, reordered, truncated or foreign line */
    RX_AUDIT_VERIFY_INCOMPLETE = 2, /* the chain is intact but an intent has no outcome */
};

#define RX_AUDIT_VERIFY_JSON 1 /* flags: the report is one JSON object instead of text */

/* Checks the workspace's audit files: the rotated ones oldest first, then audit.log, as one
 * chain. key_file: the HMAC key the log was written with, or NULL. Writes what it finds to
 * report (may be NULL): each bad line as "audit/<file>:<line>: <what is wrong>", each intent
 * without outcome as a warning, then a summary. Returns an RX_AUDIT_VERIFY_* status or a
 * negative rexec_err with err->msg. Takes the append lock only long enough to see a consistent
 * end of the log, so it never blocks writers for the length of the check. */
int rx_audit_verify(const char *ws_dir, const char *key_file, FILE *report, rexec_error *err);
int rx_audit_verify_ex(const char *ws_dir, const char *key_file, int flags, FILE *report,
                       rexec_error *err);

/* What `rexec audit show` selects. */
typedef struct rx_audit_query {
    const char *run_id; /* only this run's records, or NULL */
    const char *host;   /* only records of this host, or NULL */
    const char *action; /* only records of this action, or NULL */
    time_t since;       /* only records at or after this time, when has_since */
    int has_since;
    int json;           /* print the raw JSON lines instead of a table */
} rx_audit_query;

/* Prints the records q selects, oldest first, to out: a table for people (time, run id, phase,
 * host, action, decision/reason, exit) or the stored lines unchanged. Does not verify (use
 * rx_audit_verify). Returns 0 or REXEC_EAUDIT naming the file that cannot be read. */
int rx_audit_show(const char *ws_dir, const rx_audit_query *q, FILE *out, rexec_error *err);

/* Parses a --since TIME: ISO-8601 ("2026-12-02T10:00:00Z", "2026-12-02T10:00:00+01:00",
 * "2026-12-02") or an age before now ("90s", "30m", "1h", "2d", "1w"). 0 or -1. */
int rx_audit_parse_time(const char *s, time_t now, time_t *out);

/* Internal, shared by audit.c and audit_verify.c. */

/* Loads an HMAC key: refused (REXEC_ECONFIG, naming the path) when it is a symlink, group- or
 * world-readable or -writable, inside ws_dir, shorter than 16 bytes or longer than 4096. One
 * trailing newline is not part of the key. key must be initialised; it is wiped on free. */
int rx_audit_key_load(const char *key_file, const char *ws_dir, rx_buf *key, rexec_error *err);
/* hex = HMAC-SHA256(key, data) when key holds bytes, else SHA-256(data). 0 or -1. */
int rx_audit_digest(const rx_buf *key, const void *data, size_t len, char hex[RX_AUDIT_HEX_LEN]);
/* The hash a stored line ends with (line without its newline). 0, or -1 when the line does
 * not end with ,"hash":"<64 lowercase hex>"} */
int rx_audit_line_hash(const char *line, size_t len, char hex[RX_AUDIT_HEX_LEN]);
/* The rotated files in audit_dir (audit-<time>.log), oldest first; the caller frees each
 * name and the array. A missing directory is an empty list. */
int rx_audit_rotated(const char *audit_dir, char ***names, size_t *n, rexec_error *err);
void rx_audit_names_free(char **names, size_t n);
/* The time in a rotated file's name (when it was rotated, so after its last record); 0 when the
 * name holds none. */
time_t rx_audit_rotated_time(const char *name);

/* ---- Grants (audit_grants.c) ------------------------------------------------------------- */

/* Sets *used when a record shows a call that ran on grant_id (reason ALLOW_GRANT, "grant_id"
 * equal): the proof a grant is spent that a rewritten approvals/ cannot undo. Files rotated
 * before since (the grant's creation) are not read. 0, or REXEC_EAUDIT when a file cannot be
 * read. A missing log holds no use. */
int rx_audit_grant_used(const char *ws_dir, const char *grant_id, time_t since, int *used,
                        rexec_error *err);

/* ---- Retention (audit_prune.c, docs/audit.md "Retention") -------------------------------- */

typedef struct rx_audit_prune_stats {
    size_t files, records; /* rotated files removed, and the records they held */
} rx_audit_prune_stats;

/* Removes the rotated audit files older than before (a prefix in which every intent has its
 * outcome), after appending a "prune" record and writing audit/anchor.json, through which
 * rx_audit_verify checks the rest. key_file as for rx_audit_open. 0 or REXEC_EAUDIT. */
int rx_audit_prune(const char *ws_dir, const char *key_file, time_t before,
                   rx_audit_prune_stats *st, rexec_error *err);
/* audit/anchor.json parsed (NULL when there is none), and whether it names a file. */
int rx_audit_anchor_load(const char *ws_dir, cJSON **out, rexec_error *err);
int rx_audit_anchor_names(const cJSON *anchor, const char *name);
/* Whether the anchor lists run_id among the runs whose intent was pruned before its outcome. */
int rx_audit_anchor_open(const cJSON *anchor, const char *run_id);

#endif
