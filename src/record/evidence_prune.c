/* `rexec evidence prune`: evidence directories are flat (stdout, stderr, meta.json), named by
 * run id, and the run id starts with its UTC time, so age and order come from the name.
 * A directory gets its final name when its call opens it (evidence.c): it is evidence only once
 * its meta.json is complete (rx_evidence_dir_state); before that it is a call in progress
 * (locked by its writer: left alone) or a leftover (a crash, a failed commit: removed like a
 * .tmp- one, never counted as a run). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "evidence_prune.h"
#include "fsutil.h"

typedef struct ev_entry {
    char *name;
    time_t t;
    int tmp;
} ev_entry;

#define META_MAX (1u << 20) /* a meta.json is a few KiB; anything bigger is not one of ours */

static int meta_sha_ok(const cJSON *m, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    return cJSON_IsString(v) && strlen(v->valuestring) == 64 &&
           strspn(v->valuestring, "0123456789abcdef") == 64;
}

/* The stream's file holds as many bytes as meta says were stored. */
static int meta_size_ok(int fd, const cJSON *m, const char *key, const char *file)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    struct stat st;
    return cJSON_IsNumber(v) && fstatat(fd, file, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISREG(st.st_mode) && (double)st.st_size == v->valuedouble;
}

/* meta.json of the directory fd (named name) is complete: a JSON object naming this run, with
 * both streams' SHA-256 and sizes, the sizes those of the files. An empty or cut meta.json (a
 * crash before or during the commit), one of another run (stale blocks after a crash) or a
 * stream shorter than stored is not. */
static int meta_complete(int fd, const char *name)
{
    int mfd = openat(fd, "meta.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    char *text = NULL;
    int ok = 0;
    if (mfd < 0)
        return 0;
    if (fstat(mfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= META_MAX && (text = malloc((size_t)st.st_size)) != NULL &&
        pread(mfd, text, (size_t)st.st_size, 0) == st.st_size) {
        cJSON *m = cJSON_ParseWithLength(text, (size_t)st.st_size);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "run_id");
        ok = cJSON_IsObject(m) && cJSON_IsString(id) && strcmp(id->valuestring, name) == 0 &&
             meta_sha_ok(m, "stdout_sha256") && meta_sha_ok(m, "stderr_sha256") &&
             meta_size_ok(fd, m, "stdout_bytes_stored", "stdout") &&
             meta_size_ok(fd, m, "stderr_bytes_stored", "stderr");
        cJSON_Delete(m);
    }
    free(text);
    close(mfd);
    return ok;
}

rx_evidence_dir_state rx_evidence_dir_state_at(int dfd, const char *name, int *lock_fd)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    *lock_fd = -1;
    if (fd < 0)
        return errno == ENOENT ? RX_EV_GONE : RX_EV_NOT_A_DIR;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        close(fd);
        return RX_EV_IN_PROGRESS;
    }
    /* Under the lock (or on a file system without flock): its writer is gone or done, nothing
     * changes it any more. */
    rx_evidence_dir_state s =
        name[0] != '.' && meta_complete(fd, name) ? RX_EV_COMPLETE : RX_EV_INCOMPLETE;
    *lock_fd = fd;
    return s;
}

/* "20261202T101500Z-..." -> its time; else the directory's mtime. */
static time_t entry_time(int dfd, const char *name)
{
    struct tm tm = {0};
    struct stat st;
    const char *s = strncmp(name, ".tmp-", 5) == 0 ? name + 5 : name;
    const char *end = strptime(s, "%Y%m%dT%H%M%SZ", &tm);
    if (end != NULL && (*end == '-' || *end == 0))
        return timegm(&tm);
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mtime : 0;
}

static int entry_newer(const void *a, const void *b)
{
    const ev_entry *x = a, *y = b;
    return x->t < y->t ? 1 : x->t > y->t ? -1 : strcmp(y->name, x->name);
}

/* Removes one flat run directory; adds the bytes of its files to *bytes. */
static int remove_run(int dfd, const char *name, uint64_t *bytes)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    struct stat st;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            *bytes += (uint64_t)st.st_size;
        unlinkat(fd, e->d_name, 0);
    }
    closedir(d);
    return unlinkat(dfd, name, AT_REMOVEDIR);
}

static int list_runs(int dfd, ev_entry **out, size_t *n)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    if (d == NULL)
        return fd >= 0 ? close(fd), -1 : -1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (*n == cap) {
            ev_entry *b = realloc(*out, (cap = cap ? cap * 2 : 256) * sizeof(**out));
            if (b == NULL)
                break;
            *out = b;
        }
        ev_entry *x = &(*out)[*n];
        if ((x->name = strdup(e->d_name)) == NULL)
            break;
        x->t = entry_time(dfd, e->d_name);
        x->tmp = e->d_name[0] == '.';
        (*n)++;
    }
    closedir(d);
    return 0;
}

int rx_evidence_prune(const char *ws_dir, time_t before, size_t keep, rx_evidence_prune_stats *st,
                      rexec_error *err)
{
    char *dir = rx_fs_join(ws_dir, "evidence");
    ev_entry *v = NULL;
    size_t n = 0, runs = 0;
    int r = 0;
    memset(st, 0, sizeof(*st));
    if (dir == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        r = errno == ENOENT ? 0 : rx_fail(err, REXEC_EAUDIT, "%s: %s", dir,
                                          rx_fs_open_dir_why(dir, errno));
        free(dir);
        return r;
    }
    if (list_runs(dfd, &v, &n) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", dir, strerror(errno));
    qsort(v, n, sizeof(*v), entry_newer);
    for (size_t i = 0; r == 0 && i < n; i++) {
        int lock_fd = -1;
        if (v[i].tmp && v[i].t >= before)
            continue; /* a young build or spare directory: not looked at (nor locked) */
        rx_evidence_dir_state ds = rx_evidence_dir_state_at(dfd, v[i].name, &lock_fd);
        if (ds == RX_EV_IN_PROGRESS || ds == RX_EV_GONE)
            continue; /* its writer lives (a call or a spare in progress), or it went meanwhile
                       * (a spare taken, an abort, a commit's .tmp- rename) */
        int run = !v[i].tmp && ds != RX_EV_INCOMPLETE; /* not a directory: judged as a run */
        int young = v[i].t >= before;
        if (run && runs++ < keep)
            young = 1; /* the newest keep runs stay, whatever their age */
        if (young) {
            st->kept += run;
        } else if (remove_run(dfd, v[i].name, &st->bytes_freed) != 0) {
            r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot remove: %s", dir, v[i].name,
                        strerror(errno));
        } else {
            st->removed += run;
            st->incomplete += !run;
        }
        if (lock_fd >= 0)
            close(lock_fd);
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    close(dfd);
    free(dir);
    return r;
}
