/* The audit log's head: audit/head.json names the last record (its seq and hash) with a mac,
 * and is replaced after every append. Checked before each append against the chain's end, so
 * a cut log or a removed file stops the next call; shipped elsewhere (`rexec audit head`), it
 * lets `audit verify --head` catch what a local copy cannot: a rollback of log and head
 * together. docs/audit.md, "The head". */
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
#include "evidence.h"
#include "fsutil.h"
#include "jsonx.h"

#define HEAD_FILE_MAX 4096
#define HEAD_MAC_TAG "rexec-audit-head-v1"
#define HEAD_WAY_OUT "; see `rexec audit verify`, then `rexec audit head --reset` once you know why"

int rx_audit_head_mac(const rx_buf *key, long long seq, const char *hash,
                      char mac[RX_AUDIT_HEX_LEN])
{
    char text[128];
    int n = snprintf(text, sizeof(text), HEAD_MAC_TAG " %lld %s", seq, hash);
    return rx_audit_digest(key, text, (size_t)n, mac);
}

static int is_hex64(const cJSON *it)
{
    if (!cJSON_IsString(it) || strlen(it->valuestring) != 64)
        return 0;
    return strspn(it->valuestring, "0123456789abcdef") == 64;
}

int rx_audit_head_parse(const char *text, size_t len, const char *what, int code,
                        rx_audit_head *h, rexec_error *err)
{
    cJSON *o = cJSON_ParseWithLength(text, len);
    const cJSON *hash = cJSON_GetObjectItemCaseSensitive(o, "hash");
    const cJSON *mac = cJSON_GetObjectItemCaseSensitive(o, "mac");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "ts");
    rexec_error e;
    long long seq = 0;
    int r = 0;

    memset(h, 0, sizeof(*h));
    if (!cJSON_IsObject(o))
        r = rx_fail(err, code, "%s: not a JSON object (expected what `rexec audit head` prints)",
                    what);
    else if (rx_json_get_int(o, "seq", "", 1, 0, RX_JSON_MAX_SAFE_INT, &seq, code, &e) != 0)
        r = rx_fail(err, code, "%s: \"seq\" must be a whole number of records", what);
    else if (!is_hex64(hash) || !is_hex64(mac))
        r = rx_fail(err, code, "%s: \"hash\" and \"mac\" must be 64 lowercase hex digits", what);
    if (r == 0) {
        h->seq = seq;
        memcpy(h->hash, hash->valuestring, RX_AUDIT_HEX_LEN);
        memcpy(h->mac, mac->valuestring, RX_AUDIT_HEX_LEN);
        snprintf(h->ts, sizeof(h->ts), "%s", cJSON_IsString(ts) ? ts->valuestring : "");
        h->keyed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "keyed"));
    }
    cJSON_Delete(o);
    return r;
}

int rx_audit_head_load(const char *audit_dir, rx_audit_head *h, rexec_error *err)
{
    char *path = rx_fs_join(audit_dir, RX_AUDIT_HEAD_FILE), *text = NULL;
    struct stat st;
    size_t len = 0;
    int r = 0;

    memset(h, 0, sizeof(*h));
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (lstat(path, &st) != 0)
        r = errno == ENOENT ? 0 : rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    else if ((r = rx_fs_check(path, 0, REXEC_EAUDIT, err)) == 0 &&
             (r = rx_fs_read_file(path, HEAD_FILE_MAX, &text, &len, REXEC_EAUDIT, err)) == 0)
        r = rx_audit_head_parse(text, len, path, REXEC_EAUDIT, h, err);
    free(text);
    free(path);
    return r;
}

char *rx_audit_head_json(const rx_audit_head *h)
{
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    if (o != NULL && cJSON_AddNumberToObject(o, "seq", (double)h->seq) &&
        cJSON_AddStringToObject(o, "hash", h->hash) && cJSON_AddStringToObject(o, "ts", h->ts) &&
        cJSON_AddBoolToObject(o, "keyed", h->keyed) && cJSON_AddStringToObject(o, "mac", h->mac))
        s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static int head_fill(rx_audit_head *h, const rx_buf *key, long long seq, const char *hash)
{
    memset(h, 0, sizeof(*h));
    h->seq = seq;
    memcpy(h->hash, hash, RX_AUDIT_HEX_LEN);
    rx_audit_timestamp(h->ts);
    h->keyed = key != NULL && key->len > 0;
    return rx_audit_head_mac(key, seq, hash, h->mac);
}

/* rx_audit_head_store in two steps: prepare writes head.json.tmp, commit makes it durable and
 * renames it into place, abort removes it. */
typedef struct rx_audit_head_tmp {
    int fd;
    char *tmp, *path;
} rx_audit_head_tmp;

static void head_abort(rx_audit_head_tmp *t);

static void head_paths_free(rx_audit_head_tmp *t)
{
    free(t->tmp);
    free(t->path);
    t->tmp = t->path = NULL;
}

static int head_prepare(const char *audit_dir, const rx_buf *key, long long seq,
                        const char *hash, rx_audit_head_tmp *t, rexec_error *err)
{
    rx_audit_head h;
    char *json = NULL;
    int r = 0;

    t->fd = -1;
    t->path = rx_fs_join(audit_dir, RX_AUDIT_HEAD_FILE);
    t->tmp = rx_fs_join(audit_dir, "." RX_AUDIT_HEAD_FILE ".tmp");
    if (t->path == NULL || t->tmp == NULL || head_fill(&h, key, seq, hash) != 0 ||
        (json = rx_audit_head_json(&h)) == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory writing the audit head");
        goto out;
    }
    if (unlink(t->tmp) != 0 && errno != ENOENT) {
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", t->tmp, strerror(errno));
        goto out;
    }
    if ((r = rx_fs_create_private(AT_FDCWD, t->tmp, &t->fd, REXEC_EAUDIT, err)) != 0)
        goto out;
    size_t n = strlen(json);
    json[n] = '\n'; /* the NUL becomes the newline: one write of the whole file */
    if (rx_fs_write_all(t->fd, json, n + 1) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot update the audit head: %s", t->path,
                    strerror(errno));
    else
        (void)sync_file_range(t->fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a hint: errors come later */
out:
    free(json);
    if (r != 0)
        head_abort(t);
    return r;
}

/* fdatasync, then the rename over head.json: a reader sees the old head or the new one, never
 * half. The directory is not fsynced: after a power loss the head may lag the log by the last
 * records, which the next append and verify accept (a head behind the log is an older true
 * point of the chain). */
static int head_commit(rx_audit_head_tmp *t, rexec_error *err)
{
    int r = 0;
    if (fdatasync(t->fd) != 0 || rename(t->tmp, t->path) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot update the audit head: %s", t->path,
                    strerror(errno));
    close(t->fd);
    t->fd = -1;
    if (r != 0)
        unlink(t->tmp);
    head_paths_free(t);
    return r;
}

static void head_abort(rx_audit_head_tmp *t)
{
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    if (t->tmp != NULL)
        unlink(t->tmp);
    head_paths_free(t);
}

int rx_audit_head_store(const char *audit_dir, const rx_buf *key, long long seq,
                        const char *hash, rexec_error *err)
{
    rx_audit_head_tmp t;
    int r = head_prepare(audit_dir, key, seq, hash, &t, err);
    return r ? r : head_commit(&t, err);
}

/* The head's text padded with blanks to exactly RX_AUDIT_HEAD_SIZE bytes, the last a newline:
 * JSON readers skip the blanks, and the file's size never changes, so fdatasync writes the one
 * block and no inode. 0, or -1 when it does not fit (then the caller stores it the old way). */
static int head_padded(const rx_buf *key, long long seq, const char *hash,
                       char out[RX_AUDIT_HEAD_SIZE])
{
    rx_audit_head h;
    char *json = NULL;
    size_t n;
    if (head_fill(&h, key, seq, hash) != 0 || (json = rx_audit_head_json(&h)) == NULL)
        return -1;
    n = strlen(json);
    if (n + 1 > RX_AUDIT_HEAD_SIZE) {
        free(json);
        return -1;
    }
    memcpy(out, json, n);
    memset(out + n, ' ', RX_AUDIT_HEAD_SIZE - 1 - n);
    out[RX_AUDIT_HEAD_SIZE - 1] = '\n';
    free(json);
    return 0;
}

int rx_audit_head_write(const char *audit_dir, const rx_buf *key, long long seq,
                        const char *hash, int *sync_fd, rexec_error *err)
{
    char buf[RX_AUDIT_HEAD_SIZE], *path = rx_fs_join(audit_dir, RX_AUDIT_HEAD_FILE);
    struct stat st;
    int fd = -1, r = 0;

    *sync_fd = -1;
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory writing the audit head");
    /* O_NONBLOCK: a FIFO planted there fails the open (no reader) instead of hanging it */
    fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        st.st_size > RX_AUDIT_HEAD_SIZE || head_padded(key, seq, hash, buf) != 0) {
        if (fd >= 0)
            close(fd);
        free(path);
        return rx_audit_head_store(audit_dir, key, seq, hash, err); /* durable when it returns */
    }
    errno = 0;
    if (pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf)) {
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot update the audit head: %s", path,
                    errno ? strerror(errno) : "short write");
        close(fd);
    } else {
        *sync_fd = fd;
    }
    free(path);
    return r;
}

int rx_audit_head_sync(const char *audit_dir, int fd, rexec_error *err)
{
    int r = 0;
    if (fd < 0)
        return 0;
    if (fdatasync(fd) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot update the audit head: %s", audit_dir,
                    RX_AUDIT_HEAD_FILE, strerror(errno));
    close(fd);
    return r;
}

int rx_audit_head_update(const char *audit_dir, const rx_buf *key, long long seq,
                         const char *hash, rexec_error *err)
{
    int fd, r = rx_audit_head_write(audit_dir, key, seq, hash, &fd, err);
    if (r == 0)
        r = rx_audit_head_sync(audit_dir, fd, err);
    return r;
}

/* 1 when the stored head h and the chain's end t disagree (why says how), else 0. A head one
 * record behind is accepted when it names the last record's prev: after a power loss the last
 * rename of head.json may not have reached the disk. */
static int head_disagrees(const rx_audit_head *h, const rx_audit_tail *t, char *why, size_t n)
{
    if (h->seq == 0) /* the head of nothing, written before the first record: behind any log */
        return 0;
    if (t->seq == 0)
        snprintf(why, n, "the log is empty, but audit/head.json says it ends at record %lld: "
                         "the audit files were removed", h->seq);
    else if (t->seq < 0)
        snprintf(why, n, "the log's last line has no sequence number, but audit/head.json says "
                         "the log ends at record %lld: an older copy was put back, or another "
                         "program wrote the line", h->seq);
    else if (h->seq > t->seq)
        snprintf(why, n, "audit/head.json says the log ends at record %lld, but it ends at "
                         "record %lld: records were removed (a cut, a deleted file) or an older "
                         "copy was put back", h->seq, t->seq);
    else if (h->seq == t->seq && strcmp(h->hash, t->hash) != 0)
        snprintf(why, n, "record %lld does not have the hash audit/head.json names: the log was "
                         "replaced", t->seq);
    else if (h->seq == t->seq - 1 && t->prev[0] && strcmp(h->hash, t->prev) != 0)
        snprintf(why, n, "record %lld does not have the hash audit/head.json names: the log was "
                         "replaced", h->seq);
    else
        return 0;
    return 1;
}

/* The loaded head h (mac[0] 0: there is none) against the chain's end t. */
static int head_against(const char *audit_dir, const rx_buf *key, const rx_audit_head *h,
                        const rx_audit_tail *t, rexec_error *err)
{
    char why[400], mac[RX_AUDIT_HEX_LEN];

    if (h->mac[0] == 0) { /* no head.json */
        if (t->seq <= 0) /* an empty chain, or one written before heads existed */
            return 0;
        return rx_fail(err, REXEC_EAUDIT,
                       "%s/" RX_AUDIT_HEAD_FILE ": missing, but the log's last record is number "
                       "%lld: the head was removed (or lost in a crash right after the first "
                       "record): refusing to append" HEAD_WAY_OUT, audit_dir, t->seq);
    }
    if (rx_audit_head_mac(key, h->seq, h->hash, mac) != 0)
        return rx_fail(err, REXEC_EINTERNAL, "audit head: SHA-256 failed");
    if (strcmp(mac, h->mac) != 0)
        return rx_fail(err, REXEC_EAUDIT,
                       "%s/" RX_AUDIT_HEAD_FILE ": its mac does not match (edited, written "
                       "without the audit key, or the log is keyed and no key was given): "
                       "refusing to append" HEAD_WAY_OUT, audit_dir);
    if (head_disagrees(h, t, why, sizeof(why)))
        return rx_fail(err, REXEC_EAUDIT, "%s: %s: refusing to append" HEAD_WAY_OUT, audit_dir,
                       why);
    return 0;
}

int rx_audit_head_check(const char *audit_dir, const rx_buf *key, const rx_audit_tail *t,
                        rexec_error *err)
{
    rx_audit_head h;
    int r = rx_audit_head_load(audit_dir, &h, err);
    return r != 0 ? r : head_against(audit_dir, key, &h, t, err);
}

/* The head of nothing (seq 0, 64 zeros) is written, and the directory synced, before the first
 * numbered record, so that head.json exists whenever a numbered record does: a head that then
 * fails to follow the record (EMFILE, a full disk) is behind the log, a state appends and verify
 * accept, and the next append brings it up; never "missing", which only a removal explains.
 * If even that cannot be written, nothing is appended and the next append tries again. */
static int head_first(const char *audit_dir, const rx_buf *key, rexec_error *err)
{
    int r = rx_audit_head_store(audit_dir, key, 0, RX_AUDIT_ZERO_HASH, err);
    if (r == 0)
        r = rx_fs_fsync_dir(audit_dir, REXEC_EAUDIT, err);
    if (r != 0) /* the log it was for is named first: that is what the caller could not do */
        return rx_fail_prefix(err, "%s/audit.log: cannot create the audit head before the first "
                                   "record (nothing was written; the next call tries again): ",
                              audit_dir);
    return 0;
}

int rx_audit_head_prepare(const char *audit_dir, const rx_buf *key, const rx_audit_tail *t,
                          rexec_error *err)
{
    rx_audit_head h;
    int r = rx_audit_head_load(audit_dir, &h, err);
    if (r != 0)
        return r;
    if (h.mac[0] == 0 && t->seq <= 0) /* no head, and no numbered record yet */
        return head_first(audit_dir, key, err);
    return head_against(audit_dir, key, &h, t, err);
}

/* ---- `rexec audit head` ----------------------------------------------------------------- */

int rx_audit_dir_lock(const char *audit_dir, int exclusive, int *fd, rexec_error *err)
{
    char *lock = rx_fs_join(audit_dir, ".lock");
    int r = 0;
    *fd = -1;
    if (lock == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    *fd = open(lock, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); /* a FIFO: no wait */
    if (*fd < 0 && errno != ENOENT) /* no lock file: nothing was ever appended */
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", lock, strerror(errno));
    while (*fd >= 0 && flock(*fd, exclusive ? LOCK_EX : LOCK_SH) != 0 && r == 0)
        if (errno != EINTR)
            r = rx_fail(err, REXEC_EAUDIT, "%s: flock: %s", lock, strerror(errno));
    free(lock);
    return r;
}

/* Rewrites head.json from the chain's end t, under the lock the caller holds. */
static int head_reset_locked(const char *audit_dir, const rx_buf *key, const rx_audit_tail *t,
                             rexec_error *err)
{
    if (t->seq < 0)
        return rx_fail(err, REXEC_EAUDIT,
                       "audit head --reset: the log's last line has no sequence number (written "
                       "before heads existed, or by another program): the next append starts "
                       "the numbering, nothing to reset");
    if (t->seq == 0) {
        char *path = rx_fs_join(audit_dir, RX_AUDIT_HEAD_FILE);
        int gone = path != NULL && (unlink(path) == 0 || errno == ENOENT);
        free(path);
        return gone ? 0 : rx_fail(err, REXEC_EAUDIT, "audit head --reset: cannot remove %s/%s",
                                  audit_dir, RX_AUDIT_HEAD_FILE);
    }
    return rx_audit_head_store(audit_dir, key, t->seq, t->hash, err);
}

/* The "head_reset" record that makes a reset visible in the chain itself. */
static int head_reset_record(const char *ws_dir, const char *key_file, const rx_audit_head *old,
                             const rx_audit_tail *t, rexec_error *err)
{
    char run_id[RX_RUN_ID_LEN], *old_json = old->mac[0] ? rx_audit_head_json(old) : NULL;
    rx_audit *a = NULL;
    cJSON *rec = cJSON_CreateObject();
    int r;

    rx_run_id_new(run_id);
    if (rec == NULL || !cJSON_AddStringToObject(rec, "run_id", run_id) ||
        !cJSON_AddStringToObject(rec, "phase", "head_reset") ||
        !cJSON_AddItemToObject(rec, "previous_head",
                               old_json ? cJSON_Parse(old_json) : cJSON_CreateNull()) ||
        !cJSON_AddNumberToObject(rec, "reset_at_seq", (double)t->seq)) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
    } else if ((r = rx_audit_open(&a, ws_dir, key_file, err)) == 0) {
        r = rx_audit_append(a, rec, NULL, err);
    }
    rx_audit_close(a);
    cJSON_Delete(rec);
    free(old_json);
    return r;
}

/* The head as it stands: checked against the chain's end (and the key), never made up. */
static int head_read_checked(const char *audit_dir, const rx_buf *key, rx_audit_head *out,
                             rx_audit_tail *t, rexec_error *err)
{
    int r;
    if ((r = rx_audit_chain_tail(audit_dir, t, err)) != 0 ||
        (r = rx_audit_head_load(audit_dir, out, err)) != 0 ||
        (r = head_against(audit_dir, key, out, t, err)) != 0)
        return r;
    if (out->mac[0] == 0 && t->seq < 0)
        return rx_fail(err, REXEC_EAUDIT,
                       "audit head: the log was written before sequence numbers: the next "
                       "append starts them and writes the head");
    if (out->mac[0] == 0) /* an empty chain: the head of nothing */
        return head_fill(out, key, 0, RX_AUDIT_ZERO_HASH) == 0
                   ? 0 : rx_fail(err, REXEC_EINTERNAL, "audit head: SHA-256 failed");
    return 0;
}

int rx_audit_head_current(const char *ws_dir, const char *key_file, int reset,
                          rx_audit_head *out, rexec_error *err)
{
    char *dir = rx_fs_join(ws_dir, "audit");
    rx_audit_head old;
    rx_audit_tail t;
    rx_buf key;
    int lock = -1, r;

    rx_buf_init(&key, 8192);
    if (dir == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    if ((key_file != NULL && (r = rx_audit_key_load(key_file, ws_dir, &key, err)) != 0) ||
        (r = rx_audit_dir_lock(dir, reset, &lock, err)) != 0)
        goto out;
    if (reset) {
        if ((r = rx_audit_head_load(dir, &old, err)) != 0)
            memset(&old, 0, sizeof(old)); /* an unreadable head is what a reset replaces */
        if ((r = rx_audit_chain_tail(dir, &t, err)) != 0 ||
            (r = head_reset_locked(dir, &key, &t, err)) != 0)
            goto out;
        close(lock);
        lock = -1;
        if ((r = head_reset_record(ws_dir, key_file, &old, &t, err)) != 0 ||
            (r = rx_audit_dir_lock(dir, 0, &lock, err)) != 0)
            goto out;
    }
    r = head_read_checked(dir, &key, out, &t, err);
out:
    if (lock >= 0)
        close(lock);
    rx_buf_free(&key);
    free(dir);
    return r;
}
