/* `rexec evidence prune`: evidence directories are flat (stdout, stderr, meta.json), named by
 * run id, and the run id starts with its UTC time, so age and order come from the name. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "evidence_prune.h"
#include "fsutil.h"

typedef struct ev_entry {
    char *name;
    time_t t;
    int tmp;
} ev_entry;

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
        int young = v[i].t >= before;
        if (!v[i].tmp && runs++ < keep)
            young = 1; /* the newest keep runs stay, whatever their age */
        if (young) {
            st->kept += !v[i].tmp;
            continue;
        }
        if (remove_run(dfd, v[i].name, &st->bytes_freed) != 0)
            r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot remove: %s", dir, v[i].name,
                        strerror(errno));
        else
            st->removed += !v[i].tmp;
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    close(dfd);
    free(dir);
    return r;
}
