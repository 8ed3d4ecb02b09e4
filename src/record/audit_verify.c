/* The audit log reader: `rexec audit verify` (chain, hashes, intents without outcome) and
 * `rexec audit show`. The format is defined in audit.c and docs/audit.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "err.h"
#include "fsutil.h"
#include "jsonx.h"

#define SUFFIX_LEN (9 + 64 + 2)    /* ,"hash":"<64 hex>"} */
#define MAX_SHOWN 100              /* problems printed before "... and N more" */
#define PEND_BUCKETS 4096

/* ---- Walking the files: a consistent snapshot, then line by line ------------------------ */

/* What to read: the rotated files by name (never written again) and audit.log by a descriptor
 * opened under the lock, up to the size it had then, so a writer that appends or rotates
 * while we read cannot show us half a line. */
typedef struct head_snap {
    rx_audit_head h;
    int state; /* 0: no head.json, 1: read, -1: unreadable (msg says why) */
    char msg[256];
} head_snap;

typedef struct snapshot {
    char *dir;
    char **rotated;
    size_t n_rotated;
    int cur_fd; /* -1: no audit.log */
    off_t cur_size;
} snapshot;

static void snap_free(snapshot *s)
{
    if (s->cur_fd >= 0)
        close(s->cur_fd);
    rx_audit_names_free(s->rotated, s->n_rotated);
    free(s->dir);
}

static int snap_current(snapshot *s, rexec_error *err)
{
    char *path = rx_fs_join(s->dir, "audit.log");
    struct stat st;
    int r = 0;
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    s->cur_fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (s->cur_fd < 0 && errno != ENOENT)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path,
                    errno == ELOOP ? "is a symbolic link" : strerror(errno));
    else if (s->cur_fd >= 0 && fstat(s->cur_fd, &st) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    else if (s->cur_fd >= 0)
        s->cur_size = st.st_size;
    free(path);
    return r;
}

/* head.json as it stood with the files: an unreadable one is a finding, not a stop, unless
 * this process could not read it (no descriptor or memory left, an I/O error): that says
 * nothing about the log and must not be reported as tampering. */
static int snap_head(const snapshot *s, head_snap *hs, rexec_error *err)
{
    rexec_error e = {0};
    memset(hs, 0, sizeof(*hs));
    errno = 0;
    if (rx_audit_head_load(s->dir, &hs->h, &e) != 0) {
        int sys = errno;
        if (sys == EMFILE || sys == ENFILE || sys == ENOMEM || sys == EIO || sys == EINTR)
            return rx_fail(err, REXEC_EAUDIT, "%.400s", e.msg);
        hs->state = -1;
        snprintf(hs->msg, sizeof(hs->msg), "%.255s", e.msg);
    } else {
        hs->state = hs->h.mac[0] != 0;
    }
    return 0;
}

static int snap_take(const char *ws_dir, snapshot *s, head_snap *hs, rexec_error *err)
{
    struct stat st;
    int lock_fd = -1, r;

    memset(s, 0, sizeof(*s));
    s->cur_fd = -1;
    if ((s->dir = rx_fs_join(ws_dir, "audit")) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (lstat(s->dir, &st) != 0)
        return errno == ENOENT ? 0 : rx_fail(err, REXEC_EAUDIT, "%s: %s", s->dir, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return rx_fail(err, REXEC_EAUDIT, "%s: is a symbolic link: refusing to use it", s->dir);
    if ((r = rx_audit_dir_lock(s->dir, 0, &lock_fd, err)) != 0)
        goto out;
    if ((r = rx_audit_rotated(s->dir, &s->rotated, &s->n_rotated, err)) != 0)
        goto out;
    r = snap_current(s, err);
    if (r == 0 && hs != NULL)
        r = snap_head(s, hs, err);
out:
    if (lock_fd >= 0)
        close(lock_fd); /* writers may go on: what we read is fixed now */
    return r;
}

typedef struct lreader {
    int fd;
    off_t left; /* bytes of the snapshot not yet read */
    char blk[65536];
    size_t pos, end;
    rx_buf line;
    int too_long;
} lreader;

/* The next line into lr->line (without its newline). Returns 1 with *complete telling whether
 * it ended with a newline, 0 at the end, -1 on a read error (errno set). */
static int lr_next(lreader *lr, int *complete)
{
    lr->line.len = 0;
    lr->too_long = 0;
    for (;;) {
        if (lr->pos == lr->end) {
            size_t want = lr->left < (off_t)sizeof(lr->blk) ? (size_t)lr->left : sizeof(lr->blk);
            ssize_t n = want ? read(lr->fd, lr->blk, want) : 0;
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -1;
            if (n == 0) {
                *complete = 0;
                return lr->line.len > 0 || lr->too_long;
            }
            lr->left -= n;
            lr->pos = 0;
            lr->end = (size_t)n;
        }
        char *p = lr->blk + lr->pos, *nl = memchr(p, '\n', lr->end - lr->pos);
        size_t n = nl ? (size_t)(nl - p) : lr->end - lr->pos;
        if (!lr->too_long && rx_buf_add(&lr->line, p, n) != 0)
            lr->too_long = 1;
        lr->pos += n + (nl != NULL);
        if (nl != NULL) {
            *complete = 1;
            return 1;
        }
    }
}

/* Called with lineno 0 (and s NULL) when a file begins, then once per line. */
typedef void (*walk_fn)(void *ud, const char *file, size_t lineno, const char *s, size_t len,
                        int complete, int too_long);

static int walk_fd(int fd, off_t size, const char *file, walk_fn fn, void *ud, rexec_error *err)
{
    lreader *lr = calloc(1, sizeof(*lr));
    size_t lineno = 0;
    int complete = 0, r;

    if (lr == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    lr->fd = fd;
    lr->left = size;
    rx_buf_init(&lr->line, RX_AUDIT_LINE_MAX);
    fn(ud, file, 0, NULL, 0, 1, 0);
    while ((r = lr_next(lr, &complete)) == 1)
        fn(ud, file, ++lineno, lr->line.data ? (char *)lr->line.data : "", lr->line.len,
           complete, lr->too_long);
    if (r < 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: read: %s", file, strerror(errno));
    rx_buf_free(&lr->line);
    free(lr);
    return r;
}

static int walk_rotated(const snapshot *s, const char *name, walk_fn fn, void *ud,
                        rexec_error *err)
{
    char *path = rx_fs_join(s->dir, name), file[128];
    struct stat st;
    int r;
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    } else {
        snprintf(file, sizeof(file), "audit/%s", name);
        r = walk_fd(fd, st.st_size, file, fn, ud, err);
    }
    if (fd >= 0)
        close(fd);
    free(path);
    return r;
}

/* Every line of every audit file in chain order. *files counts the files. Files an anchor of
 * `audit prune` names (skip) are covered by it and not read (a crash may have left them). */
static int walk(const char *ws_dir, walk_fn fn, void *ud, size_t *files, const cJSON *skip,
                head_snap *hs, rexec_error *err)
{
    snapshot s;
    int r = snap_take(ws_dir, &s, hs, err);
    *files = 0;
    for (size_t i = 0; r == 0 && i < s.n_rotated; i++)
        if (!rx_audit_anchor_names(skip, s.rotated[i])) {
            r = walk_rotated(&s, s.rotated[i], fn, ud, err);
            (*files)++;
        }
    if (r == 0 && s.cur_fd >= 0) {
        r = walk_fd(s.cur_fd, s.cur_size, "audit/audit.log", fn, ud, err);
        (*files)++;
    }
    snap_free(&s);
    return r;
}

/* ---- Verify ----------------------------------------------------------------------------- */

/* A head to hold the chain against, and the hash found at its seq during the walk. */
typedef struct vhead {
    const char *name; /* where it came from, for the report */
    rx_audit_head h;
    int present, found;
    char found_hash[RX_AUDIT_HEX_LEN];
    const char *result; /* "ok", "failed", "unchecked", or NULL when not given */
} vhead;

/* An intent still waiting for its outcome. */
typedef struct pend {
    char *run_id;
    char *file;
    size_t line, seq;
    cJSON *rec; /* the intent itself, for recover's scan only */
    struct pend *next;
} pend;

static void pend_free(pend *p)
{
    free(p->run_id);
    free(p->file);
    cJSON_Delete(p->rec);
    free(p);
}

typedef struct vstate {
    const rx_buf *key;
    char prev[RX_AUDIT_HEX_LEN]; /* the hash the next line's prev must name */
    int prev_known;
    char prev_file[128]; /* the file the previous line was in */
    size_t prev_line, records, seq;
    int status, json, oom;
    size_t n_errors, n_warnings, n_abandoned;
    char first_bad[160];
    FILE *report;
    cJSON *errors, *warnings, *abandoned;
    rx_buf body;
    pend *pend[PEND_BUCKETS];
    const char *anchor; /* audit/anchor.json's hash: where the chain starts after a prune */
    const cJSON *anchor_doc;
    int anchor_confirmed; /* a chained "prune" record names it */
    size_t chain_lines;   /* lines walked so far: a record's place in the chain */
    long long last_seq;   /* the previous record's seq; -1 none (or a line without one) */
    vhead heads[2];       /* audit/head.json, and the head given with --head */
    const head_snap *hs;  /* head.json as read with the files (filled when the walk starts) */
} vstate;

static void v_note(vstate *v, int warning, const char *file, size_t line, const char *problem,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Records one problem: errors make the log TAMPERED, warnings (intent without outcome) only
 * INCOMPLETE. The first MAX_SHOWN of each kind are printed. */
static void v_note(vstate *v, int warning, const char *file, size_t line, const char *problem,
                   const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t *count = warning ? &v->n_warnings : &v->n_errors;
    if (!warning && v->first_bad[0] == 0)
        snprintf(v->first_bad, sizeof(v->first_bad), "%s:%zu", file, line);
    v->status = warning ? (v->status ? v->status : RX_AUDIT_VERIFY_INCOMPLETE)
                        : RX_AUDIT_VERIFY_TAMPERED;
    if ((*count)++ >= MAX_SHOWN || v->report == NULL)
        return;
    if (!v->json) {
        fprintf(v->report, "%s:%zu: %s%s\n", file, line, warning ? "warning: " : "", msg);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    if (o == NULL || !cJSON_AddStringToObject(o, "file", file) ||
        !cJSON_AddNumberToObject(o, "line", (double)line) ||
        !cJSON_AddStringToObject(o, "problem", problem) ||
        !cJSON_AddStringToObject(o, "message", msg) ||
        !cJSON_AddItemToArray(warning ? v->warnings : v->errors, o)) {
        cJSON_Delete(o);
        v->oom = 1;
    }
}

static size_t pend_slot(const char *run_id)
{
    size_t h = 5381;
    for (const unsigned char *p = (const unsigned char *)run_id; *p; p++)
        h = h * 33 + *p;
    return h % PEND_BUCKETS;
}

static pend **pend_find(pend **tab, const char *run_id)
{
    pend **pp = &tab[pend_slot(run_id)];
    while (*pp != NULL && strcmp((*pp)->run_id, run_id) != 0)
        pp = &(*pp)->next;
    return pp;
}

/* An intent closed by `rexec audit recover`: not a problem (the log says what happened), but
 * always reported, so a recovered log never looks like one where every run finished. */
static void v_abandoned(vstate *v, const char *file, size_t line, const char *run_id,
                        const pend *p)
{
    if (v->n_abandoned++ >= MAX_SHOWN || v->report == NULL)
        return;
    if (!v->json) {
        fprintf(v->report, "%s:%zu: abandoned: run %.64s (intent at %s:%zu): its outcome never "
                           "came (the writer crashed or was killed); whether it ran is unknown\n",
                file, line, run_id, p->file, p->line);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    char at[192];
    snprintf(at, sizeof(at), "%s:%zu", p->file, p->line);
    if (o == NULL || !cJSON_AddStringToObject(o, "file", file) ||
        !cJSON_AddNumberToObject(o, "line", (double)line) ||
        !cJSON_AddStringToObject(o, "run_id", run_id) ||
        !cJSON_AddStringToObject(o, "intent", at) ||
        !cJSON_AddItemToArray(v->abandoned, o)) {
        cJSON_Delete(o);
        v->oom = 1;
    }
}

/* Pairs intents with outcomes by run id; other phases (refused, decision) stand alone. */
static void v_pair(vstate *v, const char *file, size_t line, const char *run_id,
                   const char *phase)
{
    pend **pp = pend_find(v->pend, run_id);
    if (strcmp(phase, "intent") == 0) {
        if (*pp != NULL) {
            v_note(v, 0, file, line, "duplicate_intent",
                   "second intent for run %.64s (first at %s:%zu)", run_id, (*pp)->file,
                   (*pp)->line);
            return;
        }
        pend *p = calloc(1, sizeof(*p));
        if (p == NULL || (p->run_id = strdup(run_id)) == NULL || (p->file = strdup(file)) == NULL) {
            if (p != NULL)
                free(p->run_id);
            free(p);
            v->oom = 1;
            return;
        }
        p->line = line;
        p->seq = v->seq++;
        *pp = p;
    } else if (strcmp(phase, "outcome") == 0 || strcmp(phase, "abandoned") == 0) {
        pend *p = *pp;
        int abandoned = phase[0] == 'a';
        if (p == NULL && rx_audit_anchor_open(v->anchor_doc, run_id))
            return; /* its intent was pruned: the anchor says so */
        if (p == NULL) {
            v_note(v, 0, file, line, abandoned ? "abandoned_without_intent"
                                               : "outcome_without_intent",
                   "%s of run %.64s without an open intent before it",
                   abandoned ? "abandoned record" : "outcome", run_id);
            return;
        }
        if (abandoned)
            v_abandoned(v, file, line, run_id, p);
        *pp = p->next;
        pend_free(p);
    }
}

/* The record's own checks: it must name its run and phase. */
static void v_record(vstate *v, const char *file, size_t line, const cJSON *body)
{
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(body, "run_id");
    const cJSON *phase = cJSON_GetObjectItemCaseSensitive(body, "phase");
    if (!cJSON_IsString(run) || !cJSON_IsString(phase)) {
        v_note(v, 0, file, line, "bad_record", "record has no run_id or phase");
        return;
    }
    const cJSON *anchor = cJSON_GetObjectItemCaseSensitive(body, "anchor");
    if (v->anchor && strcmp(phase->valuestring, "prune") == 0 && cJSON_IsString(anchor) &&
        strcmp(anchor->valuestring, v->anchor) == 0)
        v->anchor_confirmed = 1;
    v_pair(v, file, line, run->valuestring, phase->valuestring);
}

/* prev must be the hash of the line before (across files too): this is what finds a removed,
 * inserted or reordered line, and a missing file. */
static int v_prev(vstate *v, const char *file, size_t line, const cJSON *body)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prev");
    if (!cJSON_IsString(p) || strlen(p->valuestring) != 64) {
        v_note(v, 0, file, line, "bad_record", "record has no prev hash");
        return 0;
    }
    if (!v->prev_known || strcmp(p->valuestring, v->prev) == 0)
        return 1;
    if (v->prev_file[0] == 0)
        v_note(v, 0, file, line, "chain_start",
               "prev is not the start of a chain: earlier audit files or lines are missing");
    else if (line == 1)
        v_note(v, 0, file, line, "prev_mismatch",
               "prev does not match the last hash of %s: lines or files between them are "
               "missing", v->prev_file);
    else
        v_note(v, 0, file, line, "prev_mismatch",
               "prev does not match the hash of line %zu: a line was removed, inserted or "
               "reordered here", v->prev_line);
    return 0;
}

/* seq counts the records from 1 and goes up by one each line. The first numbered line after
 * lines written before numbering must carry its place in the chain (unless a prune anchor hides
 * the start). A wrong seq on a line whose prev is fine was forged with the key (or in an unkeyed
 * log); after a prev problem it is not reported again. */
static void v_seq(vstate *v, const char *file, size_t line, const cJSON *body, int chained,
                  const char *hex)
{
    rexec_error e;
    long long seq = -1; /* stays -1 for a line written before sequence numbers */
    if (rx_json_get_int(body, "seq", "", 0, 1, RX_JSON_MAX_SAFE_INT, &seq, REXEC_EAUDIT, &e)) {
        v_note(v, 0, file, line, "bad_record", "seq is not a positive whole number");
        v->last_seq = -1;
        return;
    }
    if (seq < 0) {
        if (v->last_seq > 0)
            v_note(v, 0, file, line, "seq_missing",
                   "record has no seq after record %lld: not written by this rexec, or edited",
                   v->last_seq);
        v->last_seq = -1;
        return;
    }
    long long want = v->last_seq > 0 ? v->last_seq + 1 : v->anchor ? -1 : (long long)v->chain_lines;
    if (want > 0 && seq != want && chained)
        v_note(v, 0, file, line, "seq_mismatch",
               "seq is %lld where %lld was due: records were renumbered", seq, want);
    v->last_seq = seq;
    for (size_t i = 0; i < 2; i++)
        if (v->heads[i].present && v->heads[i].h.seq == seq) {
            v->heads[i].found = 1;
            memcpy(v->heads[i].found_hash, hex, RX_AUDIT_HEX_LEN);
        }
}

/* The stored hash against the body. With a key, a line that matches plain SHA-256 was written
 * (or re-chained) by someone who did not have the key. */
static void v_hash(vstate *v, const char *file, size_t line, const char *stored)
{
    char hex[RX_AUDIT_HEX_LEN];
    if (rx_audit_digest(v->key, v->body.data, v->body.len, hex) != 0) {
        v->oom = 1;
        return;
    }
    if (strcmp(hex, stored) == 0)
        return;
    if (v->key != NULL && rx_audit_digest(NULL, v->body.data, v->body.len, hex) == 0 &&
        strcmp(hex, stored) == 0)
        v_note(v, 0, file, line, "not_keyed",
               "hash is plain SHA-256, not keyed with the audit key: the line was written or "
               "re-chained without the key");
    else
        v_note(v, 0, file, line, "hash_mismatch",
               "hash mismatch: the line was changed after it was written%s",
               v->key ? " (or keyed with another key)"
                      : " (or the log is keyed: give the key with --key)");
}

/* The body the hash covers: the line without ,"hash":"..." i.e. up to the suffix, plus "}". */
static cJSON *v_body(vstate *v, const char *s, size_t len)
{
    const char *end = NULL;
    v->body.len = 0;
    if (rx_buf_add(&v->body, s, len - SUFFIX_LEN) != 0 || rx_buf_addc(&v->body, '}') != 0) {
        v->oom = 1;
        return NULL;
    }
    cJSON *o = cJSON_ParseWithLengthOpts((const char *)v->body.data, v->body.len, &end, 0);
    if (o != NULL && (!cJSON_IsObject(o) || end != (const char *)v->body.data + v->body.len ||
                      cJSON_GetObjectItemCaseSensitive(o, "hash") != NULL)) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}

static void v_chain_to(vstate *v, const char *file, size_t line, const char *hex)
{
    if (hex != NULL)
        memcpy(v->prev, hex, RX_AUDIT_HEX_LEN);
    v->prev_known = hex != NULL;
    snprintf(v->prev_file, sizeof(v->prev_file), "%s", file);
    v->prev_line = line;
}

/* The local head joins the walk once it has been read with the files. */
static void v_head_ready(vstate *v)
{
    if (v->hs != NULL && v->hs->state == 1 && !v->heads[0].present) {
        v->heads[0].h = v->hs->h;
        v->heads[0].present = 1;
    }
}

static void v_line(void *ud, const char *file, size_t line, const char *s, size_t len,
                   int complete, int too_long)
{
    vstate *v = ud;
    char hex[RX_AUDIT_HEX_LEN];
    cJSON *body = NULL;

    if (line == 0) { /* a file begins: the snapshot, head.json included, is taken by now */
        v_head_ready(v);
        return;
    }
    if (!complete)
        v_note(v, 0, file, line, "truncated",
               "the last line is incomplete (no newline): cut by a crash or by hand");
    else if (too_long)
        v_note(v, 0, file, line, "too_long", "line longer than %u bytes", RX_AUDIT_LINE_MAX);
    else if (rx_audit_line_hash(s, len, hex) != 0)
        v_note(v, 0, file, line, "no_hash",
               "does not end with a hash: not written by rexec, or edited");
    else if ((body = v_body(v, s, len)) == NULL)
        v_note(v, 0, file, line, "bad_json", "not a valid JSON record: edited");
    v->chain_lines++;
    if (body != NULL) {
        v_hash(v, file, line, hex);
        int chained = v_prev(v, file, line, body);
        v_seq(v, file, line, body, chained, hex);
        v_record(v, file, line, body);
        v->records++;
    } else {
        v->last_seq = -1;
    }
    /* Chain on to the stored hash even after a mismatch, so one edit is reported once. */
    int hashed = complete && !too_long && rx_audit_line_hash(s, len, hex) == 0;
    v_chain_to(v, file, line, hashed ? hex : NULL);
    cJSON_Delete(body);
}

static int pend_cmp(const void *a, const void *b)
{
    const pend *x = *(pend *const *)a, *y = *(pend *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Each intent left without an outcome, in log order, then the table is emptied. */
static void v_pending(vstate *v)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < PEND_BUCKETS; i++)
        for (pend *p = v->pend[i]; p != NULL; p = p->next)
            n++;
    pend **all = n ? malloc(n * sizeof(*all)) : NULL;
    for (size_t i = 0; i < PEND_BUCKETS; i++)
        for (pend *p = v->pend[i], *next; p != NULL; p = next) {
            next = p->next;
            if (all != NULL)
                all[k++] = p;
            else
                v->oom = 1;
        }
    if (all != NULL)
        qsort(all, k, sizeof(*all), pend_cmp);
    for (size_t i = 0; i < k; i++)
        v_note(v, 1, all[i]->file, all[i]->line, "intent_without_outcome",
               "run %.64s: intent without outcome (rexec stopped between them, or the run is "
               "still going; `rexec audit recover` closes those whose writer is gone)",
               all[i]->run_id);
    for (size_t i = 0; i < PEND_BUCKETS; i++)
        for (pend *p = v->pend[i], *next; p != NULL; p = next) {
            next = p->next;
            pend_free(p);
        }
    memset(v->pend, 0, sizeof(v->pend));
    free(all);
}

/* The chain against one head: the head's mac, then the record it names. What a head catches
 * that the chain alone cannot: the newest records, the whole current file or the newest
 * rotated file removed, or an older consistent copy put back. */
static void v_head(vstate *v, vhead *hd)
{
    char mac[RX_AUDIT_HEX_LEN];
    const rx_audit_head *h = &hd->h;
    hd->result = "failed";
    if (rx_audit_head_mac(v->key, h->seq, h->hash, mac) != 0) {
        v->oom = 1;
        return;
    }
    if (strcmp(mac, h->mac) != 0) {
        v_note(v, 0, hd->name, 1, "head_mac",
               "the head's mac does not match: edited, or written %s", v->key
                   ? "without this audit key" : "with a key (give it with --key)");
    } else if (h->seq > 0 && h->seq > v->last_seq) {
        if (v->last_seq > 0)
            v_note(v, 0, hd->name, 1, "head_ahead",
                   "the head names record %lld, but the log ends at record %lld: records after "
                   "it were removed (a cut, a deleted current or newest rotated file) or an "
                   "older copy was put back", h->seq, v->last_seq);
        else
            v_note(v, 0, hd->name, 1, "head_ahead",
                   "the head names record %lld, but the log %s", h->seq,
                   v->records ? "does not end with a numbered record" : "holds no record");
    } else if (h->seq > 0 && !hd->found) {
        hd->result = "unchecked";
        v_note(v, 1, hd->name, 1, "head_unchecked",
               "record %lld is not in the log (pruned, or written before sequence numbers): "
               "this head cannot be checked", h->seq);
    } else if (h->seq > 0 && strcmp(hd->found_hash, h->hash) != 0) {
        v_note(v, 0, hd->name, 1, "head_mismatch",
               "record %lld has hash %.16s..., the head names %.16s...: the log was replaced, "
               "or rolled back and written again", h->seq, hd->found_hash, h->hash);
    } else {
        hd->result = "ok";
    }
}

/* audit/head.json (read with the files), then the head given with --head. */
static void v_heads(vstate *v)
{
    const head_snap *hs = v->hs;
    vhead *local = &v->heads[0];
    if (hs->state < 0)
        v_note(v, 0, local->name, 1, "head_bad", "%s", hs->msg);
    else if (hs->state == 0 && v->last_seq > 0)
        v_note(v, 0, local->name, 1, "head_missing",
               "missing, but the log holds numbered records up to %lld: the head was removed",
               v->last_seq);
    else if (hs->state == 1)
        v_head(v, local);
    if (v->heads[1].present)
        v_head(v, &v->heads[1]);
}

static const char *status_name(int status)
{
    return status == RX_AUDIT_VERIFY_OK ? "ok"
           : status == RX_AUDIT_VERIFY_TAMPERED ? "tampered" : "incomplete";
}

static void v_summary_text(const vstate *v, size_t files)
{
    FILE *f = v->report;
    if (v->n_errors > MAX_SHOWN || v->n_warnings > MAX_SHOWN)
        fprintf(f, "... and %zu more problems not shown\n",
                (v->n_errors > MAX_SHOWN ? v->n_errors - MAX_SHOWN : 0) +
                    (v->n_warnings > MAX_SHOWN ? v->n_warnings - MAX_SHOWN : 0));
    if (v->status == RX_AUDIT_VERIFY_TAMPERED)
        fprintf(f, "audit: TAMPERED OR CORRUPT: %zu problem(s), the first at %s (%zu file(s), "
                   "%zu record(s))\n", v->n_errors, v->first_bad, files, v->records);
    else if (v->status == RX_AUDIT_VERIFY_INCOMPLETE)
        fprintf(f, "audit: chain intact, but %zu intent(s) without outcome (%zu file(s), %zu "
                   "record(s))\n", v->n_warnings, files, v->records);
    else
        fprintf(f, "audit: ok: %zu file(s), %zu record(s), chain intact%s\n", files, v->records,
                v->key ? ", keyed" : "");
    if (v->n_abandoned > 0)
        fprintf(f, "audit: %zu intent(s) abandoned by `rexec audit recover`: their outcome never "
                   "came (see `rexec audit show`)\n", v->n_abandoned);
    if (v->last_seq > 0)
        fprintf(f, "audit: the chain ends at record %lld, hash %s\n", v->last_seq, v->prev);
    if (v->heads[1].present)
        fprintf(f, "audit: shipped head (record %lld): %s\n", v->heads[1].h.seq,
                v->heads[1].result);
}

static int v_summary_json(vstate *v, size_t files)
{
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    if (o != NULL && cJSON_AddStringToObject(o, "status", status_name(v->status)) &&
        cJSON_AddNumberToObject(o, "exit_code", v->status) &&
        cJSON_AddBoolToObject(o, "keyed", v->key != NULL) &&
        cJSON_AddNumberToObject(o, "files", (double)files) &&
        cJSON_AddNumberToObject(o, "records", (double)v->records) &&
        (v->first_bad[0] ? cJSON_AddStringToObject(o, "first_bad", v->first_bad)
                         : cJSON_AddNullToObject(o, "first_bad")) &&
        cJSON_AddNumberToObject(o, "n_errors", (double)v->n_errors) &&
        cJSON_AddNumberToObject(o, "n_warnings", (double)v->n_warnings) &&
        cJSON_AddNumberToObject(o, "n_abandoned", (double)v->n_abandoned) &&
        (v->last_seq > 0 ? cJSON_AddNumberToObject(o, "last_seq", (double)v->last_seq)
                         : cJSON_AddNullToObject(o, "last_seq")) &&
        (v->last_seq > 0 ? cJSON_AddStringToObject(o, "last_hash", v->prev)
                         : cJSON_AddNullToObject(o, "last_hash")) &&
        (v->heads[1].present ? cJSON_AddStringToObject(o, "shipped_head", v->heads[1].result)
                             : cJSON_AddNullToObject(o, "shipped_head"))) {
        cJSON_AddItemToObject(o, "errors", v->errors);
        cJSON_AddItemToObject(o, "warnings", v->warnings);
        cJSON_AddItemToObject(o, "abandoned", v->abandoned);
        v->errors = v->warnings = v->abandoned = NULL;
        s = cJSON_PrintUnformatted(o);
    }
    if (s != NULL)
        fprintf(v->report, "%s\n", s);
    free(s);
    cJSON_Delete(o);
    return s != NULL ? 0 : -1;
}

static int v_init(vstate *v, const rx_buf *key, int flags, FILE *report)
{
    memset(v, 0, sizeof(*v));
    v->key = key;
    v->json = (flags & RX_AUDIT_VERIFY_JSON) != 0;
    v->report = report;
    memcpy(v->prev, RX_AUDIT_ZERO_HASH, RX_AUDIT_HEX_LEN);
    v->prev_known = 1;
    v->last_seq = -1;
    v->heads[0].name = "audit/" RX_AUDIT_HEAD_FILE;
    v->heads[1].name = "--head";
    rx_buf_init(&v->body, RX_AUDIT_LINE_MAX + 1);
    v->errors = cJSON_CreateArray();
    v->warnings = cJSON_CreateArray();
    v->abandoned = cJSON_CreateArray();
    return v->errors && v->warnings && v->abandoned ? 0 : -1;
}

int rx_audit_verify_ex(const char *ws_dir, const char *key_file, int flags,
                       const rx_audit_head *shipped, FILE *report, rexec_error *err)
{
    vstate *v = malloc(sizeof(*v));
    head_snap *hs = calloc(1, sizeof(*hs));
    rx_buf key;
    cJSON *anchor = NULL;
    size_t files = 0;
    int r;

    rx_buf_init(&key, 8192);
    if (v == NULL || hs == NULL || v_init(v, NULL, flags, report) != 0) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    if (key_file != NULL && (r = rx_audit_key_load(key_file, ws_dir, &key, err)) != 0)
        goto out;
    v->key = key_file != NULL ? &key : NULL;
    if ((r = rx_audit_anchor_load(ws_dir, &anchor, err)) != 0)
        goto out;
    if (anchor) { /* the chain starts at the pruned files' last hash */
        v->anchor = cJSON_GetObjectItemCaseSensitive(anchor, "anchor")->valuestring;
        v->anchor_doc = anchor;
        memcpy(v->prev, v->anchor, RX_AUDIT_HEX_LEN);
        snprintf(v->prev_file, sizeof(v->prev_file), "audit/anchor.json");
    }
    if (shipped != NULL) {
        v->heads[1].h = *shipped;
        v->heads[1].present = 1;
    }
    v->hs = hs;
    if ((r = walk(ws_dir, v_line, v, &files, anchor, hs, err)) != 0)
        goto out;
    v_head_ready(v); /* also when there was no file to walk */
    v_heads(v);
    if (anchor && !v->anchor_confirmed)
        v_note(v, 0, "audit/anchor.json", 1, "anchor_unconfirmed",
               "no prune record in the chain names this anchor: written by hand, or the log "
               "was cut after it");
    v_pending(v);
    if (v->oom) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory while verifying the audit log");
        goto out;
    }
    if (report != NULL && (v->json ? v_summary_json(v, files) : (v_summary_text(v, files), 0)))
        r = rx_fail(err, REXEC_ENOMEM, "out of memory printing the report");
    else
        r = v->status;
out:
    if (v != NULL) {
        v_pending(v);
        rx_buf_free(&v->body);
        cJSON_Delete(v->errors);
        cJSON_Delete(v->warnings);
        cJSON_Delete(v->abandoned);
    }
    free(v);
    free(hs);
    rx_buf_free(&key);
    cJSON_Delete(anchor);
    return r;
}

int rx_audit_verify(const char *ws_dir, const char *key_file, FILE *report, rexec_error *err)
{
    return rx_audit_verify_ex(ws_dir, key_file, 0, NULL, report, err);
}

/* ---- Open intents (for `rexec audit recover`) -------------------------------------------- */

typedef struct oscan {
    pend *pend[PEND_BUCKETS];
    size_t seq;
    int oom;
} oscan;

/* Keeps each intent until its outcome (or abandoned record) comes. The chain was verified
 * before, so lines that do not parse are skipped here. */
static void o_line(void *ud, const char *file, size_t line, const char *s, size_t len,
                   int complete, int too_long)
{
    oscan *sc = ud;
    if (line == 0 || !complete || too_long)
        return;
    cJSON *o = cJSON_ParseWithLength(s, len);
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "run_id");
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(o, "phase");
    if (!cJSON_IsString(run) || !cJSON_IsString(ph)) {
        cJSON_Delete(o);
        return;
    }
    pend **pp = pend_find(sc->pend, run->valuestring), *p = *pp;
    if (strcmp(ph->valuestring, "intent") == 0 && p == NULL) {
        if ((p = calloc(1, sizeof(*p))) == NULL || (p->run_id = strdup(run->valuestring)) == NULL ||
            (p->file = strdup(file)) == NULL) {
            if (p != NULL)
                free(p->run_id);
            free(p);
            sc->oom = 1;
        } else {
            p->line = line;
            p->seq = sc->seq++;
            p->rec = o;
            *pp = p;
            return;
        }
    } else if (p != NULL && (strcmp(ph->valuestring, "outcome") == 0 ||
                             strcmp(ph->valuestring, "abandoned") == 0)) {
        *pp = p->next;
        pend_free(p);
    }
    cJSON_Delete(o);
}

static int intent_cmp(const void *a, const void *b)
{
    const rx_audit_open_intent *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The scan's table into an array in log order; the table is emptied. */
static int o_collect(oscan *sc, rx_audit_open_intent **out, size_t *n)
{
    size_t k = 0, cap = 0;
    for (size_t i = 0; i < PEND_BUCKETS; i++)
        for (pend *p = sc->pend[i]; p != NULL; p = p->next)
            cap++;
    rx_audit_open_intent *v = cap ? calloc(cap, sizeof(*v)) : NULL;
    for (size_t i = 0; i < PEND_BUCKETS; i++)
        for (pend *p = sc->pend[i], *next; p != NULL; p = next) {
            next = p->next;
            if (v != NULL) {
                v[k].rec = p->rec;
                v[k].order = p->seq;
                snprintf(v[k].where, sizeof(v[k].where), "%s:%zu", p->file, p->line);
                k++;
                p->rec = NULL;
            }
            pend_free(p);
        }
    memset(sc->pend, 0, sizeof(sc->pend));
    if (cap && v == NULL)
        return -1;
    if (k)
        qsort(v, k, sizeof(*v), intent_cmp);
    *out = v;
    *n = k;
    return 0;
}

int rx_audit_open_intents(const char *ws_dir, rx_audit_open_intent **out, size_t *n,
                          rexec_error *err)
{
    oscan *sc = calloc(1, sizeof(*sc));
    cJSON *anchor = NULL;
    size_t files = 0;
    int r;

    *out = NULL;
    *n = 0;
    if (sc == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if ((r = rx_audit_anchor_load(ws_dir, &anchor, err)) == 0 &&
        (r = walk(ws_dir, o_line, sc, &files, anchor, NULL, err)) == 0 &&
        (sc->oom || o_collect(sc, out, n) != 0))
        r = rx_fail(err, REXEC_ENOMEM, "out of memory reading the audit log");
    for (size_t i = 0; i < PEND_BUCKETS; i++) /* what is left after a failure */
        for (pend *p = sc->pend[i], *next; p != NULL; p = next) {
            next = p->next;
            pend_free(p);
        }
    free(sc);
    cJSON_Delete(anchor);
    return r;
}

void rx_audit_open_intents_free(rx_audit_open_intent *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++)
        cJSON_Delete(v[i].rec);
    free(v);
}

/* ---- Time ------------------------------------------------------------------------------- */

/* Exactly n digits at *s (advanced past them), or -1. */
static int digits(const char **s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*s)++) {
        if (**s < '0' || **s > '9')
            return -1;
        v = v * 10 + (**s - '0');
    }
    return v;
}

/* "Z", "+hh:mm", "-hh:mm" or nothing (UTC) into seconds east of UTC. */
static int parse_zone(const char *s, long *off)
{
    *off = 0;
    if (*s == 0 || (s[0] == 'Z' && s[1] == 0))
        return 0;
    if ((*s != '+' && *s != '-') || strlen(s) != 6 || s[3] != ':')
        return -1;
    int sign = *s == '-' ? -1 : 1;
    const char *p = s + 1;
    int h = digits(&p, 2);
    p++;
    int m = digits(&p, 2);
    if (h < 0 || m < 0 || h > 23 || m > 59)
        return -1;
    *off = sign * (h * 3600L + m * 60L);
    return 0;
}

static int parse_iso(const char *s, time_t *out)
{
    struct tm tm = {0};
    long off = 0;
    int Y = digits(&s, 4), M = (*s == '-' ? s++, digits(&s, 2) : -1);
    int D = (*s == '-' ? s++, digits(&s, 2) : -1), h = 0, m = 0, sec = 0;
    if (Y < 0 || M < 1 || M > 12 || D < 1 || D > 31)
        return -1;
    if (*s == 'T' || *s == ' ') {
        s++;
        h = digits(&s, 2);
        m = *s == ':' ? (s++, digits(&s, 2)) : -1;
        sec = *s == ':' ? (s++, digits(&s, 2)) : -1;
        if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60)
            return -1;
        if (*s == '.' && s[1] >= '0' && s[1] <= '9')
            for (s++; *s >= '0' && *s <= '9'; s++)
                ;
    }
    if (parse_zone(s, &off) != 0)
        return -1;
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    *out = timegm(&tm) - off;
    return 0;
}

int rx_audit_parse_time(const char *s, time_t now, time_t *out)
{
    static const struct { char unit; long secs; } units[] = {
        {'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 604800}};
    size_t n = strspn(s, "0123456789");
    if (n == 0)
        return -1;
    if (n < 10 && s[n] != 0 && s[n + 1] == 0) {
        long v = strtol(s, NULL, 10);
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
            if (s[n] == units[i].unit) {
                *out = now - (time_t)v * units[i].secs;
                return 0;
            }
        return -1;
    }
    return n == 4 ? parse_iso(s, out) : -1;
}

/* ---- Show ------------------------------------------------------------------------------- */

typedef struct show_state {
    const rx_audit_query *q;
    FILE *out;
    size_t shown;
} show_state;

/* A field for the table: control characters (a tampered line could carry terminal escapes)
 * become '?', and a long value is cut with "~". */
static const char *cell(const cJSON *rec, const char *name, char *buf, size_t size)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(rec, name);
    const char *s = cJSON_IsString(it) ? it->valuestring : "-";
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++)
        buf[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i] && i >= 1)
        buf[i - 1] = '~';
    buf[i] = 0;
    return buf;
}

/* "0", "sig:KILL", "timeout" or "-": what the EXIT column says. */
static const char *exit_cell(const cJSON *rec, char *buf, size_t size)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(rec, "exit_code");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(rec, "signal");
    const cJSON *phase = cJSON_GetObjectItemCaseSensitive(rec, "phase");
    if (cJSON_IsString(phase) && strcmp(phase->valuestring, "abandoned") == 0)
        snprintf(buf, size, "unknown"); /* the outcome never came: nobody knows */
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "timed_out")))
        snprintf(buf, size, "timeout");
    else if (cJSON_IsString(sig) && sig->valuestring[0])
        snprintf(buf, size, "sig:%.16s", sig->valuestring);
    else if (cJSON_IsNumber(code) && code->valuedouble >= 0)
        snprintf(buf, size, "%d", code->valueint);
    else
        snprintf(buf, size, "-");
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = '?';
    return buf;
}

/* DECISION/REASON is 36 wide: the longest pair, REQUIRES_APPROVAL/GRANT_NOT_APPROVED, fits. */
static void show_row(show_state *st, const cJSON *rec)
{
    char ts[32], run[48], phase[12], host[24], action[32], dec[24], why[40], ex[32];
    char decision[72];
    snprintf(decision, sizeof(decision), "%s/%s", cell(rec, "decision", dec, sizeof(dec)),
             cell(rec, "reason", why, sizeof(why)));
    if (st->shown++ == 0)
        fprintf(st->out, "%-24s %-33s %-8s %-16s %-24s %-36s %s\n", "TIME", "RUN_ID", "PHASE",
                "HOST", "ACTION", "DECISION/REASON", "EXIT");
    fprintf(st->out, "%-24s %-33s %-8s %-16s %-24s %-36s %s\n", cell(rec, "ts", ts, sizeof(ts)),
            cell(rec, "run_id", run, sizeof(run)), cell(rec, "phase", phase, sizeof(phase)),
            cell(rec, "host", host, sizeof(host)), cell(rec, "action", action, sizeof(action)),
            decision, exit_cell(rec, ex, sizeof(ex)));
}

/* 1 when want is NULL or the record's field key is the string want. */
static int field_is(const cJSON *rec, const char *key, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, key);
    return want == NULL || (cJSON_IsString(v) && strcmp(v->valuestring, want) == 0);
}

static int show_selected(const show_state *st, const cJSON *rec)
{
    if (!field_is(rec, "host", st->q->host) || !field_is(rec, "action", st->q->action))
        return 0;
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(rec, "run_id");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(rec, "ts");
    time_t t;
    if (st->q->run_id != NULL &&
        (!cJSON_IsString(run) || strcmp(run->valuestring, st->q->run_id) != 0))
        return 0;
    if (st->q->has_since &&
        (!cJSON_IsString(ts) || parse_iso(ts->valuestring, &t) != 0 || t < st->q->since))
        return 0;
    return 1;
}

static void show_line(void *ud, const char *file, size_t line, const char *s, size_t len,
                      int complete, int too_long)
{
    show_state *st = ud;
    if (line == 0)
        return;
    cJSON *rec = complete && !too_long ? cJSON_ParseWithLength(s, len) : NULL;
    if (rec == NULL || !cJSON_IsObject(rec)) {
        if (!st->q->json)
            fprintf(st->out, "# %s:%zu: not a readable record (see `rexec audit verify`)\n",
                    file, line);
    } else if (show_selected(st, rec)) {
        if (st->q->json)
            fprintf(st->out, "%.*s\n", (int)len, s);
        else
            show_row(st, rec);
    }
    cJSON_Delete(rec);
}

int rx_audit_show(const char *ws_dir, const rx_audit_query *q, FILE *out, rexec_error *err)
{
    show_state st = {q, out, 0};
    size_t files = 0;
    cJSON *anchor = NULL;
    int r = rx_audit_anchor_load(ws_dir, &anchor, err);
    if (r == 0)
        r = walk(ws_dir, show_line, &st, &files, anchor, NULL, err);
    cJSON_Delete(anchor);
    return r;
}
