/* Evidence per executed run: evidence/<run_id>/{stdout,stderr,meta.json}. The directory gets
 * its final name when the call opens it (a spare renamed, or a .tmp- one made and renamed), and
 * that name is made durable off the call's path (the dirsync thread below); the commit writes
 * meta.json and syncs the files, and the outcome record appended after it is what says the
 * evidence is whole. Until then the directory is locked (flock) by its writer, and a directory
 * whose meta.json is not complete is never taken for evidence (evidence_prune.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

typedef struct ev_dirsync ev_dirsync;

struct rx_evidence {
    char *edir, *tmp, *final;
    const rx_redactor *r;
    int dfd;             /* the run's directory, locked (flock) while the call writes it */
    ev_dirsync *sync;    /* its name's fsync, running off the call's path (or NULL) */
    int sync_inline;     /* no dirsync thread: the commit syncs the name (and directory) itself */
    int fd[2];
    int mfd;             /* meta.json, created empty at the open, written at the commit */
    int dir_synced;      /* the directory came from a spare whose entries were synced */
    int named;           /* renamed to final: an abort removes final, else tmp */
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

/* Removes a half-built directory after a failure: what was written there is not evidence of
 * anything. meta.json goes first: a directory without it is never taken for evidence. */
static void ev_remove_tmp(const char *tmp)
{
    int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
        for (int i = 2; i >= 0; i--)
            unlinkat(dfd, ev_files[i], 0);
        close(dfd);
    }
    rmdir(tmp);
}

/* The writer's lock on its directory, for as long as it holds the descriptor: `rexec evidence
 * prune` leaves a locked directory alone (its writer lives). Waits for a prune that is looking
 * at it (briefly: it judges, and removes only an old one). A file system without flock: no
 * lock (prune cannot take one there either). */
static int ev_lock(int dfd)
{
    int r;
    while ((r = flock(dfd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    return r == 0 || errno == ENOLCK || errno == EINVAL || errno == EOPNOTSUPP ? 0 : -1;
}

/* A fresh .tmp- directory, 0700 whatever the umask, locked (ev_lock). A leftover of the same
 * name is refused rather than reused (run ids are unique, so it would be someone else's). */
static int ev_mkdir_tmp(const char *tmp, int *dfd, rexec_error *err)
{
    if (mkdir(tmp, 0700) != 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: cannot create: %s", tmp, strerror(errno));
    *dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*dfd < 0 || fchmod(*dfd, 0700) != 0 || ev_lock(*dfd) != 0) {
        int r = rx_fail(err, REXEC_EAUDIT, "%s: %s", tmp, strerror(errno));
        if (*dfd >= 0)
            close(*dfd);
        *dfd = -1;
        rmdir(tmp);
        return r;
    }
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

static void dirsync_release(ev_dirsync *q);

static void ev_free(rx_evidence *ev)
{
    dirsync_release(ev->sync);
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
    ev_remove_tmp(ev->named ? ev->final : ev->tmp);
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
 * rx_evidence_open with one rename to evidence/<run_id> (its final name, evidence/'s fsync
 * then runs off the call's path, below). The commit writes the same files, each synced, as
 * without a spare; the directory itself is synced when the spare is made, not at the commit:
 * its entries (the three files) are all it holds, they exist from then on, and the commit
 * changes none of them. So one flush fewer on the call's path, the same number in all
 * (docs/audit.md, "Evidence"). The spare is locked (flock) from its making on: the lock goes
 * with it to the call, so prune never takes a live call's directory.
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

/* Takes the spare for ev (in ev->edir) as ev->final, with its files: 1, or 0 (none, or it was
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
    if (!ok || renameat2(AT_FDCWD, s->path, AT_FDCWD, ev->final, RENAME_NOREPLACE) != 0) {
        spare_free(s, 1);
        return 0;
    }
    ev->dfd = s->dfd, ev->fd[0] = s->fd[0], ev->fd[1] = s->fd[1], ev->mfd = s->fd[2];
    ev->dir_synced = s->synced;
    ev->named = 1;
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

/* ---- the name's fsync, off the call's path -----------------------------------------------------
 * The directory gets its final name at the open; the fsync of evidence/ that makes the name
 * durable (and, without a spare, the directory's own fsync that makes its three entries
 * durable) is asked for then and done by one thread per process while the call runs; the
 * commit waits for it (done long before, most of the time) and fails if it failed. So the
 * commit has no rename and no directory fsync on the call's path, and an outcome record still
 * only ever names a directory whose name and files are durable (docs/audit.md, "Evidence").
 * Requests that wait together share one fsync of their evidence/ (a fan-out opens many).
 * A request is its own allocation, shared by the call and the thread (refs): an abort on the
 * loop never waits for the disk. Without the thread (cannot be started), the commit syncs. */
struct ev_dirsync {
    ev_dirsync *next;
    char *edir; /* evidence/ to fsync */
    int dfd;    /* the run's directory to fsync too, or -1 (a synced spare) */
    int refs;   /* the call's and, while queued or running, the thread's */
    int done;
    int dir_err, parent_err; /* errno of the directory's and of evidence/'s fsync, or 0 */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t want, done_cv;
    pid_t pid; /* the process whose thread runs (a forked child starts its own) */
    ev_dirsync *queue;
} dsync = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
           NULL};
static _Atomic unsigned long n_early_syncs, n_parent_at_commit, n_by_helper, n_dirs_at_commit;

static void dirsync_free_locked(ev_dirsync *q)
{
    if (--q->refs > 0)
        return;
    if (q->dfd >= 0)
        close(q->dfd);
    free(q->edir);
    free(q);
}

static void dirsync_release(ev_dirsync *q)
{
    if (q == NULL)
        return;
    pthread_mutex_lock(&dsync.mu);
    dirsync_free_locked(q);
    pthread_mutex_unlock(&dsync.mu);
}

static int fsync_path(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int e = fsync(fd) == 0 || errno == EINVAL ? 0 : errno; /* EINVAL: no dir fsync there */
    close(fd);
    return e;
}

/* One round: every request taken from the queue before the round began is covered by the
 * fsyncs of this round (each evidence/ once, each run directory of a request). */
static void dirsync_round(ev_dirsync *batch)
{
    for (ev_dirsync *q = batch; q; q = q->next) {
        if (q->dfd >= 0 && fsync(q->dfd) != 0 && errno != EINVAL)
            q->dir_err = errno;
        ev_dirsync *p = batch;
        while (p != q && strcmp(p->edir, q->edir) != 0)
            p = p->next;
        q->parent_err = p != q ? p->parent_err : fsync_path(q->edir);
        n_early_syncs += (q->dfd >= 0) + (p == q);
    }
}

static void *dirsync_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dsync.mu);
    for (;;) {
        while (dsync.queue == NULL)
            pthread_cond_wait(&dsync.want, &dsync.mu);
        ev_dirsync *batch = dsync.queue;
        dsync.queue = NULL;
        pthread_mutex_unlock(&dsync.mu);
        dirsync_round(batch);
        pthread_mutex_lock(&dsync.mu);
        while (batch) {
            ev_dirsync *next = batch->next;
            batch->next = NULL;
            batch->done = 1;
            dirsync_free_locked(batch); /* the thread's ref */
            batch = next;
        }
        pthread_cond_broadcast(&dsync.done_cv);
    }
    return NULL;
}

/* Asks for the fsync of ev's name (and of its directory unless a synced spare's); always 0:
 * without a thread or memory, the commit does it (sync_inline). */
static int dirsync_ask(rx_evidence *ev)
{
    ev_dirsync *q = calloc(1, sizeof(*q));
    ev->sync_inline = 1;
    if (q == NULL || (q->edir = strdup(ev->edir)) == NULL ||
        (q->dfd = ev->dir_synced ? -1 : fcntl(ev->dfd, F_DUPFD_CLOEXEC, 0)) < -1 ||
        (!ev->dir_synced && q->dfd < 0)) {
        if (q)
            free(q->edir);
        free(q);
        return 0;
    }
    q->refs = 2;
    pthread_mutex_lock(&dsync.mu);
    if (dsync.pid != getpid()) {
        pthread_t t;
        pthread_attr_t at;
        dsync.queue = NULL; /* a forked child: the parent's requests are not its own */
        if (pthread_attr_init(&at) == 0) {
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&at, 64u << 10);
            if (pthread_create(&t, &at, dirsync_main, NULL) == 0)
                dsync.pid = getpid();
            pthread_attr_destroy(&at);
        }
    }
    if (dsync.pid == getpid()) {
        q->next = dsync.queue;
        dsync.queue = q;
        pthread_cond_signal(&dsync.want);
        ev->sync = q, q = NULL;
        ev->sync_inline = 0;
    }
    pthread_mutex_unlock(&dsync.mu);
    if (q) {
        if (q->dfd >= 0)
            close(q->dfd);
        free(q->edir);
        free(q);
    }
    return 0;
}

/* At the commit: the name (and directory) durable, waited for if the thread is not done yet,
 * or synced here without the thread. */
static int dirsync_wait(rx_evidence *ev, rexec_error *err)
{
    int de = 0, pe = 0;
    if (ev->sync_inline) {
        if (!ev->dir_synced && fsync(ev->dfd) != 0 && errno != EINVAL)
            de = errno;
        pe = fsync_path(ev->edir);
        n_dirs_at_commit += !ev->dir_synced;
        n_parent_at_commit++;
    } else if (ev->sync) {
        pthread_mutex_lock(&dsync.mu);
        while (!ev->sync->done)
            pthread_cond_wait(&dsync.done_cv, &dsync.mu);
        de = ev->sync->dir_err, pe = ev->sync->parent_err;
        pthread_mutex_unlock(&dsync.mu);
    }
    if (de != 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", ev->final, strerror(de));
    if (pe != 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", ev->edir, strerror(pe));
    return 0;
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
        return dirsync_ask(ev);
    if ((r = ev_mkdir_tmp(ev->tmp, &ev->dfd, err)) != 0)
        return r;
    int *fds[3] = {&ev->fd[0], &ev->fd[1], &ev->mfd};
    for (int i = 0; r == 0 && i < 3; i++) /* meta.json too: the commit adds no entry */
        if ((r = rx_fs_create_private(ev->dfd, ev_files[i], fds[i], REXEC_EAUDIT, err)) != 0)
            rx_fail_prefix(err, "%s/", ev->tmp);
    if (r == 0 && renameat2(AT_FDCWD, ev->tmp, AT_FDCWD, ev->final, RENAME_NOREPLACE) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot rename to %s: %s", ev->tmp, ev->final,
                    strerror(errno));
    if (r == 0)
        ev->named = 1, r = dirsync_ask(ev);
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
                ev->final, ev_files[i]);
    } else if (rx_fs_write_all(ev->fd[i], ev->buf[i], ev->blen[i]) != 0) {
        ev->failed = 1;
        rx_fail(&ev->err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->final, ev_files[i],
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
 * A commit syncs one to three things (stdout when it has bytes, stderr likewise, meta.json),
 * each a wait for the disk; none depends on another (the directory and its name were synced
 * since the open, dirsync above). One after another they were about a
 * quarter of serve's time between a command's end and its answer (docs/PERFORMANCE.md). One helper
 * thread per process (started at the first commit) takes one of them while the committing
 * thread does the others; the disk serves both at once (on ext4 without a journal each fsync is
 * a cache flush of its own, and concurrent flushes are merged). When the helper is busy (commits
 * of a fan-out run side by side, recorder.c) or cannot be started, the caller does them all, as
 * before. Nothing changes in what is synced. */
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

void rx_evidence_sync_counts(unsigned long *by_helper, unsigned long *dirs_at_commit)
{
    *by_helper = n_by_helper;
    *dirs_at_commit = n_dirs_at_commit;
}

void rx_evidence_counts_get(rx_evidence_counts *c)
{
    c->by_helper = n_by_helper;
    c->dirs_at_commit = n_dirs_at_commit;
    c->parents_at_commit = n_parent_at_commit;
    c->early_syncs = n_early_syncs;
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
 * that failed (names[i] under ev->final). */
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
            return names[i] ? rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->final,
                                      names[i], strerror(errs[i]))
                            : rx_fail(err, REXEC_EAUDIT, "%s: fsync: %s", ev->final,
                                      strerror(errs[i]));
    return 0;
}

/* Every file written (their writeback started as they were written, so the data of all of
 * them goes to the disk at once), then every file fsynced side by side (above). No rename and
 * no directory fsync: the name and the entries were made durable since the open (dirsync,
 * waited for by ev_finish); the outcome record appended after the commit is what says the
 * evidence is whole. */
static int ev_sync_files(rx_evidence *ev, const char *mtext, int *mfd, rexec_error *err)
{
    for (int i = 0; i < 2; i++)
        ev_flush(ev, i); /* each piece's writeback is started as it is written */
    if (ev->failed)
        return *err = ev->err, err->code;
    if (ev->r && rx_redact_contains_secret(ev->r, mtext, strlen(mtext)))
        return rx_fail(err, REXEC_EAUDIT, "%s: meta.json still holds a secret value: refusing "
                       "to write it", ev->final);
    /* meta.json was created empty at the open (its entry is synced by then): written now, it
     * is what makes the directory complete (readers: evidence_prune.c). */
    *mfd = ev->mfd;
    ev->mfd = -1;
    if (rx_fs_write_all(*mfd, mtext, strlen(mtext)) != 0)
        return rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->final, ev_files[2],
                       strerror(errno));
    (void)sync_file_range(*mfd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a hint: errors come at fsync */
    /* An empty stream has no data to sync: the directory's fsync (at the open, dirsync above)
     * makes its entry durable (saves a cache flush of the disk a call, stderr being empty most
     * of the time); a spare's directory was synced when it was made (its entries have not
     * changed since). */
    int fds[4];
    const char *names[4];
    size_t n = 0;
    for (int i = 0; i < 2; i++)
        if (ev->stored[i] > 0)
            fds[n] = ev->fd[i], names[n++] = ev_files[i];
    fds[n] = *mfd, names[n++] = ev_files[2];
    return ev_fsync_all(ev, fds, names, n, err);
}

static int ev_finish(rx_evidence *ev, const char *mtext, rexec_error *err)
{
    int mfd = -1, r = ev_sync_files(ev, mtext, &mfd, err);
    if (mfd >= 0 && close(mfd) != 0 && r == 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->final, ev_files[2],
                    strerror(errno));
    for (int i = 0; i < 2; i++) {
        if (ev->fd[i] >= 0 && close(ev->fd[i]) != 0 && r == 0)
            r = rx_fail(err, REXEC_EAUDIT, "%s/%s: cannot write: %s", ev->final, ev_files[i],
                        strerror(errno));
        ev->fd[i] = -1;
    }
    if (r == 0) /* the name, made durable off the call's path since the open */
        r = dirsync_wait(ev, err);
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
