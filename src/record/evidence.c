/* Evidence per executed run: evidence/<run_id>/{stdout,stderr,meta.json}, built in
 * evidence/.tmp-<run_id> and renamed into place, so a reader never sees half a record and a
 * crash leaves at most a .tmp- directory (which is never taken for evidence). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
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

#define EV_BUF (256u * 1024) /* per stream: writes of this size, each scanned before it */
/* The buffers start small and double up to EV_BUF: a call's output is a few hundred bytes most
 * of the time, and two 256 KiB buffers a call were an mmap each on the loop (malloc's threshold
 * is 128 KiB) and an munmap each on the recorder's thread, with the page faults between
 * (docs/PERFORMANCE.md, "Issue 30's speed goals after the lifecycle changes"). */
#define EV_BUF_MIN (4u * 1024)

struct rx_evidence {
    char *edir, *tmp, *final;
    const rx_redactor *r;
    int dfd;
    int fd[2];
    int mfd;             /* meta.json, when it came with a spare directory (else -1) */
    int dir_synced;      /* the directory came from a spare whose entries were synced */
    unsigned char *buf[2];
    size_t blen[2];
    size_t bcap[2];      /* grows by doubling from EV_BUF_MIN to EV_BUF as output comes */
    uint64_t stored[2];
    uint64_t flushed[2]; /* bytes handed to the file so far */
    int failed;
    rexec_error err; /* the first failure */
};

/* Adds what was stored: sizes and SHA-256 of both streams (and the run id when missing). */
static int ev_complete_meta(cJSON *meta, const char *run_id, const char *const sha[2],
                            const uint64_t stored[2], rexec_error *err)
{
    if (!cJSON_IsObject(meta))
        return rx_fail(err, REXEC_EAUDIT, "evidence: meta is not a JSON object");
    if ((!cJSON_GetObjectItemCaseSensitive(meta, "run_id") &&
         ev_set(meta, "run_id", cJSON_CreateString(run_id)) != 0) ||
        ev_set(meta, "stdout_sha256", cJSON_CreateString(sha[0])) != 0 ||
        ev_set(meta, "stderr_sha256", cJSON_CreateString(sha[1])) != 0 ||
        ev_set(meta, "stdout_bytes_stored", cJSON_CreateNumber((double)stored[0])) != 0 ||
        ev_set(meta, "stderr_bytes_stored", cJSON_CreateNumber((double)stored[1])) != 0)
        return rx_fail(err, REXEC_ENOMEM, "evidence: out of memory");
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

/* Writes meta.json (its fd in *fd, for the fsync in ev_finish) and starts its writeback. */
static int ev_write_meta(int dfd, const char *dir, const char *name, const void *data,
                         size_t len, int *fd, rexec_error *err)
{
    int r = rx_fs_create_private(dfd, name, fd, REXEC_EAUDIT, err);
    if (r != 0)
        return rx_fail_prefix(err, "%s/", dir);
    if (rx_fs_write_all(*fd, data, len) != 0)
        return rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", dir, name, strerror(errno));
    (void)sync_file_range(*fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a hint: errors come at fsync */
    return 0;
}

static char *ev_path(const char *edir, const char *prefix, const char *run_id)
{
    size_t n = strlen(edir) + strlen(prefix) + strlen(run_id) + 2;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s/%s%s", edir, prefix, run_id);
    return s;
}

static void ev_free(rx_evidence *ev)
{
    for (int i = 0; i < 2; i++) {
        if (ev->fd[i] >= 0)
            close(ev->fd[i]);
        if (ev->buf[i])
            OPENSSL_cleanse(ev->buf[i], ev->blen[i]);
        free(ev->buf[i]);
    }
    if (ev->mfd >= 0)
        close(ev->mfd);
    if (ev->dfd >= 0)
        close(ev->dfd);
    free(ev->edir), free(ev->tmp), free(ev->final);
    free(ev);
}

void rx_evidence_abort(rx_evidence *ev)
{
    if (ev == NULL)
        return;
    for (int i = 0; i < 2; i++)
        if (ev->fd[i] >= 0)
            close(ev->fd[i]), ev->fd[i] = -1;
    ev_remove_tmp(ev->tmp);
    ev_free(ev);
}

const char *rx_evidence_path(const rx_evidence *ev)
{
    return ev->final;
}

/* ---- the spare directory ---------------------------------------------------------------------
 * A call's evidence directory and its three files were four new inodes made on the call's path:
 * the directory and two files on the loop just before the command is sent, meta.json at the
 * commit before the answer. On ext4 without a journal (this lab's machine) each inode costs a
 * scan of recently deleted inodes; with others deleting files, perf put up to a sixth of serve's
 * CPU there (docs/PERFORMANCE.md).
 * A process that commits evidence again and again (serve) keeps one spare: an empty
 * evidence/.spare-<pid>-<random> directory with its three empty files open, made by the
 * recorder after it has told the calls (rx_evidence_spare_fill), taken by the next
 * rx_evidence_open with one rename to .tmp-<run_id>. The commit writes the same files, each
 * synced, renames the directory into place and syncs evidence/, as without a spare; the
 * directory itself is synced when the spare is made, not at the commit: its entries (the three
 * files) are all it holds, they exist from then on, and the commit changes none of them (the
 * rename changes evidence/, which is synced after it). So one flush fewer on the call's path,
 * the same number in all (docs/audit.md, "Evidence").
 * A spare is a hidden directory like a call's .tmp- one: never taken for evidence, removed by
 * rx_evidence_spare_drop (the recorder's close), or, after a crash, by `rexec evidence prune`
 * (which removes every hidden entry of evidence/). It is not a call's leftover, so it is not
 * named .tmp-: while serve runs, evidence/ holds one .spare- directory of serve's. */
typedef struct ev_spare {
    char *edir, *path;
    int dfd, fd[3];
    int synced; /* the directory's fsync done: its entries are durable */
} ev_spare;

static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static ev_spare *spare;          /* ready to be taken */
static char *spare_want;         /* evidence/ of the last commit: where the next spare goes */
static unsigned long spare_commits; /* commits since the last drop: a spare after the second */

static void spare_free(ev_spare *s, int remove)
{
    for (int i = 0; i < 3; i++)
        if (s->fd[i] >= 0)
            close(s->fd[i]);
    if (s->dfd >= 0)
        close(s->dfd);
    if (remove && s->path)
        ev_remove_tmp(s->path);
    free(s->edir), free(s->path);
    free(s);
}

static ev_spare *spare_make(char *edir)
{
    ev_spare *s = calloc(1, sizeof(*s));
    unsigned char rnd[8];
    char hex[17], name[64];
    rexec_error e;
    if (s == NULL) {
        free(edir);
        return NULL;
    }
    s->edir = edir;
    s->dfd = s->fd[0] = s->fd[1] = s->fd[2] = -1;
    if (RAND_bytes(rnd, sizeof(rnd)) != 1 && getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        goto fail;
    rx_hex_encode(rnd, sizeof(rnd), hex);
    snprintf(name, sizeof(name), "%ld-%s", (long)getpid(), hex);
    if ((s->path = ev_path(edir, ".spare-", name)) == NULL || ev_mkdir_tmp(s->path, &s->dfd, &e) != 0)
        goto fail;
    for (int i = 0; i < 3; i++)
        if (rx_fs_create_private(s->dfd, ev_files[i], &s->fd[i], REXEC_EAUDIT, &e) != 0) {
            spare_free(s, 1);
            return NULL;
        }
    s->synced = fsync(s->dfd) == 0; /* else the commit syncs it, as without a spare */
    return s;
fail:
    if (s->dfd >= 0) {
        spare_free(s, 1);
        return NULL;
    }
    spare_free(s, 0);
    return NULL;
}

/* Takes the spare for ev (in ev->edir) as ev->tmp, with its files: 1, or 0 (none, or it was
 * touched meanwhile: then it is removed and the caller makes a directory as before). */
static int spare_take(rx_evidence *ev)
{
    ev_spare *s = NULL;
    struct stat st;
    int ok = 1;
    pthread_mutex_lock(&spare_mu);
    if (spare && strcmp(spare->edir, ev->edir) == 0)
        s = spare, spare = NULL;
    pthread_mutex_unlock(&spare_mu);
    if (s == NULL)
        return 0;
    for (int i = 0; ok && i < 3; i++) /* still linked, still empty (a prune may have run) */
        ok = fstat(s->fd[i], &st) == 0 && st.st_nlink == 1 && st.st_size == 0;
    if (!ok || renameat2(AT_FDCWD, s->path, AT_FDCWD, ev->tmp, RENAME_NOREPLACE) != 0) {
        spare_free(s, 1);
        return 0;
    }
    ev->dfd = s->dfd, ev->fd[0] = s->fd[0], ev->fd[1] = s->fd[1], ev->mfd = s->fd[2];
    ev->dir_synced = s->synced;
    s->dfd = s->fd[0] = s->fd[1] = s->fd[2] = -1;
    spare_free(s, 0);
    return 1;
}

/* A commit happened in edir: the next spare goes there. */
static void spare_note_commit(const char *edir)
{
    pthread_mutex_lock(&spare_mu);
    spare_commits++;
    if (spare_want == NULL || strcmp(spare_want, edir) != 0) {
        free(spare_want);
        spare_want = strdup(edir);
    }
    pthread_mutex_unlock(&spare_mu);
}

void rx_evidence_spare_fill(void)
{
    char *edir = NULL;
    ev_spare *old = NULL, *s;
    pthread_mutex_lock(&spare_mu);
    if (spare && spare_want && strcmp(spare->edir, spare_want) != 0)
        old = spare, spare = NULL; /* another workspace now */
    if (spare == NULL && spare_want && spare_commits >= 2)
        edir = strdup(spare_want);
    pthread_mutex_unlock(&spare_mu);
    if (old)
        spare_free(old, 1);
    if (edir == NULL || (s = spare_make(edir)) == NULL)
        return;
    pthread_mutex_lock(&spare_mu);
    if (spare == NULL && spare_want && strcmp(spare_want, s->edir) == 0)
        spare = s, s = NULL;
    pthread_mutex_unlock(&spare_mu);
    if (s)
        spare_free(s, 1);
}

void rx_evidence_spare_drop(void)
{
    pthread_mutex_lock(&spare_mu);
    ev_spare *s = spare;
    spare = NULL;
    free(spare_want);
    spare_want = NULL;
    spare_commits = 0;
    pthread_mutex_unlock(&spare_mu);
    if (s)
        spare_free(s, 1);
}

static int ev_open_files(rx_evidence *ev, const char *ws_dir, rexec_error *err)
{
    struct stat st;
    int r;
    if ((r = rx_fs_check(ws_dir, 0, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_fs_mkdir_private(ev->edir, REXEC_EAUDIT, err)) != 0)
        return r;
    if (lstat(ev->final, &st) == 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: already exists: refusing to replace evidence",
                       ev->final);
    if (spare_take(ev))
        return 0;
    if ((r = ev_mkdir_tmp(ev->tmp, &ev->dfd, err)) != 0)
        return r;
    for (int i = 0; r == 0 && i < 2; i++)
        if ((r = rx_fs_create_private(ev->dfd, ev_files[i], &ev->fd[i], REXEC_EAUDIT, err)) != 0)
            rx_fail_prefix(err, "%s/", ev->tmp);
    return r;
}

int rx_evidence_open(rx_evidence **out, const char *ws_dir, const char *run_id,
                     const rx_redactor *r, rexec_error *err)
{
    rx_evidence *ev = calloc(1, sizeof(*ev));
    int rc;
    *out = NULL;
    if (ev == NULL)
        return rx_fail(err, REXEC_ENOMEM, "evidence: out of memory");
    ev->dfd = ev->fd[0] = ev->fd[1] = ev->mfd = -1;
    ev->r = r;
    if ((rc = ev_check_id(run_id, err)) != 0) {
        ev_free(ev);
        return rc;
    }
    ev->edir = rx_fs_join(ws_dir, "evidence");
    ev->tmp = ev->edir ? ev_path(ev->edir, ".tmp-", run_id) : NULL;
    ev->final = ev->edir ? ev_path(ev->edir, "", run_id) : NULL;
    ev->bcap[0] = ev->bcap[1] = EV_BUF_MIN;
    ev->buf[0] = malloc(EV_BUF_MIN);
    ev->buf[1] = malloc(EV_BUF_MIN);
    if (!ev->tmp || !ev->final || !ev->buf[0] || !ev->buf[1]) {
        ev_free(ev);
        return rx_fail(err, REXEC_ENOMEM, "evidence: out of memory");
    }
    if ((rc = ev_open_files(ev, ws_dir, err)) != 0) {
        if (ev->dfd >= 0)
            rx_evidence_abort(ev);
        else
            ev_free(ev);
        return rc;
    }
    *out = ev;
    return 0;
}

/* Bulk evidence is written behind and not kept in memory: each piece's writeback starts at
 * once, and what lies more than EV_BEHIND back (written back by then, unless the disk is
 * slower than the channel) leaves the page cache. Evidence is written once and rarely read;
 * without this, a GiB of output took a GiB of page cache, and on this machine's VM filling
 * fresh page-cache memory cost more CPU than decrypting the stream (docs/PERFORMANCE.md).
 * Hints only: their errors show at the commit's fsync. */
#define EV_BEHIND (2u << 20)
static void ev_write_behind(int fd, uint64_t off, size_t len)
{
    (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
    if (off + len > EV_BEHIND)
        (void)posix_fadvise(fd, 0, (off_t)(off + len - EV_BEHIND), POSIX_FADV_DONTNEED);
}

/* The last secret scan, before anything reaches the disk: per written piece. */
static void ev_flush(rx_evidence *ev, int i)
{
    if (ev->failed || ev->blen[i] == 0)
        goto out;
    if (ev->r && rx_redact_contains_secret(ev->r, ev->buf[i], ev->blen[i])) {
        ev->failed = 1;
        rx_fail(&ev->err, REXEC_EAUDIT, "%s: %s still holds a secret value: refusing to write it",
                ev->tmp, ev_files[i]);
    } else if (rx_fs_write_all(ev->fd[i], ev->buf[i], ev->blen[i]) != 0) {
        ev->failed = 1;
        rx_fail(&ev->err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->tmp, ev_files[i],
                strerror(errno));
    } else {
        ev_write_behind(ev->fd[i], ev->flushed[i], ev->blen[i]);
        ev->flushed[i] += ev->blen[i];
    }
out:
    OPENSSL_cleanse(ev->buf[i], ev->blen[i]);
    ev->blen[i] = 0;
}

/* A bigger buffer for stream i, for want bytes (at most EV_BUF): the held bytes are copied and
 * wiped from the old one. Out of memory, the buffer stays as it is (it is flushed when full,
 * in smaller writes: each is still scanned before it is written). */
static void ev_grow(rx_evidence *ev, int i, size_t want)
{
    size_t cap = ev->bcap[i];
    while (cap < want && cap < EV_BUF)
        cap *= 2;
    if (cap > EV_BUF)
        cap = EV_BUF;
    unsigned char *b = malloc(cap);
    if (b == NULL)
        return;
    memcpy(b, ev->buf[i], ev->blen[i]);
    OPENSSL_cleanse(ev->buf[i], ev->blen[i]);
    free(ev->buf[i]);
    ev->buf[i] = b;
    ev->bcap[i] = cap;
}

void rx_evidence_append(rx_evidence *ev, int stream, const void *data, size_t len)
{
    const unsigned char *p = data;
    int i = stream ? 1 : 0;
    ev->stored[i] += len;
    while (len > 0 && !ev->failed) {
        if (ev->blen[i] + len > ev->bcap[i] && ev->bcap[i] < EV_BUF)
            ev_grow(ev, i, ev->blen[i] + len);
        size_t room = ev->bcap[i] - ev->blen[i];
        size_t n = room < len ? room : len;
        memcpy(ev->buf[i] + ev->blen[i], p, n);
        ev->blen[i] += n, p += n, len -= n;
        if (ev->blen[i] == ev->bcap[i])
            ev_flush(ev, i);
    }
}

/* ---- the commit's fsyncs, side by side ---------------------------------------------------------
 * A commit syncs two to four things (stdout when it has bytes, stderr likewise, meta.json, the
 * directory unless it came synced with a spare), each a wait for the disk; none depends on
 * another, only the rename must come after all of them. One after another they were about a
 * quarter of serve's time between a command's end and its answer (docs/PERFORMANCE.md). One helper
 * thread per process (started at the first commit) takes one of them while the committing
 * thread does the others; the disk serves both at once (on ext4 without a journal each fsync is
 * a cache flush of its own, and concurrent flushes are merged). When the helper is busy (commits
 * of a fan-out run side by side, recorder.c) or cannot be started, the caller does them all, as
 * before. Nothing changes in what is synced or in the order against the rename. */
typedef struct ev_syncer {
    pthread_mutex_t mu;
    pthread_cond_t want, done_cv;
    pid_t pid;      /* the process whose helper runs (a forked child starts its own) */
    int busy;       /* a caller owns the helper */
    int fd;         /* to sync, -1: nothing asked */
    int done, errnum;
} ev_syncer;

static ev_syncer syncer = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                           PTHREAD_COND_INITIALIZER, 0, 0, -1, 0, 0};
static _Atomic unsigned long n_by_helper, n_dirs_at_commit;

void rx_evidence_sync_counts(unsigned long *by_helper, unsigned long *dirs_at_commit)
{
    *by_helper = n_by_helper;
    *dirs_at_commit = n_dirs_at_commit;
}

static void *syncer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&syncer.mu);
    for (;;) {
        while (syncer.fd < 0)
            pthread_cond_wait(&syncer.want, &syncer.mu);
        int fd = syncer.fd;
        pthread_mutex_unlock(&syncer.mu);
        int e = fsync(fd) == 0 ? 0 : errno;
        pthread_mutex_lock(&syncer.mu);
        syncer.fd = -1;
        syncer.errnum = e;
        syncer.done = 1;
        pthread_cond_signal(&syncer.done_cv);
    }
    return NULL;
}

/* Hands fd to the helper: 1, or 0 (busy, or no helper: the caller syncs it). */
static int syncer_give(int fd)
{
    int ok = 0;
    pthread_mutex_lock(&syncer.mu);
    if (syncer.pid != getpid() && !syncer.busy) {
        pthread_t t;
        pthread_attr_t at;
        if (pthread_attr_init(&at) == 0) {
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&at, 64u << 10);
            if (pthread_create(&t, &at, syncer_main, NULL) == 0)
                syncer.pid = getpid();
            pthread_attr_destroy(&at);
        }
    }
    if (syncer.pid == getpid() && !syncer.busy) {
        syncer.busy = 1;
        syncer.done = 0;
        syncer.fd = fd;
        pthread_cond_signal(&syncer.want);
        ok = 1;
    }
    pthread_mutex_unlock(&syncer.mu);
    return ok;
}

/* The helper's result for what syncer_give handed it: 0 or an errno. */
static int syncer_wait(void)
{
    pthread_mutex_lock(&syncer.mu);
    while (!syncer.done)
        pthread_cond_wait(&syncer.done_cv, &syncer.mu);
    int e = syncer.errnum;
    syncer.busy = 0;
    pthread_mutex_unlock(&syncer.mu);
    return e;
}

/* fsyncs fds[0..n) (n <= 4), the last by the helper when it is free; fails naming the first
 * that failed (names[i] under ev->tmp). */
static int ev_fsync_all(rx_evidence *ev, const int *fds, const char *const *names, size_t n,
                        rexec_error *err)
{
    int errs[4] = {0};
    int handed = n > 1 && syncer_give(fds[n - 1]);
    for (size_t i = 0; i + (size_t)handed < n; i++)
        errs[i] = fsync(fds[i]) == 0 ? 0 : errno;
    if (handed) {
        errs[n - 1] = syncer_wait();
        n_by_helper++;
    }
    for (size_t i = 0; i < n; i++)
        if (errs[i] != 0)
            return names[i] ? rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->tmp,
                                      names[i], strerror(errs[i]))
                            : rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", ev->tmp,
                                      strerror(errs[i]));
    return 0;
}

/* Every file written (their writeback started as they were written, so the data of all of
 * them goes to the disk at once), then every file and the directory fsynced side by side
 * (above). Then the rename into place (never over an existing one), made durable by its
 * parent's fsync. */
static int ev_sync_files(rx_evidence *ev, const char *mtext, int *mfd, rexec_error *err)
{
    int r = 0;
    for (int i = 0; i < 2; i++)
        ev_flush(ev, i); /* each piece's writeback is started as it is written */
    if (ev->failed)
        return *err = ev->err, err->code;
    if (ev->r && rx_redact_contains_secret(ev->r, mtext, strlen(mtext)))
        return rx_fail(err, REXEC_EAUDIT, "%s: meta.json still holds a secret value: refusing "
                       "to write it", ev->tmp);
    if (ev->mfd >= 0) { /* created empty with the spare directory */
        *mfd = ev->mfd;
        ev->mfd = -1;
        if (rx_fs_write_all(*mfd, mtext, strlen(mtext)) != 0)
            return rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->tmp, ev_files[2],
                           strerror(errno));
        (void)sync_file_range(*mfd, 0, 0, SYNC_FILE_RANGE_WRITE);
    } else if ((r = ev_write_meta(ev->dfd, ev->tmp, ev_files[2], mtext, strlen(mtext), mfd,
                                  err)) != 0) {
        return r;
    }
    /* An empty stream has no data to sync: the directory's fsync makes its entry durable
     * (saves a cache flush of the disk a call, stderr being empty most of the time); a spare's
     * directory was synced when it was made (its entries have not changed since). */
    int fds[4];
    const char *names[4];
    size_t n = 0;
    for (int i = 0; i < 2; i++)
        if (ev->stored[i] > 0)
            fds[n] = ev->fd[i], names[n++] = ev_files[i];
    fds[n] = *mfd, names[n++] = ev_files[2];
    if (!ev->dir_synced) {
        fds[n] = ev->dfd, names[n++] = NULL;
        n_dirs_at_commit++;
    }
    return ev_fsync_all(ev, fds, names, n, err);
}

static int ev_finish(rx_evidence *ev, const char *mtext, rexec_error *err)
{
    int mfd = -1, r = ev_sync_files(ev, mtext, &mfd, err);
    if (mfd >= 0 && close(mfd) != 0 && r == 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->tmp, ev_files[2],
                    strerror(errno));
    for (int i = 0; i < 2; i++) {
        if (ev->fd[i] >= 0 && close(ev->fd[i]) != 0 && r == 0)
            r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->tmp, ev_files[i],
                        strerror(errno));
        ev->fd[i] = -1;
    }
    if (r == 0 && renameat2(AT_FDCWD, ev->tmp, AT_FDCWD, ev->final, RENAME_NOREPLACE) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot rename to %s: %s", ev->tmp, ev->final,
                    strerror(errno));
    if (r == 0)
        r = rx_fs_fsync_dir(ev->edir, REXEC_EAUDIT, err);
    return r;
}

int rx_evidence_commit(rx_evidence *ev, cJSON *meta, const char *const sha_hex[2],
                       char **path_out, rexec_error *err)
{
    char *mtext = NULL;
    int rc = ev_complete_meta(meta, strrchr(ev->final, '/') + 1, sha_hex, ev->stored, err);
    if (path_out != NULL)
        *path_out = NULL;
    if (rc == 0 && (mtext = cJSON_Print(meta)) == NULL)
        rc = rx_fail(err, REXEC_ENOMEM, "evidence: out of memory");
    if (rc == 0)
        rc = ev_finish(ev, mtext, err);
    free(mtext);
    if (rc != 0) {
        rx_evidence_abort(ev);
        return rc;
    }
    spare_note_commit(ev->edir);
    if (path_out != NULL) {
        *path_out = ev->final;
        ev->final = NULL;
    }
    ev_free(ev);
    return 0;
}

int rx_evidence_write(const char *ws_dir, const char *run_id, const unsigned char *out,
                      size_t out_len, const unsigned char *err_data, size_t err_len, cJSON *meta,
                      const rx_redactor *r, char **path_out, rexec_error *err)
{
    rx_evidence *ev;
    char so[65], se[65];
    const char *sha[2] = {so, se};
    int rc;
    if (path_out != NULL)
        *path_out = NULL;
    if (!cJSON_IsObject(meta))
        return rx_fail(err, REXEC_EAUDIT, "evidence: meta is not a JSON object");
    if (rx_sha256_hex(out ? out : (const unsigned char *)"", out_len, so) != 0 ||
        rx_sha256_hex(err_data ? err_data : (const unsigned char *)"", err_len, se) != 0)
        return rx_fail(err, REXEC_EINTERNAL, "evidence: SHA-256 failed");
    if ((rc = rx_evidence_open(&ev, ws_dir, run_id, r, err)) != 0)
        return rc;
    rx_evidence_append(ev, 0, out, out_len);
    rx_evidence_append(ev, 1, err_data, err_len);
    return rx_evidence_commit(ev, meta, sha, path_out, err);
}
