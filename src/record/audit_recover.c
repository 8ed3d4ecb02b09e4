/* `rexec audit recover`: closes the intents whose outcome can never come, with an "abandoned"
 * record each, so a log that a crash left INCOMPLETE verifies clean again without hiding what
 * happened. Which intents: those whose writer is gone. Every process that writes intents holds
 * an flock on audit/writers/<id>.lock while its handle lives and names <id> in them (audit.c);
 * the kernel drops the lock when the process dies, however it dies. An intent whose writer's
 * lock is still held belongs to a running process (a `rexec serve`, a long `rexec run`) and
 * stays open. docs/audit.md, "Recovering after a crash". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "err.h"
#include "fsutil.h"

#define RECOVER_LOCK ".recover.lock"

/* What became of one open intent. */
enum { FATE_ABANDON, FATE_LIVE, FATE_UNREGISTERED };

/* A writer id as audit.c makes it: "<pid>-<16 hex>". Anything else is not looked up (it
 * would become a path). */
static int writer_id_ok(const char *id)
{
    size_t d = strspn(id, "0123456789");
    return d > 0 && d < 12 && id[d] == '-' && strlen(id + d + 1) == 16 &&
           strspn(id + d + 1, "0123456789abcdef") == 16;
}

/* Whether the writer's lock is still held: its process lives. A lock file that is gone was
 * removed by its writer's clean close (audit.c: audit_writer_end), after its last record. */
static int writer_alive(const char *audit_dir, const char *id)
{
    char *path = rx_audit_writer_path(audit_dir, id);
    int fd = path ? open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1, alive = 0;
    if (path == NULL || (fd < 0 && errno != ENOENT))
        alive = 1; /* cannot tell: keep the intent open */
    else if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0)
        alive = 1; /* EWOULDBLOCK: held; any other error: cannot tell either */
    if (fd >= 0)
        close(fd); /* releases our probe: a gone writer never takes it back */
    free(path);
    return alive;
}

static int intent_fate(const char *audit_dir, const cJSON *rec, int flags)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(rec, "writer");
    if (!cJSON_IsString(w) || !writer_id_ok(w->valuestring))
        return (flags & RX_AUDIT_RECOVER_UNREGISTERED) ? FATE_ABANDON : FATE_UNREGISTERED;
    return writer_alive(audit_dir, w->valuestring) ? FATE_LIVE : FATE_ABANDON;
}

static void copy_field(cJSON *to, const cJSON *from, const char *name)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(from, name);
    if (it != NULL)
        cJSON_AddItemToObject(to, name, cJSON_Duplicate(it, 1));
}

/* The record that closes intent rec: what is known (run, host, action, batch, writer, the
 * intent's seq) and what is not (executed: null, nothing about an exit). */
static cJSON *abandoned_record(const cJSON *rec)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(rec, "writer");
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(rec, "seq");
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    copy_field(o, rec, "run_id");
    cJSON_AddStringToObject(o, "phase", "abandoned");
    copy_field(o, rec, "host");
    copy_field(o, rec, "action");
    copy_field(o, rec, "batch_id");
    cJSON_AddItemToObject(o, "intent_seq", cJSON_IsNumber(seq) ? cJSON_Duplicate(seq, 1)
                                                               : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "writer", cJSON_IsString(w) ? cJSON_Duplicate(w, 1)
                                                         : cJSON_CreateNull());
    cJSON_AddNullToObject(o, "executed");
    cJSON_AddStringToObject(o, "reason", cJSON_IsString(w) ? "WRITER_GONE" : "WRITER_UNKNOWN");
    cJSON_AddStringToObject(o, "detail",
                            cJSON_IsString(w)
                                ? "the process that wrote the intent ended without its outcome "
                                  "(crashed or was killed); whether the command ran is unknown"
                                : "the intent names no writer (written before writers were "
                                  "registered); closed on the operator's word that no rexec of "
                                  "that time still runs; whether the command ran is unknown");
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "run_id"))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static void report_one(FILE *f, int json, const rx_audit_open_intent *in, int fate, cJSON *list)
{
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(in->rec, "run_id");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(in->rec, "writer");
    const char *why = fate == FATE_ABANDON  ? "abandoned"
                      : fate == FATE_LIVE   ? "kept: its writer is still running"
                                            : "kept: it names no writer (pass "
                                              "--include-unregistered once no older rexec runs)";
    if (f == NULL)
        return;
    if (!json) {
        fprintf(f, "%s: run %.64s (writer %.40s): %s\n", in->where, run->valuestring,
                cJSON_IsString(w) ? w->valuestring : "none", why);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run_id", run->valuestring);
    cJSON_AddStringToObject(o, "intent", in->where);
    cJSON_AddItemToObject(o, "writer", cJSON_IsString(w) ? cJSON_Duplicate(w, 1)
                                                         : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "result", fate == FATE_ABANDON ? "abandoned"
                                         : fate == FATE_LIVE  ? "writer_running"
                                                              : "writer_unknown");
    cJSON_AddItemToArray(list, o);
}

/* Appends the records in batches (one lock, write and fsync each). */
static int append_all(rx_audit *a, char **texts, size_t n, rexec_error *err)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < n; i += RX_AUDIT_BATCH_MAX) {
        size_t k = n - i < RX_AUDIT_BATCH_MAX ? n - i : RX_AUDIT_BATCH_MAX;
        r = rx_audit_append_texts(a, texts + i, k, err);
    }
    return r;
}

/* Lock files of writers that are gone (their lock free): removed, so writers/ does not grow
 * with every crash. Their intents are closed by now. */
static void writers_sweep(const char *audit_dir)
{
    char *dir = rx_fs_join(audit_dir, RX_AUDIT_WRITERS_DIR);
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        char id[64];
        if (len < 6 || len - 5 >= sizeof(id) || strcmp(de->d_name + len - 5, ".lock") != 0)
            continue;
        memcpy(id, de->d_name, len - 5);
        id[len - 5] = 0;
        if (!writer_id_ok(id))
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), de->d_name, 0);
        if (fd >= 0)
            close(fd);
    }
    if (d != NULL)
        closedir(d);
    free(dir);
}

typedef struct recover_run {
    const char *ws_dir, *key_file, *audit_dir;
    int flags;
    rx_audit_recover_stats *st;
    FILE *report;
    cJSON *list; /* --json: one object an intent */
} recover_run;

/* Decides each open intent's fate, then appends the abandoned records. */
static int recover_intents(recover_run *rr, rx_audit_open_intent *v, size_t n, rexec_error *err)
{
    char **texts = n ? calloc(n, sizeof(*texts)) : NULL;
    size_t k = 0;
    rx_audit *a = NULL;
    int r = n && texts == NULL ? rx_fail(err, REXEC_ENOMEM, "out of memory") : 0;

    for (size_t i = 0; r == 0 && i < n; i++) {
        int fate = intent_fate(rr->audit_dir, v[i].rec, rr->flags);
        report_one(rr->report, rr->list != NULL, &v[i], fate, rr->list);
        if (fate != FATE_ABANDON) {
            rr->st->kept++;
            continue;
        }
        cJSON *rec = abandoned_record(v[i].rec);
        r = rec == NULL ? rx_fail(err, REXEC_ENOMEM, "out of memory")
                        : rx_audit_render(rec, NULL, &texts[k++], err);
        cJSON_Delete(rec);
    }
    if (r == 0 && k > 0 && (r = rx_audit_open(&a, rr->ws_dir, rr->key_file, err)) == 0 &&
        (r = append_all(a, texts, k, err)) == 0)
        rr->st->abandoned = k;
    rx_audit_close(a);
    for (size_t i = 0; i < k; i++)
        free(texts[i]);
    free(texts);
    return r;
}

static void recover_summary(const recover_run *rr)
{
    FILE *f = rr->report;
    if (f == NULL)
        return;
    if (rr->list == NULL) {
        fprintf(f, "audit: recover: %zu intent(s) abandoned, %zu left open\n",
                rr->st->abandoned, rr->st->kept);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "abandoned", (double)rr->st->abandoned);
    cJSON_AddNumberToObject(o, "kept", (double)rr->st->kept);
    cJSON_AddItemReferenceToObject(o, "intents", rr->list);
    char *s = cJSON_PrintUnformatted(o);
    if (s != NULL)
        fprintf(f, "%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* One recover at a time: two would both close the same intents. */
static int recover_lock(const char *audit_dir, int *fd, rexec_error *err)
{
    char *path = rx_fs_join(audit_dir, RECOVER_LOCK);
    int r = 0;
    *fd = path ? open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600) : -1;
    if (path == NULL)
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
    else if (*fd < 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    else if ((r = rx_fs_check_fd(*fd, path, 0, REXEC_EAUDIT, err)) == 0)
        while (flock(*fd, LOCK_EX) != 0 && r == 0)
            if (errno != EINTR)
                r = rx_fail(err, REXEC_EAUDIT, "%s: flock: %s", path, strerror(errno));
    free(path);
    return r;
}

static int recover_locked(recover_run *rr, rexec_error *err)
{
    rx_audit_open_intent *v = NULL;
    size_t n = 0;
    int r = rx_audit_verify_ex(rr->ws_dir, rr->key_file, 0, NULL, NULL, err);
    if (r == RX_AUDIT_VERIFY_TAMPERED) {
        rx_fail(err, REXEC_EAUDIT, "audit recover: the log does not verify (see `rexec audit "
                                   "verify`): intents are closed only in an intact chain");
        return RX_AUDIT_VERIFY_TAMPERED;
    }
    if (r < 0 || (r = rx_audit_open_intents(rr->ws_dir, &v, &n, err)) != 0 ||
        (r = recover_intents(rr, v, n, err)) != 0) {
        rx_audit_open_intents_free(v, n);
        return r;
    }
    rx_audit_open_intents_free(v, n);
    writers_sweep(rr->audit_dir);
    recover_summary(rr);
    return rr->st->kept ? RX_AUDIT_VERIFY_INCOMPLETE : RX_AUDIT_VERIFY_OK;
}

int rx_audit_recover(const char *ws_dir, const char *key_file, int flags,
                     rx_audit_recover_stats *st, FILE *report, rexec_error *err)
{
    char *dir = rx_fs_join(ws_dir, "audit");
    recover_run rr = {ws_dir, key_file, dir, flags, st, report, NULL};
    struct stat sb;
    int lock = -1, r;

    memset(st, 0, sizeof(*st));
    if ((flags & RX_AUDIT_RECOVER_JSON) && (rr.list = cJSON_CreateArray()) == NULL)
        dir = (free(dir), NULL);
    if (dir == NULL)
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
    else if (lstat(dir, &sb) != 0 && errno == ENOENT) /* nothing was ever written */
        recover_summary(&rr), r = RX_AUDIT_VERIFY_OK;
    else if ((r = recover_lock(dir, &lock, err)) == 0)
        r = recover_locked(&rr, err);
    if (lock >= 0)
        close(lock);
    cJSON_Delete(rr.list);
    free(dir);
    return r;
}
