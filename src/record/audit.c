/* The audit log writer: whole, hash-chained lines appended under flock by many processes.
 *
 * A line is <body-without-its-last-brace>,"hash":"<hex>"}\n where body is the record printed
 * by cJSON with "seq" and then "prev" as its last members, and hex = SHA-256(body)
 * (HMAC-SHA256 with a key). After each append audit/head.json names the new end of the chain
 * (audit_head.c). docs/audit.md is the reference; audit_verify.c is the reader. */
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

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "audit.h"
#include "audit_copy.h"
#include "err.h"
#include "fsutil.h"

#define AUDIT_KEY_MIN 16
#define AUDIT_KEY_MAX 4096
#define AUDIT_HASH_PREFIX ",\"hash\":\""
#define AUDIT_SUFFIX_LEN (9 + 64 + 2) /* ,"hash":" + hex + "} */

struct rx_audit {
    char *ws_dir;
    char *dir;   /* <ws>/audit */
    char *path;  /* <ws>/audit/audit.log */
    char *lock;  /* <ws>/audit/.lock: never rotated, so every writer locks the same inode */
    rx_buf key;  /* empty: plain SHA-256 chain */
    unsigned long long rotate_size;
    rx_audit_copy copy; /* the syslog copy of every line, when set */
    int head_behind;    /* the last head update failed: the next append retries it first */
    /* This writer: audit/writers/<writer>.lock, flocked while the handle lives, and named in
     * every intent it writes, so `audit recover` can tell an intent whose process is gone
     * (lock free) from one still running (lock held). Set up at the first intent. */
    int writer_fd;
    pid_t writer_pid;
    char writer[48];
};

/* ---- Hashing and keys ------------------------------------------------------------------- */

int rx_audit_digest(const rx_buf *key, const void *data, size_t len, char hex[RX_AUDIT_HEX_LEN])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    if (key != NULL && key->len > 0) {
        if (HMAC(EVP_sha256(), key->data, (int)key->len, data, len, md, &n) == NULL)
            return -1;
    } else if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1) {
        return -1;
    }
    if (n != 32)
        return -1;
    rx_hex_encode(md, n, hex);
    return 0;
}

int rx_audit_line_hash(const char *line, size_t len, char hex[RX_AUDIT_HEX_LEN])
{
    if (len < AUDIT_SUFFIX_LEN + 1) /* at least "{" before the suffix */
        return -1;
    const char *s = line + len - AUDIT_SUFFIX_LEN;
    if (memcmp(s, AUDIT_HASH_PREFIX, 9) != 0 || memcmp(s + 9 + 64, "\"}", 2) != 0)
        return -1;
    for (size_t i = 0; i < 64; i++) {
        char c = s[9 + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -1;
        hex[i] = c;
    }
    hex[64] = 0;
    return 0;
}

/* Takes the key bytes out of the file's content: one trailing newline (from `echo` or an
 * editor) is not part of the key, so both ways of writing the file give the same chain. */
static int key_take(const char *key_file, char *data, size_t len, rx_buf *key, rexec_error *err)
{
    if (len > 0 && data[len - 1] == '\n')
        len--;
    if (len > 0 && data[len - 1] == '\r')
        len--;
    if (len < AUDIT_KEY_MIN)
        return rx_fail(err, REXEC_ECONFIG, "%s: audit key is shorter than %d bytes", key_file,
                       AUDIT_KEY_MIN);
    rx_buf_reset(key);
    if (rx_buf_add(key, data, len) != 0)
        return rx_fail(err, REXEC_ENOMEM, "%s: out of memory", key_file);
    return 0;
}

int rx_audit_key_load(const char *key_file, const char *ws_dir, rx_buf *key, rexec_error *err)
{
    char *data = NULL;
    size_t len = 0;
    int r;

    if ((r = rx_fs_check(key_file, 1, REXEC_ECONFIG, err)) != 0)
        return rx_fail_prefix(err, "audit key: ");
    /* Someone who can edit the log must not be able to read the key and re-chain it. */
    if (ws_dir != NULL && rx_fs_is_inside(key_file, ws_dir) == 1)
        return rx_fail(err, REXEC_ECONFIG,
                       "audit key: %s: is inside the workspace %s: keep it where whoever can "
                       "write the audit log cannot read it", key_file, ws_dir);
    if ((r = rx_fs_read_file(key_file, AUDIT_KEY_MAX + 2, &data, &len, REXEC_ECONFIG, err)) != 0)
        return rx_fail_prefix(err, "audit key: ");
    r = key_take(key_file, data, len, key, err);
    explicit_bzero(data, len);
    free(data);
    if (r == 0 && key->len > AUDIT_KEY_MAX)
        r = rx_fail(err, REXEC_ECONFIG, "%s: audit key is longer than %d bytes", key_file,
                    AUDIT_KEY_MAX);
    return r;
}

/* ---- Rotated files ---------------------------------------------------------------------- */

/* audit-YYYYmmddTHHMMSS.nnnnnnnnnZ.log: fixed width, so names sort by time. */
static int rotated_name_ok(const char *s)
{
    static const char pat[] = "audit-DDDDDDDDTDDDDDD.DDDDDDDDDZ.log";
    if (strlen(s) != sizeof(pat) - 1)
        return 0;
    for (size_t i = 0; pat[i]; i++)
        if (pat[i] == 'D' ? (s[i] < '0' || s[i] > '9') : s[i] != pat[i])
            return 0;
    return 1;
}

time_t rx_audit_rotated_time(const char *name)
{
    struct tm tm = {0};
    return strptime(name + 6, "%Y%m%dT%H%M%S", &tm) ? timegm(&tm) : 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void rx_audit_names_free(char **names, size_t n)
{
    for (size_t i = 0; names != NULL && i < n; i++)
        free(names[i]);
    free(names);
}

int rx_audit_rotated(const char *audit_dir, char ***names, size_t *n, rexec_error *err)
{
    char **v = NULL;
    size_t len = 0, cap = 0;
    struct dirent *de;
    int r = 0;

    *names = NULL;
    *n = 0;
    DIR *d = opendir(audit_dir);
    if (d == NULL)
        return errno == ENOENT ? 0
                               : rx_fail(err, REXEC_EAUDIT, "%s: %s", audit_dir, strerror(errno));
    while ((de = readdir(d)) != NULL) {
        if (!rotated_name_ok(de->d_name))
            continue;
        if (len == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, cap * sizeof(*v));
            if (nv == NULL)
                goto nomem;
            v = nv;
        }
        if ((v[len] = strdup(de->d_name)) == NULL)
            goto nomem;
        len++;
    }
    closedir(d);
    if (len > 0)
        qsort(v, len, sizeof(*v), name_cmp);
    *names = v;
    *n = len;
    return 0;
nomem:
    closedir(d);
    rx_audit_names_free(v, len);
    r = rx_fail(err, REXEC_ENOMEM, "%s: out of memory", audit_dir);
    return r;
}

/* ---- Open / close ----------------------------------------------------------------------- */

void rx_audit_set_rotate_size(rx_audit *a, unsigned long long bytes)
{
    a->rotate_size = bytes;
}

/* The lock file of writer id in audit_dir (malloc'd), or NULL. */
char *rx_audit_writer_path(const char *audit_dir, const char *id)
{
    char *dir = rx_fs_join(audit_dir, RX_AUDIT_WRITERS_DIR), *path = NULL;
    char name[64];
    if (dir != NULL && snprintf(name, sizeof(name), "%s.lock", id) < (int)sizeof(name))
        path = rx_fs_join(dir, name);
    free(dir);
    return path;
}

/* A clean end: the lock file goes (only in the process that made it: a forked child closing
 * its copy of the handle must not make a live parent look gone), then the lock with the fd. */
static void audit_writer_end(rx_audit *a)
{
    if (a->writer_fd < 0)
        return;
    if (a->writer_pid == getpid()) {
        char *path = rx_audit_writer_path(a->dir, a->writer);
        if (path != NULL)
            unlink(path);
        free(path);
    }
    close(a->writer_fd);
    a->writer_fd = -1;
    a->writer[0] = 0;
}

/* The lock file, created under a name recover ignores, locked, then renamed into place:
 * recover never sees it unlocked (it would take a free lock for a gone writer). */
static int writer_lock_file(const char *path, int *fd, rexec_error *err)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 1);
    int r;
    if (tmp == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    memcpy(tmp, path, n + 1);
    memcpy(tmp + n - 4, "tmp", 4); /* <id>.lock -> <id>.tmp */
    /* read-only: a descriptor open for writing would keep the file system from being
     * remounted read-only for as long as the writer lives */
    *fd = open(tmp, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (*fd < 0) {
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", tmp, strerror(errno));
    } else if (fchmod(*fd, 0600) != 0 || flock(*fd, LOCK_EX | LOCK_NB) != 0 ||
               rename(tmp, path) != 0) {
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
        unlink(tmp);
        close(*fd);
        *fd = -1;
    } else {
        r = 0;
    }
    free(tmp);
    return r;
}

/* Registers this process as a writer (once per handle and process): a new lock file, locked
 * for as long as the handle lives. The kernel drops the lock when the process dies however it
 * dies (SIGKILL, a crash), which is what recover looks at. */
static int audit_writer_start(rx_audit *a, rexec_error *err)
{
    unsigned char rnd[8];
    char *dir = NULL, *path = NULL;
    int fd = -1, r;

    if (a->writer_fd >= 0 && a->writer_pid == getpid())
        return 0;
    audit_writer_end(a); /* a forked child: the parent's lock is not ours to hold */
    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        return rx_fail(err, REXEC_EINTERNAL, "audit: no randomness for the writer id");
    snprintf(a->writer, sizeof(a->writer), "%ld-", (long)getpid());
    rx_hex_encode(rnd, sizeof(rnd), a->writer + strlen(a->writer));
    if ((dir = rx_fs_join(a->dir, RX_AUDIT_WRITERS_DIR)) == NULL ||
        (path = rx_audit_writer_path(a->dir, a->writer)) == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    if ((r = rx_fs_mkdir_private(dir, REXEC_EAUDIT, err)) != 0)
        goto out;
    r = writer_lock_file(path, &fd, err);
    if (r != 0)
        goto out;
    a->writer_fd = fd;
    a->writer_pid = getpid();
out:
    if (r != 0)
        a->writer[0] = 0;
    free(dir);
    free(path);
    return r;
}

void rx_audit_close(rx_audit *a)
{
    if (a == NULL)
        return;
    audit_writer_end(a);
    rx_buf_free(&a->key);
    rx_audit_copy_close(&a->copy);
    free(a->ws_dir);
    free(a->dir);
    free(a->path);
    free(a->lock);
    free(a);
}

static int audit_rotate_env(rx_audit *a, rexec_error *err)
{
    const char *s = getenv("REXEC_AUDIT_ROTATE_BYTES");
    char *end;
    if (s == NULL || *s == 0)
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != 0 || s[0] == '-')
        return rx_fail(err, REXEC_ECONFIG,
                       "REXEC_AUDIT_ROTATE_BYTES: not a number of bytes: \"%.40s\"", s);
    a->rotate_size = v;
    return 0;
}

/* Opens the lock file (created 0600 whatever the umask, never through a symlink). It is opened
 * anew for each append: flock belongs to an open file description, so a descriptor shared by
 * threads or inherited across fork would not exclude its sharers from each other.
 * O_NONBLOCK: a FIFO put in its place must be refused, not wait forever in open(). */
static int audit_open_lock(const rx_audit *a, int *fd, rexec_error *err)
{
    int f = open(a->lock, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    int r = 0;
    if (f < 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: %s", a->lock,
                       errno == ELOOP ? "is a symbolic link" : strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", a->lock, strerror(errno));
    else if ((st.st_mode & 07777) != 0600 && fchmod(f, 0600) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot set mode 0600: %s", a->lock, strerror(errno));
    else
        r = rx_fs_check_fd(f, a->lock, 0, REXEC_EAUDIT, err);
    if (r != 0)
        close(f);
    else
        *fd = f;
    return r;
}

/* An existing audit.log is checked now, so a bad one is named before anything runs. */
static int audit_check_existing(rx_audit *a, rexec_error *err)
{
    struct stat st;
    if (lstat(a->path, &st) != 0)
        return errno == ENOENT ? 0 : rx_fail(err, REXEC_EAUDIT, "%s: %s", a->path,
                                             strerror(errno));
    if (!S_ISLNK(st.st_mode) && !S_ISREG(st.st_mode))
        return rx_fail(err, REXEC_EAUDIT, "%s: not a regular file", a->path);
    return rx_fs_check(a->path, 0, REXEC_EAUDIT, err);
}

int rx_audit_open(rx_audit **out, const char *ws_dir, const char *key_file, rexec_error *err)
{
    int r;
    rx_audit *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    a->rotate_size = RX_AUDIT_ROTATE_DEFAULT;
    a->writer_fd = -1;
    rx_audit_copy_init(&a->copy);
    rx_buf_init(&a->key, AUDIT_KEY_MAX);
    a->ws_dir = strdup(ws_dir);
    a->dir = rx_fs_join(ws_dir, "audit");
    a->path = rx_fs_join(ws_dir, "audit/audit.log");
    a->lock = rx_fs_join(ws_dir, "audit/.lock");
    if (!a->ws_dir || !a->dir || !a->path || !a->lock) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    if ((r = rx_fs_check(ws_dir, 0, REXEC_EAUDIT, err)) != 0 ||
        (r = rx_fs_mkdir_private(a->dir, REXEC_EAUDIT, err)) != 0 ||
        (r = audit_check_existing(a, err)) != 0 || (r = audit_rotate_env(a, err)) != 0)
        goto out;
    if (key_file != NULL && (r = rx_audit_key_load(key_file, ws_dir, &a->key, err)) != 0)
        goto out;
    int fd;
    if ((r = audit_open_lock(a, &fd, err)) == 0)
        close(fd);
out:
    if (r != 0) {
        rx_audit_close(a);
        a = NULL;
    }
    *out = a;
    return r;
}

/* ---- Rendering a record ----------------------------------------------------------------- */

void rx_audit_timestamp(char out[RX_AUDIT_TS_LEN])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, RX_AUDIT_TS_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, RX_AUDIT_TS_LEN - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* The caller's record must say which run and phase it is (verify pairs intents and outcomes
 * by them) and must leave prev and hash to us. */
static int audit_check_record(const cJSON *rec, rexec_error *err)
{
    if (!cJSON_IsObject(rec))
        return rx_fail(err, REXEC_EAUDIT, "audit record is not a JSON object");
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rec, "run_id")) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rec, "phase")))
        return rx_fail(err, REXEC_EAUDIT, "audit record has no run_id or phase string");
    if (cJSON_GetObjectItemCaseSensitive(rec, "prev") ||
        cJSON_GetObjectItemCaseSensitive(rec, "hash") ||
        cJSON_GetObjectItemCaseSensitive(rec, "seq"))
        return rx_fail(err, REXEC_EAUDIT, "audit record already holds seq, prev or hash");
    return 0;
}

/* A copy of rec with "ts" first (added when missing), printed on one line. */
static char *audit_print(const cJSON *rec)
{
    char ts[RX_AUDIT_TS_LEN];
    char *text = NULL;
    cJSON *c = cJSON_CreateObject(), *it;

    if (c == NULL)
        return NULL;
    it = cJSON_GetObjectItemCaseSensitive(rec, "ts");
    if (it == NULL) {
        rx_audit_timestamp(ts);
        if (cJSON_AddStringToObject(c, "ts", ts) == NULL)
            goto out;
    }
    cJSON_ArrayForEach(it, rec) {
        cJSON *d = cJSON_Duplicate(it, 1);
        if (d == NULL || !cJSON_AddItemToObject(c, it->string, d)) {
            cJSON_Delete(d);
            goto out;
        }
    }
    text = cJSON_PrintUnformatted(c);
out:
    cJSON_Delete(c);
    return text;
}

/* Names the first field still holding a secret, for a message that helps find the leak
 * without quoting it. */
static const char *audit_secret_field(const cJSON *rec, const rx_redactor *r)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, rec) {
        char *s = cJSON_PrintUnformatted(it);
        int hit = s != NULL && rx_redact_contains_secret(r, s, strlen(s));
        if (s != NULL)
            free(s);
        if (hit)
            return it->string;
    }
    return "?";
}

/* Validates, prints and scans rec; *text is the record without prev and hash. */
int rx_audit_render(const cJSON *rec, const rx_redactor *r, char **text, rexec_error *err)
{
    int rc = audit_check_record(rec, err);
    if (rc != 0)
        return rc;
    if ((*text = audit_print(rec)) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory printing the audit record");
    size_t len = strlen(*text);
    if (len + 160 > RX_AUDIT_LINE_MAX)
        rc = rx_fail(err, REXEC_EAUDIT, "audit record of %zu bytes is larger than %u", len,
                     RX_AUDIT_LINE_MAX);
    else if (r != NULL && rx_redact_contains_secret(r, *text, len))
        rc = rx_fail(err, REXEC_EAUDIT,
                     "audit record for run %.64s: field \"%s\" still holds a secret value: "
                     "refusing to write it",
                     cJSON_GetObjectItemCaseSensitive(rec, "run_id")->valuestring,
                     audit_secret_field(rec, r));
    if (rc != 0) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

/* Whether a rendered record is an intent. A nested object with "phase":"intent" would match
 * too; none of rexec's records has one, and a false match only names a writer on another
 * record. */
static int audit_is_intent(const char *text)
{
    return strstr(text, "\"phase\":\"intent\"") != NULL;
}

/* An intent that does not name its writer yet (a caller's own "writer" is kept). */
static int audit_needs_writer(const char *text)
{
    return audit_is_intent(text) && strstr(text, "\"writer\":") == NULL;
}

/* The line: text with "seq" and "prev" added as its last members, then "hash" over that
 * body. hex receives the hash. */
static int audit_line(const rx_audit *a, const char *text, long long seq, const char *prev,
                      rx_buf *line, char hex[RX_AUDIT_HEX_LEN], rexec_error *err)
{
    size_t tl = strlen(text), start = line->len; /* line may hold the batch's earlier lines */
    int r;

    /* text is an object with at least run_id and phase: "{...}" with a member before "}". */
    if ((r = rx_buf_add(line, text, tl - 1)) != 0 ||
        (a->writer[0] && audit_needs_writer(text) &&
         (r = rx_buf_addf(line, ",\"writer\":\"%s\"", a->writer)) != 0) ||
        (r = rx_buf_addf(line, ",\"seq\":%lld,\"prev\":\"%s\"}", seq, prev)) != 0)
        return rx_fail(err, r, "audit record too large");
    if (rx_audit_digest(&a->key, line->data + start, line->len - start, hex) != 0)
        return rx_fail(err, REXEC_EINTERNAL, "audit: SHA-256 failed");
    line->len--; /* drop the body's "}" and close the line with the hash */
    if ((r = rx_buf_addf(line, AUDIT_HASH_PREFIX "%s\"}\n", hex)) != 0)
        return rx_fail(err, r, "audit record too large");
    return 0;
}

/* ---- Appending under the lock ----------------------------------------------------------- */

static int pread_full(int fd, void *buf, size_t n, off_t off)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = pread(fd, p, n, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
        off += k;
    }
    return 0;
}

/* The offset just after the last newline before size (0 if none): where a partial last line
 * begins. Reads back in blocks, at most a line's worth. */
static off_t audit_last_line_start(int fd, off_t size)
{
    char blk[4096];
    off_t end = size, floor = size > RX_AUDIT_LINE_MAX ? size - RX_AUDIT_LINE_MAX : 0;
    while (end > floor) {
        size_t n = end - floor < (off_t)sizeof(blk) ? (size_t)(end - floor) : sizeof(blk);
        if (pread_full(fd, blk, n, end - (off_t)n) != 0)
            return -1;
        for (size_t i = n; i > 0; i--)
            if (blk[i - 1] == '\n')
                return end - (off_t)n + (off_t)i;
        end -= (off_t)n;
    }
    return floor;
}

int rx_audit_tail_parse(const char *s, size_t n, rx_audit_tail *t)
{
    static const char prev_key[] = ",\"prev\":\"", seq_key[] = ",\"seq\":";
    const size_t prev_len = sizeof(prev_key) - 1 + 64 + 1, seq_len = sizeof(seq_key) - 1;

    t->prev[0] = 0;
    t->seq = -1;
    if (rx_audit_line_hash(s, n, t->hash) != 0)
        return -1;
    size_t e = n - AUDIT_SUFFIX_LEN; /* where ,"prev":"<64>" must end */
    if (e < prev_len || memcmp(s + e - prev_len, prev_key, sizeof(prev_key) - 1) != 0 ||
        s[e - 1] != '"')
        return 0;
    memcpy(t->prev, s + e - 65, 64);
    t->prev[64] = 0;
    e -= prev_len; /* where ,"seq":<digits> must end */
    size_t d = 0;
    while (d < e && d < 19 && s[e - d - 1] >= '0' && s[e - d - 1] <= '9')
        d++;
    if (d == 0 || e < d + seq_len || memcmp(s + e - d - seq_len, seq_key, seq_len) != 0)
        return 0;
    t->seq = strtoll(s + e - d, NULL, 10);
    return 0;
}

/* What the file's last line says: only the last bytes are read, never the file. A last line
 * without its newline was cut by a crash or by hand; appending after it would hide that, so it
 * is refused with the command that removes it once someone has looked. */
static int audit_tail(int fd, off_t size, const char *path, rx_audit_tail *t, rexec_error *err)
{
    char tail[RX_AUDIT_TAIL_BYTES + 1];
    size_t n = size < (off_t)sizeof(tail) ? (size_t)size : sizeof(tail);

    if (pread_full(fd, tail, n, size - (off_t)n) != 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: cannot read: %s", path, strerror(errno));
    if (tail[n - 1] != '\n')
        return rx_fail(err, REXEC_EAUDIT,
                       "%s: the last line is incomplete (a crash in the middle of a write, or "
                       "the file was cut): refusing to append after it; see `rexec audit "
                       "verify`, then remove the partial line with `truncate -s %lld %s`",
                       path, (long long)audit_last_line_start(fd, size), path);
    if (rx_audit_tail_parse(tail, n - 1, t) != 0)
        return rx_fail(err, REXEC_EAUDIT,
                       "%s: the last line does not end with a hash (not written by rexec): "
                       "refusing to chain onto it; see `rexec audit verify`", path);
    return 0;
}

static void tail_empty(rx_audit_tail *t)
{
    memcpy(t->hash, RX_AUDIT_ZERO_HASH, RX_AUDIT_HEX_LEN);
    t->prev[0] = 0;
    t->seq = 0;
}

/* The chain's end when audit.log is empty: the newest rotated file's last line, so the chain
 * crosses rotations (and an append that failed right after a rotation loses nothing). */
static int audit_rotated_tail(const char *dir, rx_audit_tail *t, rexec_error *err)
{
    char **names = NULL, *path = NULL;
    size_t n = 0;
    int fd = -1, r;
    struct stat st;

    tail_empty(t);
    if ((r = rx_audit_rotated(dir, &names, &n, err)) != 0 || n == 0)
        goto out;
    if ((path = rx_fs_join(dir, names[n - 1])) == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (st.st_size > 0)
        r = audit_tail(fd, st.st_size, path, t, err);
out:
    if (fd >= 0)
        close(fd);
    free(path);
    rx_audit_names_free(names, n);
    return r;
}

int rx_audit_chain_tail(const char *audit_dir, rx_audit_tail *t, rexec_error *err)
{
    char *path = rx_fs_join(audit_dir, "audit.log");
    struct stat st;
    int r;
    if (path == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    else if (fd >= 0 && fstat(fd, &st) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    else if (fd >= 0 && st.st_size > 0)
        r = audit_tail(fd, st.st_size, path, t, err);
    else
        r = audit_rotated_tail(audit_dir, t, err);
    if (fd >= 0)
        close(fd);
    free(path);
    return r;
}

/* Lines in one file (a newline count), added to *n. */
static int count_lines(const char *path, long long *n, rexec_error *err)
{
    char blk[65536];
    ssize_t k;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : rx_fail(err, REXEC_EAUDIT, "%s: %s", path, strerror(errno));
    while ((k = read(fd, blk, sizeof(blk))) != 0) {
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            return rx_fail(err, REXEC_EAUDIT, "%s: read: %s", path, strerror(e));
        }
        for (const char *p = blk; (p = memchr(p, '\n', (size_t)(blk + k - p))) != NULL; p++)
            (*n)++;
    }
    close(fd);
    return 0;
}

/* The seq of the next record: one more than the last line's. A log written before sequence
 * numbers is counted once (its rotated files, minus those a prune anchor covers, and
 * audit.log), so the numbering starts where verify's count says it must. */
static int audit_next_seq(const rx_audit *a, const rx_audit_tail *t, long long *seq,
                          rexec_error *err)
{
    char **names = NULL, *path = NULL;
    size_t n = 0;
    cJSON *anchor = NULL;
    long long lines = 0;
    int r;

    if (t->seq >= 0) {
        *seq = t->seq + 1;
        return 0;
    }
    if ((r = rx_audit_anchor_load(a->ws_dir, &anchor, err)) != 0 ||
        (r = rx_audit_rotated(a->dir, &names, &n, err)) != 0)
        goto out;
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (rx_audit_anchor_names(anchor, names[i]))
            continue;
        if ((path = rx_fs_join(a->dir, names[i])) == NULL)
            r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        else
            r = count_lines(path, &lines, err);
        free(path);
        path = NULL;
    }
    if (r == 0)
        r = count_lines(a->path, &lines, err);
    *seq = lines + 1;
out:
    rx_audit_names_free(names, n);
    cJSON_Delete(anchor);
    return r;
}

/* Opens audit.log for appending (O_APPEND: every write lands at the end even if another
 * process appended since) and checks it on the descriptor itself. */
static int audit_open_log(const rx_audit *a, int *fd, off_t *size, rexec_error *err)
{
    struct stat st;
    int r = 0;
    int f = open(a->path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0)
        return rx_fail(err, REXEC_EAUDIT, "%s: cannot open: %s", a->path,
                       errno == ELOOP ? "is a symbolic link" : strerror(errno));
    if (fstat(f, &st) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: %s", a->path, strerror(errno));
    else if (st.st_size == 0 && (st.st_mode & 07777) != 0600 && fchmod(f, 0600) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot set mode 0600: %s", a->path,
                    strerror(errno));
    else if ((r = rx_fs_check_fd(f, a->path, 0, REXEC_EAUDIT, err)) == 0 && st.st_size == 0)
        r = rx_fs_fsync_dir(a->dir, REXEC_EAUDIT, err); /* the new name must survive a crash */
    if (r != 0) {
        close(f);
        return r;
    }
    *fd = f;
    *size = st.st_size;
    return 0;
}

/* Renames the full audit.log to audit-<UTC time>.log and opens a fresh one. The name has
 * nanoseconds so names sort by time; if the clock went back and the name would not sort last,
 * rotation waits (the log just grows) rather than break the order verify walks. */
static int audit_rotate(const rx_audit *a, int *fd, off_t *size, rexec_error *err)
{
    char name[64], **names = NULL, *to = NULL;
    size_t n = 0, k;
    struct timespec now;
    struct tm tm;
    int r;

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    k = strftime(name, sizeof(name), "audit-%Y%m%dT%H%M%S", &tm);
    snprintf(name + k, sizeof(name) - k, ".%09ldZ.log", now.tv_nsec);
    if ((r = rx_audit_rotated(a->dir, &names, &n, err)) != 0 ||
        (n > 0 && strcmp(name, names[n - 1]) <= 0))
        goto out;
    if ((to = rx_fs_join(a->dir, name)) == NULL) {
        r = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    if (renameat2(AT_FDCWD, a->path, AT_FDCWD, to, RENAME_NOREPLACE) != 0 &&
        (errno != EINVAL || rename(a->path, to) != 0)) {
        r = rx_fail(err, REXEC_EAUDIT, "%s: cannot rotate to %s: %s", a->path, name,
                    strerror(errno));
        goto out;
    }
    if ((r = rx_fs_fsync_dir(a->dir, REXEC_EAUDIT, err)) != 0)
        goto out;
    close(*fd);
    *fd = -1;
    r = audit_open_log(a, fd, size, err);
out:
    free(to);
    rx_audit_names_free(names, n);
    return r;
}

/* A failed append: the log is cut back to its size before (we still hold the lock), so no
 * partial line or half-done record stays behind; an append is all or nothing, as a caller told
 * "failed" expects. */
static int audit_failed(const rx_audit *a, int fd, off_t size, const char *why,
                        rexec_error *err)
{
    char w[sizeof(err->msg)];
    snprintf(w, sizeof(w), "%s", why); /* why may be err->msg */
    int undone = ftruncate(fd, size) == 0 && fsync(fd) == 0;
    return rx_fail(err, REXEC_EAUDIT, "%s: cannot append the audit record: %.400s%s", a->path,
                   w, undone ? "" : " (and the partial record could not be taken back out: run "
                                    "`rexec audit verify`)");
}

/* One write() of the lines (looping only on a short write), then the fsync: the records are
 * durable when this returns 0. The head is written after (rx_audit_append_end). */
static int audit_write(const rx_audit *a, int fd, off_t size, const rx_buf *line,
                       rexec_error *err)
{
    if (rx_fs_write_all(fd, line->data, line->len) != 0 || fsync(fd) != 0)
        return audit_failed(a, fd, size, strerror(errno), err);
    return 0;
}

/* Where the n lines of one append are: each line's length and hash. */
typedef struct audit_batch {
    size_t len;
    char hex[RX_AUDIT_HEX_LEN];
} audit_batch;

/* The lines of n records chained after t, one after the other in line: seq, prev and hash for
 * each. */
static int audit_lines(const rx_audit *a, char *const *texts, size_t n, const rx_audit_tail *t,
                       long long seq, rx_buf *line, audit_batch *b, rexec_error *err)
{
    for (size_t i = 0; i < n; i++) {
        size_t before = line->len;
        int r = audit_line(a, texts[i], seq + (long long)i, i ? b[i - 1].hex : t->hash, line,
                           b[i].hex, err);
        if (r != 0)
            return r;
        b[i].len = line->len - before;
    }
    return 0;
}

/* Sent under the lock, so the copies keep the chain's order. */
static void audit_copy_lines(rx_audit *a, const rx_buf *line, const audit_batch *b, size_t n,
                             long long seq)
{
    const char *p = (const char *)line->data;
    for (size_t i = 0; i < n; p += b[i].len, i++)
        rx_audit_copy_send(&a->copy, p, b[i].len - 1, seq + (long long)i, b[i].hex);
}

/* The head an earlier append could not update, brought up to the chain's end t before more
 * records go after it (a head that stays behind would anchor less and less of the log). If it
 * still fails, a batch of intents only is refused: nothing has run yet, and the caller says so
 * (exit 74). Any other record (an outcome, a refusal, an abandoned record) tells what already
 * happened and goes in with the head behind, a state verify accepts: refusing it would lose the
 * truth to protect the aid. */
static int audit_head_catch_up(rx_audit *a, char *const *texts, size_t n,
                               const rx_audit_tail *t, rexec_error *err)
{
    size_t intents = 0;
    rexec_error e;
    if (!a->head_behind || t->seq <= 0)
        return 0;
    if (rx_audit_head_update(a->dir, &a->key, t->seq, t->hash, &e) == 0) {
        a->head_behind = 0;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        intents += audit_is_intent(texts[i]);
    if (intents < n)
        return 0;
    *err = e;
    return rx_fail_prefix(err, "the audit head is behind the log since an earlier append: ");
}

static int audit_append_locked(rx_audit *a, char *const *texts, size_t n, rx_buf *line,
                               audit_batch *b, rx_audit_pending *p, rexec_error *err)
{
    rx_audit_tail t;
    long long seq = 0;
    off_t size = 0;
    int fd = -1, r;

    if ((r = audit_open_log(a, &fd, &size, err)) != 0)
        goto out;
    r = size > 0 ? audit_tail(fd, size, a->path, &t, err) : audit_rotated_tail(a->dir, &t, err);
    if (r != 0 || (r = rx_audit_head_prepare(a->dir, &a->key, &t, err)) != 0 ||
        (r = audit_head_catch_up(a, texts, n, &t, err)) != 0 ||
        (r = audit_next_seq(a, &t, &seq, err)) != 0 ||
        (r = audit_lines(a, texts, n, &t, seq, line, b, err)) != 0)
        goto out;
    if (a->rotate_size > 0 && size > 0 &&
        (unsigned long long)size + line->len > a->rotate_size &&
        (r = audit_rotate(a, &fd, &size, err)) != 0)
        goto out;
    if ((r = audit_write(a, fd, size, line, err)) != 0)
        goto out;
    p->seq = seq + (long long)n - 1;
    memcpy(p->hash, b[n - 1].hex, RX_AUDIT_HEX_LEN);
    audit_copy_lines(a, line, b, n, seq);
out:
    if (fd >= 0)
        close(fd);
    return r;
}

static int audit_lock(const rx_audit *a, int *fd, rexec_error *err)
{
    int r = audit_open_lock(a, fd, err);
    if (r != 0)
        return r;
    while (flock(*fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            r = rx_fail(err, REXEC_EAUDIT, "%s: flock: %s", a->lock, strerror(errno));
            close(*fd);
            return r;
        }
    }
    return 0;
}

int rx_audit_append_begin(rx_audit *a, char *const *texts, size_t n, rx_audit_pending *p,
                          rexec_error *err)
{
    rx_buf line;
    audit_batch *b;
    int lock_fd = -1, rc;

    p->lock_fd = -1;
    p->seq = 0;
    if (a == NULL)
        return rx_fail(err, REXEC_EINTERNAL, "audit log not open");
    if (n == 0)
        return 0;
    if (n > RX_AUDIT_BATCH_MAX)
        return rx_fail(err, REXEC_EINTERNAL, "audit: %zu records in one append (at most %d)", n,
                       RX_AUDIT_BATCH_MAX);
    if ((b = calloc(n, sizeof(*b))) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory appending to the audit log");
    rx_buf_init(&line, (size_t)RX_AUDIT_LINE_MAX * n);
    for (size_t i = 0; i < n && a->writer_pid != getpid(); i++)
        if (audit_needs_writer(texts[i]) && (rc = audit_writer_start(a, err)) != 0)
            goto out; /* an intent must name a writer whose lock is held */
    if ((rc = audit_lock(a, &lock_fd, err)) == 0) {
        rc = audit_append_locked(a, texts, n, &line, b, p, err);
        if (rc == 0)
            p->lock_fd = lock_fd; /* held until the head is written */
        else
            close(lock_fd);
    }
out:
    rx_buf_free(&line);
    free(b);
    return rc;
}

int rx_audit_append_end_write(rx_audit *a, rx_audit_pending *p, int *sync_fd, rexec_error *err)
{
    int r = 0;
    *sync_fd = -1;
    if (p->lock_fd < 0)
        return 0; /* nothing was appended */
    if (rx_audit_head_write(a->dir, &a->key, p->seq, p->hash, sync_fd, err) != 0) {
        a->head_behind = 1;
        r = err->code;
    }
    close(p->lock_fd); /* releases the lock, after the head's write */
    p->lock_fd = -1;
    return r;
}

int rx_audit_append_sync(const rx_audit *a, int sync_fd, rexec_error *err)
{
    return rx_audit_head_sync(a->dir, sync_fd, err);
}

void rx_audit_head_is_behind(rx_audit *a)
{
    a->head_behind = 1;
}

int rx_audit_append_end(rx_audit *a, rx_audit_pending *p, rexec_error *err)
{
    int fd, r = rx_audit_append_end_write(a, p, &fd, err);
    if (r == 0 && (r = rx_audit_append_sync(a, fd, err)) != 0)
        rx_audit_head_is_behind(a);
    return r;
}

/* Returns once the head is written too. A head that fails after the records are durable does
 * not fail the append (the records are the truth, and a head behind them is a valid state):
 * the next append retries it and is refused if it fails again. */
int rx_audit_append_texts(rx_audit *a, char *const *texts, size_t n, rexec_error *err)
{
    rx_audit_pending p;
    rexec_error head_err;
    int rc = rx_audit_append_begin(a, texts, n, &p, err);
    if (rc == 0)
        (void)rx_audit_append_end(a, &p, &head_err);
    return rc;
}

int rx_audit_append(rx_audit *a, cJSON *rec, const rx_redactor *r, rexec_error *err)
{
    char *text = NULL;
    int rc;

    if (a == NULL)
        return rx_fail(err, REXEC_EINTERNAL, "audit log not open");
    if ((rc = rx_audit_render(rec, r, &text, err)) == 0)
        rc = rx_audit_append_texts(a, &text, 1, err);
    free(text);
    return rc;
}

/* ---- The syslog copy -------------------------------------------------------------------- */

int rx_audit_set_syslog(rx_audit *a, const char *socket_path, rexec_error *err)
{
    return rx_audit_copy_open(&a->copy, socket_path, err);
}

unsigned long rx_audit_copy_failures(const rx_audit *a)
{
    return a->copy.failures;
}
