/* Evidence: unique run ids, the files and meta written whole with exact modes, refusals (secret,
 * bad id, existing run, symlinked dir) that leave nothing behind, and disk full. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include <openssl/evp.h>

#include "evidence.h"
#include "evidence_prune.h"
#include "fsutil.h"
#include "redact.h"

typedef struct fixture {
    char ws[PATH_MAX];
    char ev[PATH_MAX + 16];
    int mounted;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    strcpy(f->ws, "/tmp/rx-evidence-XXXXXX");
    if (mkdtemp(f->ws) == NULL)
        return -1;
    snprintf(f->ev, sizeof(f->ev), "%s/evidence", f->ws);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->mounted)
        umount2(f->ws, MNT_DETACH);
    rx_test_rm_tree(f->ws);
    free(f);
    return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (hay == NULL)
        fail_msg("expected \"%s\", got nothing", needle);
    else if (strstr(hay, needle) == NULL)
        fail_msg("expected \"%s\" in: %s", needle, hay);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    rewind(fp);
    char *s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, fp), (size_t)n);
    s[n] = 0;
    fclose(fp);
    *len = (size_t)n;
    return s;
}

static void sha256_hex(const void *d, size_t n, char hex[65])
{
    unsigned char md[32];
    unsigned int k;
    EVP_Digest(d, n, md, &k, EVP_sha256(), NULL);
    for (unsigned int i = 0; i < k; i++)
        sprintf(hex + 2 * i, "%02x", md[i]);
}

/* Names in dir (not . and ..), joined with ',' in readdir order is not stable: count only. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    if (d == NULL)
        return -1;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

static cJSON *mkmeta(void)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "host", "lab1");
    cJSON_AddStringToObject(m, "action", "sys.uname");
    cJSON_AddStringToObject(m, "decision", "ALLOW");
    cJSON_AddStringToObject(m, "containment", "process-group");
    cJSON_AddFalseToObject(m, "stdout_truncated");
    cJSON_AddTrueToObject(m, "stderr_truncated");
    return m;
}

static void test_run_ids_unique(void **state)
{
    (void)state;
    enum { N = 2000 };
    char (*ids)[RX_RUN_ID_LEN] = malloc(N * sizeof(*ids));
    regex_t re;
    assert_int_equal(regcomp(&re, "^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{16}$", REG_EXTENDED | REG_NOSUB), 0);
    for (int i = 0; i < N; i++) {
        rx_run_id_new(ids[i]);
        if (regexec(&re, ids[i], 0, NULL, 0) != 0)
            fail_msg("bad run id \"%s\"", ids[i]);
    }
    /* all in the same second or two: uniqueness comes from the random part */
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            if (strcmp(ids[i], ids[j]) == 0)
                fail_msg("duplicate run id %s", ids[i]);
    regfree(&re);
    free(ids);
}

static void assert_mode(const char *p, mode_t want)
{
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    if ((st.st_mode & 07777) != want)
        fail_msg("%s: mode %04o, want %04o", p, (unsigned)(st.st_mode & 07777), (unsigned)want);
}

/* The stored files hold exactly the bytes given (binary too), meta says what was stored, and
 * the modes are exact even under umask 0. */
static void test_write_files_and_meta(void **state)
{
    fixture *f = *state;
    static const unsigned char out[] = "hello\0world\n\xff";
    static const unsigned char errb[] = "warning: [REDACTED:API_TOKEN]\n";
    char *path = NULL, p[PATH_MAX + 64], hex[65];
    rexec_error e = {0};
    cJSON *meta = mkmeta();

    mode_t old = umask(0);
    int rc = rx_evidence_write(f->ws, "20261202T101500Z-0123456789abcdef", out, sizeof(out) - 1,
                               errb, sizeof(errb) - 1, meta, NULL, &path, &e);
    umask(old);
    if (rc != 0)
        fail_msg("%s", e.msg);
    snprintf(p, sizeof(p), "%s/20261202T101500Z-0123456789abcdef", f->ev);
    assert_string_equal(path, p);
    assert_mode(f->ev, 0700);
    assert_mode(p, 0700);
    assert_int_equal(entries(p), 3);
    assert_int_equal(entries(f->ev), 1); /* no .tmp- left */

    size_t len;
    snprintf(p, sizeof(p), "%s/stdout", path);
    assert_mode(p, 0600);
    char *s = slurp(p, &len);
    assert_int_equal(len, sizeof(out) - 1);
    assert_memory_equal(s, out, len);
    free(s);

    snprintf(p, sizeof(p), "%s/meta.json", path);
    assert_mode(p, 0600);
    s = slurp(p, &len);
    cJSON *m = cJSON_Parse(s);
    assert_non_null(m);
    sha256_hex(out, sizeof(out) - 1, hex);
    assert_string_equal(cJSON_GetObjectItem(m, "stdout_sha256")->valuestring, hex);
    sha256_hex(errb, sizeof(errb) - 1, hex);
    assert_string_equal(cJSON_GetObjectItem(m, "stderr_sha256")->valuestring, hex);
    assert_int_equal(cJSON_GetObjectItem(m, "stdout_bytes_stored")->valueint, sizeof(out) - 1);
    assert_int_equal(cJSON_GetObjectItem(m, "stderr_bytes_stored")->valueint, sizeof(errb) - 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(m, "stderr_truncated")));
    assert_string_equal(cJSON_GetObjectItem(m, "containment")->valuestring, "process-group");
    assert_string_equal(cJSON_GetObjectItem(m, "run_id")->valuestring,
                        "20261202T101500Z-0123456789abcdef");
    /* the caller's meta was completed too */
    assert_string_equal(cJSON_GetObjectItem(meta, "stdout_sha256")->valuestring,
                        cJSON_GetObjectItem(m, "stdout_sha256")->valuestring);
    cJSON_Delete(m);
    free(s);
    free(path);
    cJSON_Delete(meta);
}

/* Evidence is never replaced: the second write of a run id fails and the first stays. */
static void test_existing_run_refused(void **state)
{
    fixture *f = *state;
    char p[PATH_MAX + 64];
    rexec_error e = {0};
    cJSON *meta = mkmeta();
    assert_int_equal(rx_evidence_write(f->ws, "run-1", (const unsigned char *)"first", 5, NULL, 0,
                                       meta, NULL, NULL, &e), 0);
    assert_int_equal(rx_evidence_write(f->ws, "run-1", (const unsigned char *)"second", 6, NULL,
                                       0, meta, NULL, NULL, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "already exists");
    size_t len;
    snprintf(p, sizeof(p), "%s/run-1/stdout", f->ev);
    char *s = slurp(p, &len);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "first", 5);
    free(s);
    assert_int_equal(entries(f->ev), 1);
    cJSON_Delete(meta);
}

static void test_bad_run_ids_refused(void **state)
{
    fixture *f = *state;
    const char *bad[] = {"", "../x", "a/b", ".tmp-x", "..", "x y", "0123456789012345678901234567890123456789"};
    rexec_error e = {0};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cJSON *meta = mkmeta();
        assert_int_equal(rx_evidence_write(f->ws, bad[i], NULL, 0, NULL, 0, meta, NULL, NULL, &e),
                         REXEC_EAUDIT);
        assert_contains(e.msg, "invalid run id");
        cJSON_Delete(meta);
    }
    assert_int_equal(entries(f->ws), 0);
}

#define SECRET "s3cr3t-T0KEN-value-42"

static void test_secret_refused_nothing_written(void **state)
{
    fixture *f = *state;
    rx_redactor *red = NULL;
    rexec_error e = {0};
    rx_secret sec = {"API_TOKEN", (const unsigned char *)SECRET, strlen(SECRET)};
    assert_int_equal(rx_redactor_new(&red, &sec, 1, &e), 0);
    const char *err_text = "token=" SECRET "\n";
    cJSON *meta = mkmeta();
    assert_int_equal(rx_evidence_write(f->ws, "run-s", (const unsigned char *)"ok", 2,
                                       (const unsigned char *)err_text, strlen(err_text), meta,
                                       red, NULL, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "stderr still holds a secret");
    assert_null(strstr(e.msg, SECRET));
    assert_int_equal(entries(f->ev), 0); /* no run directory, not even a .tmp- one */

    cJSON_AddStringToObject(meta, "note", SECRET);
    assert_int_equal(rx_evidence_write(f->ws, "run-s", (const unsigned char *)"ok", 2, NULL, 0,
                                       meta, red, NULL, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "meta.json still holds a secret");
    assert_int_equal(entries(f->ev), 0);
    cJSON_Delete(meta);
    rx_redactor_free(red);
}

static void test_symlinked_evidence_dir_refused(void **state)
{
    fixture *f = *state;
    char elsewhere[] = "/tmp/rx-evidence-elsewhere-XXXXXX";
    rexec_error e = {0};
    assert_non_null(mkdtemp(elsewhere));
    assert_int_equal(symlink(elsewhere, f->ev), 0);
    cJSON *meta = mkmeta();
    assert_int_equal(rx_evidence_write(f->ws, "run-l", (const unsigned char *)"x", 1, NULL, 0,
                                       meta, NULL, NULL, &e), REXEC_EAUDIT);
    assert_contains(e.msg, f->ev);
    assert_contains(e.msg, "symbolic link");
    assert_int_equal(entries(elsewhere), 0);
    rmdir(elsewhere);
    cJSON_Delete(meta);
}

/* Disk full in the middle of the files: an error naming the file and ENOSPC, and neither a
 * final nor a .tmp- directory left. */
static void test_disk_full(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    if (mount("tmpfs", f->ws, "tmpfs", 0, "size=64k,mode=0700") != 0) {
        print_message("skipping: cannot mount a tmpfs on %s: %s\n", f->ws, strerror(errno));
        skip();
    }
    f->mounted = 1;
    size_t n = 256 * 1024;
    unsigned char *big = malloc(n);
    memset(big, 'y', n);
    cJSON *meta = mkmeta();
    assert_int_equal(rx_evidence_write(f->ws, "run-big", (const unsigned char *)"small", 5, big,
                                       n, meta, NULL, NULL, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "stderr");
    assert_contains(e.msg, strerror(ENOSPC));
    assert_int_equal(entries(f->ev), 0);
    /* and the space came back: a small one fits */
    int rs = rx_evidence_write(f->ws, "run-small", (const unsigned char *)"small", 5, NULL, 0,
                               meta, NULL, NULL, &e);
    if (rs != 0)
        print_message("%s\n", e.msg);
    assert_int_equal(rs, 0);
    free(big);
    cJSON_Delete(meta);
}

/* Bytes that never hold SECRET: a simple generator, the same for the test and its check. */
static void fill(unsigned char *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (unsigned char)(seed >> 16);
    }
}

/* Output of many pieces in odd-sized appends, both streams interleaved: the files hold exactly
 * what was appended, in order; a secret in a late piece is refused (without the value in the
 * message) and leaves nothing. */
static void test_streamed_pieces(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_evidence *ev = NULL;
    rx_redactor *red = NULL;
    rx_secret sec = {"API_TOKEN", (const unsigned char *)SECRET, strlen(SECRET)};
    size_t n[2] = {3 * 1024 * 1024 + 12345, 1024 * 1024 + 7}, step[2] = {7919, 65537};
    unsigned char *want[2];
    const char *sha[2] = {"", ""};
    char *path = NULL, file[PATH_MAX + 64];
    assert_int_equal(rx_redactor_new(&red, &sec, 1, &e), 0);
    for (int i = 0; i < 2; i++) {
        want[i] = malloc(n[i]);
        fill(want[i], n[i], (uint32_t)i + 1);
    }
    assert_int_equal(rx_evidence_open(&ev, f->ws, "run-pieces", red, &e), 0);
    for (size_t off[2] = {0, 0}; off[0] < n[0] || off[1] < n[1];)
        for (int i = 0; i < 2; i++) {
            size_t k = n[i] - off[i] < step[i] ? n[i] - off[i] : step[i];
            rx_evidence_append(ev, i, want[i] + off[i], k);
            off[i] += k;
        }
    cJSON *meta = mkmeta();
    assert_int_equal(rx_evidence_commit(ev, meta, sha, &path, &e), 0);
    for (int i = 0; i < 2; i++) {
        size_t len;
        snprintf(file, sizeof(file), "%s/%s", path, i ? "stderr" : "stdout");
        char *got = slurp(file, &len);
        assert_int_equal(len, n[i]);
        assert_memory_equal(got, want[i], n[i]);
        free(got);
    }
    free(path);

    memcpy(want[0] + 1300 * 1024 + 5, SECRET, strlen(SECRET)); /* in the sixth piece */
    assert_int_equal(rx_evidence_open(&ev, f->ws, "run-late", red, &e), 0);
    for (size_t off = 0; off < n[0]; off += step[0])
        rx_evidence_append(ev, 0, want[0] + off, n[0] - off < step[0] ? n[0] - off : step[0]);
    assert_int_equal(rx_evidence_commit(ev, meta, sha, NULL, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "stdout still holds a secret");
    assert_null(strstr(e.msg, SECRET));
    assert_int_equal(entries(f->ev), 1); /* run-pieces only */
    free(want[0]);
    free(want[1]);
    cJSON_Delete(meta);
    rx_redactor_free(red);
}

static size_t spares_in(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        n += strncmp(de->d_name, ".spare-", 7) == 0;
    closedir(d);
    return n;
}

/* A spare directory (made after a process's second commit) is synced when it is made: the
 * commit that takes it syncs its files but not the directory; without a spare the directory is
 * synced off the call's path since the open, never at the commit. Each commit with more than
 * one thing to sync hands one to the helper thread (side by side), and the evidence is whole
 * either way. */
static void test_spare_and_side_by_side_syncs(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    unsigned long h0, d0, h1, d1;
    const char *sha[2] = {"", ""};
    char *path = NULL, p[PATH_MAX + 64];
    cJSON *meta = mkmeta();
    rx_evidence *ev = NULL;

    rx_evidence_spare_drop(); /* counts from here, in this workspace */
    rx_evidence_sync_counts(&h0, &d0);
    for (int i = 0; i < 2; i++) {
        char run[32];
        snprintf(run, sizeof(run), "run-plain-%d", i);
        cJSON *m = mkmeta();
        assert_int_equal(rx_evidence_write(f->ws, run, (const unsigned char *)"out\n", 4,
                                           (const unsigned char *)"err\n", 4, m, NULL, NULL,
                                           &e), 0);
        cJSON_Delete(m);
    }
    rx_evidence_sync_counts(&h1, &d1);
    assert_int_equal(d1 - d0, 0); /* no spare yet: synced since the open, not at the commit */
    assert_int_equal(h1 - h0, 2); /* one of the three fsyncs each by the helper */

    rx_evidence_spare_fill();
    assert_int_equal(spares_in(f->ev), 1);
    assert_int_equal(rx_evidence_open(&ev, f->ws, "run-spare", NULL, &e), 0);
    assert_int_equal(spares_in(f->ev), 0); /* taken */
    rx_evidence_append(ev, 0, "from a spare\n", 13);
    assert_int_equal(rx_evidence_commit(ev, meta, sha, &path, &e), 0);
    rx_evidence_sync_counts(&h0, &d0);
    assert_int_equal(d0 - d1, 0); /* the spare's directory was synced when it was made */
    assert_int_equal(h0 - h1, 1); /* stdout here, meta.json by the helper */
    snprintf(p, sizeof(p), "%s/stdout", path);
    size_t len;
    char *s = slurp(p, &len);
    assert_int_equal(len, 13);
    assert_memory_equal(s, "from a spare\n", 13);
    free(s);
    assert_int_equal(entries(path), 3);
    free(path);
    rx_evidence_spare_drop();
    cJSON_Delete(meta);
}


/* The directory has its final name from the open on (the commit renames nothing): locked by
 * its writer, with its three files, meta.json empty; it is "in progress" to a reader meanwhile.
 * An abort removes it. */
static void test_final_name_at_open_and_abort(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_evidence *ev = NULL;
    char p[PATH_MAX + 64];
    struct stat st;
    int lock_fd;
    rx_evidence_spare_drop();
    assert_int_equal(rx_evidence_open(&ev, f->ws, "run-open", NULL, &e), 0);
    snprintf(p, sizeof(p), "%s/run-open", f->ev);
    assert_string_equal(rx_evidence_path(ev), p);
    assert_int_equal(stat(p, &st), 0); /* the final name, at the open */
    assert_mode(p, 0700);
    assert_int_equal(entries(p), 3);
    assert_int_equal(entries(f->ev), 1); /* no .tmp- beside it */
    snprintf(p, sizeof(p), "%s/run-open/meta.json", f->ev);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
    int dfd = open(f->ev, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    assert_int_equal(rx_evidence_dir_state_at(dfd, "run-open", &lock_fd), RX_EV_IN_PROGRESS);
    assert_int_equal(lock_fd, -1);
    rx_evidence_append(ev, 0, "partial\n", 8);
    rx_evidence_abort(ev);
    assert_int_equal(entries(f->ev), 0); /* the aborted directory is gone */
    close(dfd);
}

/* The commit does no directory fsync and no rename: the run's directory and evidence/ are
 * synced by the dirsync thread since the open (two without a spare, evidence/ alone with one),
 * and the commit only syncs the files; once it returns, the evidence is complete to a reader. */
static void test_commit_syncs_no_directory(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_evidence *ev = NULL;
    rx_evidence_counts c0, c1;
    char sa[65], sc[65], se[65];
    sha256_hex("a\n", 2, sa);
    sha256_hex("c\n", 2, sc);
    sha256_hex("", 0, se);
    const char *sha[2] = {sa, se}, *shc[2] = {se, sc};
    cJSON *meta = mkmeta();
    int lock_fd;
    rx_evidence_spare_drop();
    /* a commit first: every earlier request of the dirsync thread (other tests' aborts) was
     * counted before its own was done */
    cJSON *m0 = mkmeta();
    assert_int_equal(rx_evidence_write(f->ws, "run-0", (const unsigned char *)"0", 1, NULL, 0,
                                       m0, NULL, NULL, &e), 0);
    cJSON_Delete(m0);
    rx_evidence_spare_drop();
    rx_evidence_counts_get(&c0);
    assert_int_equal(rx_evidence_open(&ev, f->ws, "run-a", NULL, &e), 0);
    rx_evidence_append(ev, 0, "a\n", 2);
    assert_int_equal(rx_evidence_commit(ev, meta, sha, NULL, &e), 0);
    rx_evidence_counts_get(&c1);
    assert_int_equal(c1.dirs_at_commit - c0.dirs_at_commit, 0);
    assert_int_equal(c1.parents_at_commit - c0.parents_at_commit, 0);
    assert_int_equal(c1.early_syncs - c0.early_syncs, 2); /* its directory and evidence/ */
    int dfd = open(f->ev, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    assert_int_equal(rx_evidence_dir_state_at(dfd, "run-a", &lock_fd), RX_EV_COMPLETE);
    close(lock_fd);

    /* from a spare (made after the second commit): evidence/ only, off the path too */
    cJSON *m2 = mkmeta();
    assert_int_equal(rx_evidence_write(f->ws, "run-b", (const unsigned char *)"b", 1, NULL, 0,
                                       m2, NULL, NULL, &e), 0);
    rx_evidence_spare_fill();
    rx_evidence_counts_get(&c0);
    assert_int_equal(rx_evidence_open(&ev, f->ws, "run-c", NULL, &e), 0);
    assert_int_equal(entries(f->ev), 4); /* run-0, -a, -b, -c: the spare was renamed */
    rx_evidence_append(ev, 1, "c\n", 2);
    cJSON *m3 = mkmeta();
    assert_int_equal(rx_evidence_commit(ev, m3, shc, NULL, &e), 0);
    rx_evidence_counts_get(&c1);
    assert_int_equal(c1.dirs_at_commit - c0.dirs_at_commit, 0);
    assert_int_equal(c1.parents_at_commit - c0.parents_at_commit, 0);
    assert_int_equal(c1.early_syncs - c0.early_syncs, 1); /* evidence/ */
    assert_int_equal(rx_evidence_dir_state_at(dfd, "run-c", &lock_fd), RX_EV_COMPLETE);
    close(lock_fd);
    close(dfd);
    rx_evidence_spare_drop();
    cJSON_Delete(meta);
    cJSON_Delete(m2);
    cJSON_Delete(m3);
}

/* A directory under a run's name as a crash can leave it (files but meta.json given). */
static void leftover(const fixture *f, const char *name, const char *meta, const char *out)
{
    char p[PATH_MAX + 128];
    snprintf(p, sizeof(p), "%s/%s", f->ev, name);
    assert_int_equal(mkdir(p, 0700), 0);
    const char *files[3] = {"stdout", "stderr", "meta.json"}, *data[3] = {out, "", meta};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s/%s", f->ev, name, files[i]);
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fputs(data[i], fp);
        fclose(fp);
    }
}

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define META_OF(id, n) "{\"run_id\":\"" id "\",\"stdout_sha256\":\"" EMPTY_SHA "\"," \
    "\"stderr_sha256\":\"" EMPTY_SHA "\",\"stdout_bytes_stored\":" #n ",\"stderr_bytes_stored\":0}"

/* Incomplete directories under a run's name are never taken for evidence: a crashed call's
 * (meta.json empty), a commit cut short (meta.json cut), stale blocks (another run's meta), a
 * stream short of what meta says. prune removes them (not counted as runs, not kept by
 * --keep) once old and unlocked; a live call's directory (locked) stays; a whole one is a run. */
static void test_incomplete_skipped_and_pruned(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_evidence *live = NULL;
    rx_evidence_prune_stats st;
    int lock_fd;
    cJSON *meta = mkmeta();
    const char *whole = "20200101T000000Z-aaaaaaaaaaaaaaaa";
    assert_int_equal(rx_evidence_write(f->ws, whole, (const unsigned char *)"x", 1, NULL, 0, meta,
                                       NULL, NULL, &e), 0);
    leftover(f, "20200101T000001Z-bbbbbbbbbbbbbbbb", "", "");
    leftover(f, "20200101T000002Z-cccccccccccccccc", "{\"run_id\":\"20200101T000002Z-cccc", "");
    leftover(f, "20200101T000003Z-dddddddddddddddd", META_OF("20200101T000000Z-aaaaaaaaaaaaaaaa", 0), "");
    leftover(f, "20200101T000004Z-eeeeeeeeeeeeeeee", META_OF("20200101T000004Z-eeeeeeeeeeeeeeee", 5), "ab");
    leftover(f, "20200101T000005Z-ffffffffffffffff", META_OF("20200101T000005Z-ffffffffffffffff", 2), "ab");
    const char *in_progress = "20200101T000006Z-0123456789abcdef";
    assert_int_equal(rx_evidence_open(&live, f->ws, in_progress, NULL, &e), 0);

    int dfd = open(f->ev, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    static const struct { const char *name; rx_evidence_dir_state want; } cases[] = {
        {"20200101T000000Z-aaaaaaaaaaaaaaaa", RX_EV_COMPLETE},
        {"20200101T000001Z-bbbbbbbbbbbbbbbb", RX_EV_INCOMPLETE},
        {"20200101T000002Z-cccccccccccccccc", RX_EV_INCOMPLETE},
        {"20200101T000003Z-dddddddddddddddd", RX_EV_INCOMPLETE},
        {"20200101T000004Z-eeeeeeeeeeeeeeee", RX_EV_INCOMPLETE},
        {"20200101T000005Z-ffffffffffffffff", RX_EV_COMPLETE}, /* a hand-made whole one */
        {"20200101T000006Z-0123456789abcdef", RX_EV_IN_PROGRESS},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rx_evidence_dir_state got = rx_evidence_dir_state_at(dfd, cases[i].name, &lock_fd);
        if (got != cases[i].want)
            fail_msg("%s: state %d, want %d", cases[i].name, got, cases[i].want);
        if (lock_fd >= 0)
            close(lock_fd);
    }
    /* --keep 1 keeps the newest whole run, not a newer leftover */
    assert_int_equal(rx_evidence_prune(f->ws, time(NULL), 1, &st, &e), 0);
    assert_int_equal(st.kept, 1);
    assert_int_equal(st.removed, 1);
    assert_int_equal(st.incomplete, 4);
    assert_int_equal(entries(f->ev), 2); /* ...-ffff (kept) and the live call's */
    assert_int_equal(rx_evidence_dir_state_at(dfd, in_progress, &lock_fd), RX_EV_IN_PROGRESS);
    rx_evidence_abort(live);
    assert_int_equal(rx_evidence_prune(f->ws, time(NULL), 0, &st, &e), 0);
    assert_int_equal(st.removed, 1);
    assert_int_equal(entries(f->ev), 0);
    close(dfd);
    cJSON_Delete(meta);
}

/* A crashed call's directory (its writer gone: the lock with it) is removed by prune even
 * though the files were opened by rx_evidence_open; one still open stays. */
static void test_prune_after_writer_gone(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_evidence_prune_stats st;
    const char *run = "20200101T000000Z-feedfacefeedface";
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the writer: opens, writes a little, dies without commit or abort */
        rx_evidence *ev = NULL;
        close(pfd[0]);
        if (rx_evidence_open(&ev, f->ws, run, NULL, &e) != 0)
            _exit(1);
        rx_evidence_append(ev, 0, "half", 4);
        if (write(pfd[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause(); /* killed here */
    }
    close(pfd[1]);
    char c;
    assert_int_equal(read(pfd[0], &c, 1), 1);
    assert_int_equal(rx_evidence_prune(f->ws, time(NULL), 0, &st, &e), 0);
    assert_int_equal(entries(f->ev), 1); /* the writer lives: its directory stays */
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(pfd[0]);
    assert_int_equal(rx_evidence_prune(f->ws, time(NULL), 0, &st, &e), 0);
    assert_int_equal(st.removed, 0);
    assert_int_equal(st.incomplete, 1);
    assert_int_equal(entries(f->ev), 0);
}

/* The file helpers the evidence and audit code stand on. */
static void test_fsutil(void **state)
{
    fixture *f = *state;
    char p[PATH_MAX + 32], *data = NULL, *j;
    size_t len = 0;
    rexec_error e = {0};

    j = rx_fs_join("/a/b", "c");
    assert_string_equal(j, "/a/b/c");
    free(j);
    j = rx_fs_join("/a/b/", "/abs");
    assert_string_equal(j, "/abs");
    free(j);

    snprintf(p, sizeof(p), "%s/f", f->ws);
    FILE *fp = fopen(p, "w");
    fputs("0123456789", fp);
    fclose(fp);
    assert_int_equal(rx_fs_read_file(p, 10, &data, &len, REXEC_ECONFIG, &e), 0);
    assert_int_equal(len, 10);
    assert_string_equal(data, "0123456789");
    free(data);
    assert_int_equal(rx_fs_read_file(p, 9, &data, &len, REXEC_ECONFIG, &e), REXEC_ECONFIG);
    assert_contains(e.msg, "larger than 9 bytes");

    assert_int_equal(rx_fs_mkdir_private(p, REXEC_EAUDIT, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "not a directory");
    assert_int_equal(rx_fs_is_inside(p, f->ws), 1);
    assert_int_equal(rx_fs_is_inside(f->ws, p), 0);
    assert_int_equal(rx_fs_is_inside("/tmp", f->ws), 0);

    int fd = -1;
    snprintf(p, sizeof(p), "%s/new", f->ws);
    mode_t old = umask(0777);
    assert_int_equal(rx_fs_create_private(AT_FDCWD, p, &fd, REXEC_EAUDIT, &e), 0);
    umask(old);
    close(fd);
    assert_mode(p, 0600);
    assert_int_equal(rx_fs_create_private(AT_FDCWD, p, &fd, REXEC_EAUDIT, &e), REXEC_EAUDIT);
    assert_contains(e.msg, "File exists");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_ids_unique),
        cmocka_unit_test_setup_teardown(test_write_files_and_meta, setup, teardown),
        cmocka_unit_test_setup_teardown(test_existing_run_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_run_ids_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_refused_nothing_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinked_evidence_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spare_and_side_by_side_syncs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_final_name_at_open_and_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_syncs_no_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incomplete_skipped_and_pruned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_after_writer_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsutil, setup, teardown),
    };
    return cmocka_run_group_tests_name("evidence", tests, NULL, NULL);
}
