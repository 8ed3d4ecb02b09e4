/* Evidence per executed run: evidence/<run_id>/{stdout,stderr,meta.json}, built in
 * evidence/.tmp-<run_id> and renamed into place, so a reader never sees half a record and a
 * crash leaves at most a .tmp- directory (which is never taken for evidence). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "err.h"
#include "evidence.h"
#include "fsutil.h"

static const char *const ev_files[] = {"stdout", "stderr", "meta.json"};

void rx_run_id_new(char out[RX_RUN_ID_LEN])
{
    static unsigned long counter;
    unsigned char rnd[8];
    struct timespec now;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &now);
    if (RAND_bytes(rnd, sizeof(rnd)) != 1 &&
        getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        /* No randomness at all: still unique within this process and very likely across. */
        unsigned long long x = (unsigned long long)now.tv_nsec ^
                               ((unsigned long long)getpid() << 32) ^ ++counter;
        memcpy(rnd, &x, sizeof(rnd));
    }
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(out, RX_RUN_ID_LEN, "%Y%m%dT%H%M%SZ-", &tm);
    rx_hex_encode(rnd, sizeof(rnd), out + n); /* 17 + 16 + NUL fit RX_RUN_ID_LEN */
}

/* A run id becomes a directory name: letters, digits, '-', '_' and '.', not starting with '.'
 * (no "..", no hidden .tmp- name, no '/'). */
static int ev_check_id(const char *id, rexec_error *err)
{
    size_t n = strlen(id);
    if (n == 0 || n >= RX_RUN_ID_LEN || id[0] == '.' ||
        strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != n)
        return rx_fail(err, REXEC_EAUDIT, "evidence: invalid run id \"%.64s\"", id);
    return 0;
}

static int ev_set(cJSON *meta, const char *name, cJSON *item)
{
    if (item == NULL)
        return -1;
    cJSON_DeleteItemFromObjectCaseSensitive(meta, name);
    if (!cJSON_AddItemToObject(meta, name, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* Adds what was stored: sizes and SHA-256 of both streams (and the run id when missing). */
static int ev_complete_meta(cJSON *meta, const char *run_id, const unsigned char *out,
                            size_t out_len, const unsigned char *err_data, size_t err_len,
                            rexec_error *err)
{
    char so[65], se[65];
    if (!cJSON_IsObject(meta))
        return rx_fail(err, REXEC_EAUDIT, "evidence: meta is not a JSON object");
    if (rx_sha256_hex(out ? out : (const unsigned char *)"", out_len, so) != 0 ||
        rx_sha256_hex(err_data ? err_data : (const unsigned char *)"", err_len, se) != 0)
        return rx_fail(err, REXEC_EINTERNAL, "evidence: SHA-256 failed");
    if ((!cJSON_GetObjectItemCaseSensitive(meta, "run_id") &&
         ev_set(meta, "run_id", cJSON_CreateString(run_id)) != 0) ||
        ev_set(meta, "stdout_sha256", cJSON_CreateString(so)) != 0 ||
        ev_set(meta, "stderr_sha256", cJSON_CreateString(se)) != 0 ||
        ev_set(meta, "stdout_bytes_stored", cJSON_CreateNumber((double)out_len)) != 0 ||
        ev_set(meta, "stderr_bytes_stored", cJSON_CreateNumber((double)err_len)) != 0)
        return rx_fail(err, REXEC_ENOMEM, "evidence: out of memory");
    return 0;
}

/* The last secret scan, before anything reaches the disk. */
static int ev_scan(const rx_redactor *r, const char *run_id, const void *const data[3],
                   const size_t len[3], rexec_error *err)
{
    for (int i = 0; r != NULL && i < 3; i++)
        if (rx_redact_contains_secret(r, data[i], len[i]))
            return rx_fail(err, REXEC_EAUDIT,
                           "evidence for run %s: %s still holds a secret value: refusing to "
                           "write it", run_id, ev_files[i]);
    return 0;
}

/* Removes a half-built .tmp- directory after a failure: what was written there is not
 * evidence of anything. */
static void ev_remove_tmp(const char *tmp)
{
    int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
        for (int i = 0; i < 3; i++)
            unlinkat(dfd, ev_files[i], 0);
        close(dfd);
    }
    rmdir(tmp);
}

/* A fresh .tmp- directory, 0700 whatever the umask; a leftover of the same name is refused
 * rather than reused (run ids are unique, so it would be someone else's). */
static int ev_mkdir_tmp(const char *tmp, int *dfd, rexec_error *err)
{
    if (mkdir(tmp, 0700) != 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: cannot create: %s", tmp, strerror(errno));
    *dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*dfd < 0 || fchmod(*dfd, 0700) != 0) {
        int r = rx_fail(err, REXEC_EAUDIT, "%s: %s", tmp, strerror(errno));
        if (*dfd >= 0)
            close(*dfd);
        *dfd = -1;
        rmdir(tmp);
        return r;
    }
    return 0;
}

static int ev_write_file(int dfd, const char *dir, const char *name, const void *data,
                         size_t len, rexec_error *err)
{
    int fd = -1, r = rx_fs_create_private(dfd, name, &fd, REXEC_EAUDIT, err);
    if (r != 0)
        return rx_fail_prefix(err, "%s/", dir);
    if (rx_fs_write_all(fd, data, len) != 0 || fsync(fd) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", dir, name, strerror(errno));
    if (close(fd) != 0 && r == 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", dir, name, strerror(errno));
    return r;
}

/* Builds the three files in tmp, fsyncs them and the directory, then renames tmp to final
 * (never over an existing directory). */
static int ev_build(const char *edir, const char *tmp, const char *final,
                    const void *const data[3], const size_t len[3], rexec_error *err)
{
    int dfd = -1, r;
    struct stat st;

    if (lstat(final, &st) == 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: already exists: refusing to replace evidence",
                       final);
    if ((r = ev_mkdir_tmp(tmp, &dfd, err)) != 0)
        return r;
    for (int i = 0; r == 0 && i < 3; i++)
        r = ev_write_file(dfd, tmp, ev_files[i], data[i], len[i], err);
    if (r == 0 && fsync(dfd) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", tmp, strerror(errno));
    close(dfd);
    if (r == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot rename to %s: %s", tmp, final,
                    strerror(errno));
    if (r == 0)
        r = rx_fs_fsync_dir(edir, REXEC_EAUDIT, err);
    else
        ev_remove_tmp(tmp);
    return r;
}

static char *ev_path(const char *edir, const char *prefix, const char *run_id)
{
    size_t n = strlen(edir) + strlen(prefix) + strlen(run_id) + 2;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s/%s%s", edir, prefix, run_id);
    return s;
}

int rx_evidence_write(const char *ws_dir, const char *run_id, const unsigned char *out,
                      size_t out_len, const unsigned char *err_data, size_t err_len, cJSON *meta,
                      const rx_redactor *r, char **path_out, rexec_error *err)
{
    char *edir = NULL, *tmp = NULL, *final = NULL, *mtext = NULL;
    int rc;

    if (path_out != NULL)
        *path_out = NULL;
    if ((rc = ev_check_id(run_id, err)) != 0 ||
        (rc = ev_complete_meta(meta, run_id, out, out_len, err_data, err_len, err)) != 0)
        goto out;
    if ((mtext = cJSON_Print(meta)) == NULL) {
        rc = rx_fail(err, REXEC_ENOMEM, "evidence: out of memory");
        goto out;
    }
    const void *data[3] = {out ? (const void *)out : "", err_data ? (const void *)err_data : "",
                           mtext};
    const size_t len[3] = {out_len, err_len, strlen(mtext)};
    if ((rc = ev_scan(r, run_id, data, len, err)) != 0)
        goto out;
    edir = rx_fs_join(ws_dir, "evidence");
    tmp = edir ? ev_path(edir, ".tmp-", run_id) : NULL;
    final = edir ? ev_path(edir, "", run_id) : NULL;
    if (tmp == NULL || final == NULL) {
        rc = rx_fail(err, REXEC_ENOMEM, "evidence: out of memory");
        goto out;
    }
    if ((rc = rx_fs_check(ws_dir, 0, REXEC_EAUDIT, err)) != 0 ||
        (rc = rx_fs_mkdir_private(edir, REXEC_EAUDIT, err)) != 0 ||
        (rc = ev_build(edir, tmp, final, data, len, err)) != 0)
        goto out;
    if (path_out != NULL) {
        *path_out = final;
        final = NULL;
    }
out:
    free(mtext);
    free(edir);
    free(tmp);
    free(final);
    return rc;
}
