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

/* rx_audit_append in two steps, for a writer that shares one fsync between records (group
 * commit, api/recorder.c). rx_audit_render checks, prints and scans rec as rx_audit_append does
 * (*text: malloc'd, the caller frees). rx_audit_append_texts appends n rendered records in their
 * order under one lock, with one write and one fsync (all of them or none), then one head. Not
 * thread-safe on one rx_audit (the caller serialises); other processes are kept out by flock. */
#define RX_AUDIT_BATCH_MAX 64
int rx_audit_render(const cJSON *rec, const rx_redactor *r, char **text, rexec_error *err);
int rx_audit_append_texts(rx_audit *a, char *const *texts, size_t n, rexec_error *err);

/* rx_audit_append_texts in two steps, so a writer can acknowledge records as soon as they are
 * durable and update the head after (api/recorder.c). begin: the lock, the checks, one write
 * and the log's fsync; on success the records are durable and p holds the lock and what the
 * head must name; on failure nothing is held and nothing partial remains. end: the head
 * (rewritten in place, rx_audit_head_update), then the lock is released; it always releases.
 * A head that cannot be written leaves it behind the log, which is a state appends and verify
 * accept; the next append retries it and, if it fails again, is refused (REXEC_EAUDIT) when it
 * holds intents only (an outcome still goes in). */
typedef struct rx_audit_pending {
    int lock_fd;
    long long seq;   /* the last record's */
    char hash[65];
} rx_audit_pending;
int rx_audit_append_begin(rx_audit *a, char *const *texts, size_t n, rx_audit_pending *p,
                          rexec_error *err);
int rx_audit_append_end(rx_audit *a, rx_audit_pending *p, rexec_error *err);
/* rx_audit_append_end with the head's fdatasync left for later, out of the lock (the lock is
 * released after the head's write): *sync_fd for rx_audit_append_sync, or -1. A later head's
 * sync covers an earlier head that was never synced (the same file and page): closing
 * *sync_fd without syncing is fine when another head follows. */
int rx_audit_append_end_write(rx_audit *a, rx_audit_pending *p, int *sync_fd, rexec_error *err);
/* The head's fdatasync for rx_audit_append_end_write, out of the lock and of the caller's
 * serialisation (it touches nothing of a but its directory's name). When it fails, the
 * caller marks the head behind (rx_audit_head_is_behind, serialised like an append): the next
 * append retries it first. */
int rx_audit_append_sync(const rx_audit *a, int sync_fd, rexec_error *err);
void rx_audit_head_is_behind(rx_audit *a);

/* ---- Added with the implementation (docs/audit.md has the format and the exact hash) ------- */

#define RX_AUDIT_HEX_LEN 65                  /* a SHA-256 / HMAC-SHA256 in hex, with the NUL */
/* The prev of the first record of a chain, and the hash of an empty one. */
#define RX_AUDIT_ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
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
/* shipped: a head kept elsewhere (`rexec audit head`) that the chain must still hold, or NULL.
 * audit/head.json is always checked. */
typedef struct rx_audit_head rx_audit_head;
int rx_audit_verify_ex(const char *ws_dir, const char *key_file, int flags,
                       const rx_audit_head *shipped, FILE *report, rexec_error *err);

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

/* ---- The head (audit_head.c, docs/audit.md "The head") ------------------------------------ */

/* Every record carries "seq" (1 for the first record of the chain, +1 each append) just before
 * "prev". audit/head.json holds the last record's seq and hash, with a mac: HMAC-SHA256 with
 * the audit key (plain SHA-256 for an unkeyed log) over "rexec-audit-head-v1 <seq> <hash>".
 * It is replaced under the append lock after every append; a copy shipped elsewhere
 * (`rexec audit head`) lets `audit verify --head` catch a cut, a removed file or a rollback. */
struct rx_audit_head {
    long long seq; /* 0: no head */
    char hash[RX_AUDIT_HEX_LEN];
    char ts[RX_AUDIT_TS_LEN];
    char mac[RX_AUDIT_HEX_LEN];
    int keyed;
};

/* What the last line of the chain says: its hash, its prev and its seq (-1 for a line written
 * before sequence numbers, 0 for an empty chain). */
typedef struct rx_audit_tail {
    char hash[RX_AUDIT_HEX_LEN];
    char prev[RX_AUDIT_HEX_LEN]; /* "" when not found where it belongs */
    long long seq;
} rx_audit_tail;

#define RX_AUDIT_HEAD_FILE "head.json"

/* The tail of a line (without its newline; at least its last RX_AUDIT_TAIL_BYTES bytes, or the
 * whole line): 0, or -1 when it does not end with a hash. */
#define RX_AUDIT_TAIL_BYTES 256
int rx_audit_tail_parse(const char *s, size_t n, rx_audit_tail *t);
/* The end of the chain in audit_dir (audit.log, or the newest rotated file when audit.log is
 * missing or empty): t->seq 0 and 64 zeros for an empty chain. The caller holds the lock. */
int rx_audit_chain_tail(const char *audit_dir, rx_audit_tail *t, rexec_error *err);

int rx_audit_head_mac(const rx_buf *key, long long seq, const char *hash,
                      char mac[RX_AUDIT_HEX_LEN]);
/* Parses a head from JSON text ({"seq","hash","mac",...}); code (REXEC_EUSAGE for a head
 * given by hand, REXEC_EAUDIT for head.json) with a message that starts with what. */
int rx_audit_head_parse(const char *text, size_t len, const char *what, int code,
                        rx_audit_head *h, rexec_error *err);
/* Reads audit_dir/head.json: *h->seq 0 when there is none. REXEC_EAUDIT when it is unreadable
 * or not a head. */
int rx_audit_head_load(const char *audit_dir, rx_audit_head *h, rexec_error *err);
/* Replaces audit_dir/head.json (tmp + fdatasync + rename) with seq/hash. Under the lock. */
int rx_audit_head_store(const char *audit_dir, const rx_buf *key, long long seq,
                        const char *hash, rexec_error *err);
/* What an append does to head.json: the head written over the file's first bytes in place,
 * padded with blanks to RX_AUDIT_HEAD_SIZE bytes, and fdatasynced (no new file, no rename:
 * one sector written, like PostgreSQL's pg_control, whose 512-byte writes are taken to be
 * atomic). Falls back to rx_audit_head_store when there is no head.json yet or it is not a
 * regular file of at most one sector. Under the lock. */
#define RX_AUDIT_HEAD_SIZE 512
int rx_audit_head_update(const char *audit_dir, const rx_buf *key, long long seq,
                         const char *hash, rexec_error *err);
/* rx_audit_head_update in two steps, so the lock can be let go before the fdatasync. write:
 * the pwrite under the lock; *sync_fd is the file to sync (-1 when there is nothing left to
 * sync: the fallback store is durable when it returns). sync: its fdatasync, then closes it
 * (fd -1: 0). Safe outside the lock: the page holds this head or a newer one, never one
 * ahead of durable records, and a head not yet synced is at worst behind after a crash. */
int rx_audit_head_write(const char *audit_dir, const rx_buf *key, long long seq,
                        const char *hash, int *sync_fd, rexec_error *err);
int rx_audit_head_sync(const char *audit_dir, int fd, rexec_error *err);
/* Before an append, under the lock: the stored head must agree with the chain's end t (see
 * docs/audit.md); REXEC_EAUDIT saying what disagrees, with the way out. */
int rx_audit_head_check(const char *audit_dir, const rx_buf *key, const rx_audit_tail *t,
                        rexec_error *err);
/* rx_audit_head_check for an append, which also writes the head of nothing (seq 0) when there
 * is no head.json and no numbered record yet, before the first one is written. */
int rx_audit_head_prepare(const char *audit_dir, const rx_buf *key, const rx_audit_tail *t,
                          rexec_error *err);
/* For readers: flock on audit_dir/.lock, shared or exclusive, so they see the files between
 * two appends. *fd -1 (and 0 returned) when there is no lock file: nothing was ever appended.
 * Closing *fd releases it. */
int rx_audit_dir_lock(const char *audit_dir, int exclusive, int *fd, rexec_error *err);
/* The head as one JSON line (malloc'd), as `rexec audit head` prints it. */
char *rx_audit_head_json(const rx_audit_head *h);

/* `rexec audit head`: the stored head, checked against the log's end and (with key_file) its
 * mac. With reset, the head is first rewritten from the log's end and a "head_reset" record is
 * appended, for after an operator has looked at why they disagreed. 0 or REXEC_EAUDIT. */
int rx_audit_head_current(const char *ws_dir, const char *key_file, int reset,
                          rx_audit_head *out, rexec_error *err);

/* Copies every appended line to a syslog socket (a datagram in the local /dev/log format,
 * ident "rexec-audit", facility authpriv), so a second system keeps the tail. NULL turns it
 * off. A copy that cannot be sent does not fail the append; rx_audit_copy_failures counts. */
int rx_audit_set_syslog(rx_audit *a, const char *socket_path, rexec_error *err);
unsigned long rx_audit_copy_failures(const rx_audit *a);

/* ---- Writers and recovery (audit.c, audit_recover.c; docs/audit.md "Recovering") ------- */

/* Each process that writes intents holds an flock on audit/writers/<id>.lock for as long as
 * its handle lives, and names <id> in those intents ("writer"). */
#define RX_AUDIT_WRITERS_DIR "writers"
char *rx_audit_writer_path(const char *audit_dir, const char *id);

/* An intent without its outcome (or abandoned record): the record, and where it is. */
typedef struct rx_audit_open_intent {
    cJSON *rec;
    char where[192]; /* "audit/audit.log:12" */
    size_t order;    /* its place among the intents: log order */
} rx_audit_open_intent;
/* Every open intent of the workspace's log, oldest first (*out malloc'd, may be NULL). */
int rx_audit_open_intents(const char *ws_dir, rx_audit_open_intent **out, size_t *n,
                          rexec_error *err);
void rx_audit_open_intents_free(rx_audit_open_intent *v, size_t n);

/* `rexec audit recover`: appends an "abandoned" record for each open intent whose writer is
 * gone (its lock in audit/writers/ is free, or its lock file was removed by a clean close),
 * and, with RX_AUDIT_RECOVER_UNREGISTERED, for intents that name no writer (written before
 * writers were registered). Intents of a live writer stay open. Refuses (returns
 * RX_AUDIT_VERIFY_TAMPERED) a log that does not verify. Returns RX_AUDIT_VERIFY_OK when no
 * intent is left open, RX_AUDIT_VERIFY_INCOMPLETE when some are, or a negative rexec_err. */
#define RX_AUDIT_RECOVER_UNREGISTERED 1
#define RX_AUDIT_RECOVER_JSON 2
typedef struct rx_audit_recover_stats {
    size_t abandoned, kept;
} rx_audit_recover_stats;
int rx_audit_recover(const char *ws_dir, const char *key_file, int flags,
                     rx_audit_recover_stats *st, FILE *report, rexec_error *err);

/* ---- Grants (audit_grants.c) ------------------------------------------------------------- */

/* Sets *used when a record shows a call that ran on grant_id (reason ALLOW_GRANT, "grant_id"
 * equal): the proof a grant is spent that a rewritten approvals/ cannot undo. Files rotated
 * before since (the grant's creation) are not read. 0, or REXEC_EAUDIT when a file cannot be
 * read. A missing log holds no use. host: only a use on that host counts (a fan-out grant
 * serves each of its hosts once); NULL: any. */
int rx_audit_grant_used(const char *ws_dir, const char *grant_id, const char *host, time_t since,
                        int *used, rexec_error *err);

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
