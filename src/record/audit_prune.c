/* `rexec audit prune --before D`: removes whole rotated audit files older than D, and keeps the
 * chain verifiable through an anchor (docs/audit.md, "Retention"):
 *
 * - Only rotated files go (audit.log is never cut), oldest first. Runs whose intent goes and
 *   whose outcome stays are listed in the anchor ("open_runs").
 * - A "prune" record is appended to the chain first: it names the removed files and the hash
 *   of their last line (the anchor). Keyed logs sign it like any record.
 * - audit/anchor.json then says the same; verify starts the chain at its hash instead of zeros,
 *   skips the files it names, and accepts it only when a prune record in the chain confirms it.
 * - Then the files are removed. A crash in between leaves files the anchor already names:
 *   verify skips them, the next prune removes them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "err.h"
#include "fsutil.h"

#define PRUNE_MAX_FILE (512u << 20)


/* The anchor file, or NULL when there is none. */
int rx_audit_anchor_load(const char *ws_dir, cJSON **out, rexec_error *err)
{
    char *path = rx_fs_join(ws_dir, "audit/anchor.json"), *text = NULL;
    size_t len = 0;
    int r = 0;
    *out = NULL;
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    struct stat st; /* lstat, not access(): a dangling link is refused below, not taken for none */
    if (lstat(path, &st) != 0 && errno == ENOENT)
        goto out;
    if ((r = rx_fs_read_file(path, 1u << 20, &text, &len, REXEC_EAUDIT, err)) != 0)
        goto out;
    cJSON *a = cJSON_ParseWithLength(text, len);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(a, "anchor");
    if (!cJSON_IsString(h) || strlen(h->valuestring) != RX_AUDIT_HEX_LEN - 1 ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(a, "files"))) {
        cJSON_Delete(a);
        r = rx_fail(err, REXEC_EAUDIT, "%s: not an anchor written by rexec audit prune", path);
        goto out;
    }
    *out = a;
out:
    free(text);
    free(path);
    return r;
}

int rx_audit_anchor_names(const cJSON *anchor, const char *name)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(anchor, "files"))
        if (cJSON_IsString(f) && strcmp(f->valuestring, name) == 0)
            return 1;
    return 0;
}

int rx_audit_anchor_open(const cJSON *anchor, const char *run_id)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(anchor, "open_runs"))
        if (cJSON_IsString(f) && strcmp(f->valuestring, run_id) == 0)
            return 1;
    return 0;
}

typedef struct scan {
    cJSON *open_runs; /* run ids with an intent and no outcome yet */
    char last[RX_AUDIT_HEX_LEN];
    size_t records;
} scan;

/* Reads one rotated file: its records' pairing and its last hash. */
static int scan_file(const char *path, scan *sc, rexec_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = rx_fs_read_file(path, PRUNE_MAX_FILE, &text, &len, REXEC_EAUDIT, err);
    for (char *p = text; r == 0 && p && p < text + len;) {
        char *eol = memchr(p, '\n', (size_t)(text + len - p));
        size_t n = eol ? (size_t)(eol - p) : (size_t)(text + len - p);
        cJSON *o = cJSON_ParseWithLength(p, n);
        const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "run_id");
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(o, "phase");
        if (!cJSON_IsString(run) || !cJSON_IsString(ph) || rx_audit_line_hash(p, n, sc->last))
            r = rx_fail(err, REXEC_EAUDIT, "%s: a line that is not an audit record: run `rexec "
                                           "audit verify`; nothing was pruned", path);
        else if (strcmp(ph->valuestring, "intent") == 0)
            cJSON_AddItemToArray(sc->open_runs, cJSON_CreateString(run->valuestring));
        else if (strcmp(ph->valuestring, "outcome") == 0 ||
                 strcmp(ph->valuestring, "abandoned") == 0) {
            int i = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, sc->open_runs) {
                if (strcmp(x->valuestring, run->valuestring) == 0)
                    break;
                i++;
            }
            if (x)
                cJSON_DeleteItemFromArray(sc->open_runs, i);
        }
        sc->records += r == 0;
        cJSON_Delete(o);
        p += n + 1;
    }
    free(text);
    return r;
}

static int write_anchor(const char *dir, const cJSON *anchor, rexec_error *err)
{
    char *tmp = rx_fs_join(dir, ".anchor.json.tmp"), *path = rx_fs_join(dir, "anchor.json");
    char *text = cJSON_Print(anchor);
    int r = 0, fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    if (fd < 0 || text == NULL || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
        write(fd, "\n", 1) != 1 || fsync(fd) != 0 || rename(tmp, path) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot write the anchor: %s", dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (r == 0)
        r = rx_fs_fsync_dir(dir, REXEC_EAUDIT, err);
    free(text);
    free(tmp);
    free(path);
    return r;
}

/* Which rotated files go: every one older than before. Runs whose intent goes but whose
 * outcome stays are listed in *open_runs, so verify does not take their outcome for a forgery. */
static int choose(const char *dir, char **names, size_t n, const cJSON *old, time_t before,
                  cJSON *files, char last[RX_AUDIT_HEX_LEN], size_t *records, cJSON **open_runs,
                  rexec_error *err)
{
    scan sc = {.open_runs = cJSON_CreateArray()};
    const cJSON *o;
    int r = sc.open_runs ? 0 : rx_fail(err, REXEC_ENOMEM, "out of memory");
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(old, "open_runs"))
        cJSON_AddItemToArray(sc.open_runs, cJSON_Duplicate(o, 1));
    for (size_t i = 0; r == 0 && i < n && rx_audit_rotated_time(names[i]) < before; i++) {
        char *path = rx_fs_join(dir, names[i]);
        if (!rx_audit_anchor_names(old, names[i])) /* else a crash left it: it goes now */
            r = path ? scan_file(path, &sc, err) : rx_fail(err, REXEC_ENOMEM, "out of memory");
        free(path);
        if (r == 0)
            cJSON_AddItemToArray(files, cJSON_CreateString(names[i]));
    }
    memcpy(last, sc.last, RX_AUDIT_HEX_LEN);
    *records = sc.records;
    *open_runs = sc.open_runs;
    return r;
}

int rx_audit_prune(const char *ws_dir, const char *key_file, time_t before,
                   rx_audit_prune_stats *st, rexec_error *err)
{
    char *dir = rx_fs_join(ws_dir, "audit"), **names = NULL, last[RX_AUDIT_HEX_LEN] = "", ts[32];
    size_t n = 0, records = 0;
    cJSON *old = NULL, *files = cJSON_CreateArray(), *anchor = NULL, *open_runs = NULL;
    rx_audit *a = NULL;
    int r;
    memset(st, 0, sizeof(*st));
    if (dir == NULL || files == NULL)
        return free(dir), cJSON_Delete(files), rx_fail(err, REXEC_ENOMEM, "out of memory");
    if ((r = rx_audit_anchor_load(ws_dir, &old, err)) != 0 ||
        (r = rx_audit_rotated(dir, &names, &n, err)) != 0 ||
        (r = choose(dir, names, n, old, before, files, last, &records, &open_runs, err)) != 0)
        goto out;
    st->files = (size_t)cJSON_GetArraySize(files);
    st->records = records;
    if (st->files == 0)
        goto out;
    if (last[0] == 0) /* only leftovers the old anchor names: it stays as it is */
        memcpy(last, cJSON_GetObjectItemCaseSensitive(old, "anchor")->valuestring,
               RX_AUDIT_HEX_LEN);
    anchor = cJSON_CreateObject();
    rx_audit_timestamp(ts);
    cJSON_AddStringToObject(anchor, "ts", ts);
    cJSON_AddStringToObject(anchor, "run_id", ts);
    cJSON_AddStringToObject(anchor, "phase", "prune");
    cJSON_AddStringToObject(anchor, "anchor", last);
    const cJSON *f;
    cJSON *all = cJSON_CreateArray(); /* every file an anchor ever covered, for verify to skip */
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(old, "files"))
        cJSON_AddItemToArray(all, cJSON_CreateString(f->valuestring));
    cJSON_ArrayForEach(f, files)
        if (!rx_audit_anchor_names(old, f->valuestring))
            cJSON_AddItemToArray(all, cJSON_CreateString(f->valuestring));
    cJSON_AddItemToObject(anchor, "files", all);
    cJSON_AddNumberToObject(anchor, "records", (double)records);
    cJSON_AddItemToObject(anchor, "open_runs", open_runs);
    open_runs = NULL;
    cJSON *rec = cJSON_Duplicate(anchor, 1);
    if ((r = rx_audit_open(&a, ws_dir, key_file, err)) == 0)
        r = rx_audit_append(a, rec, NULL, err); /* the chain says it first */
    cJSON_Delete(rec);
    if (r == 0)
        r = write_anchor(dir, anchor, err);
    cJSON_ArrayForEach(f, files) {
        char *path = r == 0 ? rx_fs_join(dir, f->valuestring) : NULL;
        if (path && unlink(path) != 0 && errno != ENOENT)
            r = rx_fail(err, REXEC_EAUDIT, "%s: cannot remove: %s", path, strerror(errno));
        free(path);
    }
out:
    rx_audit_close(a);
    rx_audit_names_free(names, n);
    cJSON_Delete(old);
    cJSON_Delete(files);
    cJSON_Delete(anchor);
    cJSON_Delete(open_runs);
    free(dir);
    return r;
}
