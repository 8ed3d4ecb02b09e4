/* The audit log after faults (issue 30): a head that cannot be written on the first append
 * never locks the log or makes it look tampered; a removed head still does; `audit recover`
 * closes the intents whose writer is gone with "abandoned" records, keeps those of a live
 * writer, and verify then reports them and exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "audit.h"
#include "fsutil.h"

typedef struct fixture {
    char ws[PATH_MAX];
    char dir[PATH_MAX + 8];  /* <ws>/audit */
    char head[PATH_MAX + 32];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    strcpy(f->ws, "/tmp/rx-audit-rec-XXXXXX");
    if (f == NULL || mkdtemp(f->ws) == NULL)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "%s/audit", f->ws);
    snprintf(f->head, sizeof(f->head), "%s/audit/head.json", f->ws);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    rx_test_rm_tree(f->ws);
    free(f);
    return 0;
}

static cJSON *mkrec(const char *run, const char *phase)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run_id", run);
    cJSON_AddStringToObject(o, "phase", phase);
    cJSON_AddStringToObject(o, "host", "lab1");
    cJSON_AddStringToObject(o, "action", "sys.uname");
    return o;
}

static rx_audit *open_log(fixture *f)
{
    rx_audit *a = NULL;
    rexec_error e = {0};
    if (rx_audit_open(&a, f->ws, NULL, &e) != 0)
        fail_msg("open: %s", e.msg);
    return a;
}

static int append_rc(rx_audit *a, cJSON *rec, rexec_error *e)
{
    int rc = rx_audit_append(a, rec, NULL, e);
    cJSON_Delete(rec);
    return rc;
}

static void append_ok(rx_audit *a, const char *run, const char *phase)
{
    rexec_error e = {0};
    if (append_rc(a, mkrec(run, phase), &e) != 0)
        fail_msg("append %s %s: %s", run, phase, e.msg);
}

/* verify's status, with the text report in *report (the caller frees it) when asked. */
static int verify(fixture *f, int flags, char **report)
{
    size_t len = 0;
    char *buf = NULL;
    FILE *m = open_memstream(&buf, &len);
    rexec_error e = {0};
    int r = rx_audit_verify_ex(f->ws, NULL, flags, NULL, m, &e);
    fclose(m);
    if (report != NULL)
        *report = buf;
    else
        free(buf);
    return r;
}

static int recover(fixture *f, int flags, rx_audit_recover_stats *st, char **report)
{
    size_t len = 0;
    char *buf = NULL;
    FILE *m = open_memstream(&buf, &len);
    rexec_error e = {0};
    int r = rx_audit_recover(f->ws, NULL, flags, st, m, &e);
    fclose(m);
    if (r < 0)
        fail_msg("recover: %s", e.msg);
    if (report != NULL)
        *report = buf;
    else
        free(buf);
    return r;
}

static long long head_seq(fixture *f)
{
    rx_audit_head h;
    rexec_error e = {0};
    assert_int_equal(rx_audit_head_load(f->dir, &h, &e), 0);
    assert_true(h.mac[0] != 0); /* there is a head */
    return h.seq;
}

static void assert_has(const char *hay, const char *needle)
{
    if (hay == NULL || strstr(hay, needle) == NULL)
        fail_msg("\"%s\" not in:\n%s", needle, hay ? hay : "(null)");
}

static size_t lines_of(const char *path)
{
    FILE *fp = fopen(path, "r");
    size_t n = 0;
    int c;
    if (fp == NULL)
        return 0;
    while ((c = fgetc(fp)) != EOF)
        n += c == '\n';
    fclose(fp);
    return n;
}

/* A directory where the head's temporary file goes makes every head write fail, like EMFILE or
 * a full disk would; a second link to head.json keeps the in-place update from using it. */
static void head_writes_fail(fixture *f, int on)
{
    char tmp[PATH_MAX + 40], link2[PATH_MAX + 40];
    snprintf(tmp, sizeof(tmp), "%s/.head.json.tmp", f->dir);
    snprintf(link2, sizeof(link2), "%s/head.link", f->dir);
    if (on) {
        assert_int_equal(mkdir(tmp, 0700), 0);
        if (access(f->head, F_OK) == 0)
            assert_int_equal(link(f->head, link2), 0);
    } else {
        assert_int_equal(rmdir(tmp), 0);
        unlink(link2);
    }
}

/* ---- the head on the first append --------------------------------------------------------- */

/* The head cannot be created before the first record: nothing is written, the call is
 * refused (it must not run without its record), and the next append, the fault gone, works. */
static void test_first_head_fails_nothing_written(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_audit *a = open_log(f);
    head_writes_fail(f, 1);
    assert_int_equal(append_rc(a, mkrec("r1", "intent"), &e), REXEC_EAUDIT);
    assert_has(e.msg, "cannot create the audit head before the first record (nothing was "
                      "written; the next call tries again)");
    char log[PATH_MAX + 32];
    snprintf(log, sizeof(log), "%s/audit.log", f->dir);
    assert_int_equal(lines_of(log), 0);
    assert_int_equal(verify(f, 0, NULL), RX_AUDIT_VERIFY_OK);
    head_writes_fail(f, 0);
    append_ok(a, "r1", "intent");
    append_ok(a, "r1", "outcome");
    rx_audit_close(a);
    assert_int_equal(head_seq(f), 2);
    assert_int_equal(verify(f, 0, NULL), RX_AUDIT_VERIFY_OK);
}

/* The first record is durable, then its head fails (the issue: EMFILE right there). The log
 * is not locked: another process appends, verify says intact, and the head catches up. */
static void test_first_head_behind_not_locked(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_audit_pending p;
    char *report = NULL;
    rx_audit *a = open_log(f);
    cJSON *rec = mkrec("r1", "intent");
    char *text = NULL;
    assert_int_equal(rx_audit_render(rec, NULL, &text, &e), 0);
    cJSON_Delete(rec);
    assert_int_equal(rx_audit_append_begin(a, &text, 1, &p, &e), 0); /* record 1 is durable */
    head_writes_fail(f, 1);
    assert_int_equal(rx_audit_append_end(a, &p, &e), REXEC_EAUDIT);   /* its head is not */
    free(text);
    rx_audit_close(a);
    head_writes_fail(f, 0);

    assert_int_equal(verify(f, 0, &report), RX_AUDIT_VERIFY_INCOMPLETE); /* r1 is open */
    assert_true(strstr(report, "head.json") == NULL && strstr(report, "TAMPERED") == NULL);
    free(report);
    assert_int_equal(head_seq(f), 0); /* the head of nothing, from before the record */
    a = open_log(f); /* another process: no memory of the failure */
    append_ok(a, "r1", "outcome");
    rx_audit_close(a);
    assert_int_equal(head_seq(f), 2);
    assert_int_equal(verify(f, 0, NULL), RX_AUDIT_VERIFY_OK);
}

/* Removing head.json from a log with numbered records is still caught (the head of nothing
 * exists from the first record on, so "missing" only comes from a removal). */
static void test_removed_head_still_refused(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    char *report = NULL;
    rx_audit *a = open_log(f);
    append_ok(a, "r1", "intent");
    append_ok(a, "r1", "outcome");
    assert_int_equal(unlink(f->head), 0);
    assert_int_equal(append_rc(a, mkrec("r2", "intent"), &e), REXEC_EAUDIT);
    assert_has(e.msg, "missing, but the log's last record is number 2");
    rx_audit_close(a);
    assert_int_equal(verify(f, 0, &report), RX_AUDIT_VERIFY_TAMPERED);
    assert_has(report, "head.json:1: missing");
    free(report);
}

/* ---- recover ------------------------------------------------------------------------------- */

/* A child writes an intent and dies without closing (a kill: its lock file stays, its lock is
 * gone); the parent's own intent belongs to a live writer. recover closes the child's only. */
static void test_recover_gone_and_live(void **state)
{
    fixture *f = *state;
    rx_audit_recover_stats st;
    char *report = NULL;
    rx_audit *a = open_log(f);
    append_ok(a, "live", "intent"); /* this process is the live writer */
    pid_t pid = fork();
    if (pid == 0) {
        rx_audit *c = open_log(f);
        append_ok(c, "dead", "intent");
        _exit(0); /* no close: as if killed */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(status, 0);
    assert_int_equal(verify(f, 0, NULL), RX_AUDIT_VERIFY_INCOMPLETE);

    assert_int_equal(recover(f, 0, &st, &report), RX_AUDIT_VERIFY_INCOMPLETE);
    assert_int_equal(st.abandoned, 1);
    assert_int_equal(st.kept, 1);
    assert_has(report, "run dead (writer ");
    assert_has(report, "): abandoned");
    assert_has(report, "run live (writer ");
    assert_has(report, "kept: its writer is still running");
    free(report);

    /* the abandoned record says what is known, and that whether it ran is not */
    rx_audit_open_intent *v = NULL;
    size_t n = 0;
    rexec_error e = {0};
    assert_int_equal(rx_audit_open_intents(f->ws, &v, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(cJSON_GetObjectItem(v[0].rec, "run_id")->valuestring, "live");
    rx_audit_open_intents_free(v, n);
    char log[PATH_MAX + 32], line[4096] = "";
    snprintf(log, sizeof(log), "%s/audit.log", f->dir);
    FILE *fp = fopen(log, "r");
    while (fgets(line, sizeof(line), fp) != NULL && strstr(line, "\"abandoned\"") == NULL)
        ;
    fclose(fp);
    assert_has(line, "\"run_id\":\"dead\",\"phase\":\"abandoned\",\"host\":\"lab1\"");
    assert_has(line, "\"intent_seq\":2,\"writer\":\"");
    assert_has(line, "\"executed\":null,\"reason\":\"WRITER_GONE\"");

    /* verify: the abandoned run is reported, not a problem; the live one is still open */
    assert_int_equal(verify(f, 0, &report), RX_AUDIT_VERIFY_INCOMPLETE);
    assert_has(report, "abandoned: run dead (intent at audit/audit.log:2)");
    free(report);
    append_ok(a, "live", "outcome");
    rx_audit_close(a); /* a clean close removes its lock file */
    assert_int_equal(verify(f, 0, &report), RX_AUDIT_VERIFY_OK);
    assert_has(report, "audit: ok: 1 file(s), 4 record(s), chain intact");
    assert_has(report, "1 intent(s) abandoned by `rexec audit recover`");
    free(report);
    assert_int_equal(verify(f, RX_AUDIT_VERIFY_JSON, &report), RX_AUDIT_VERIFY_OK);
    assert_has(report, "\"n_abandoned\":1");
    assert_has(report, "\"abandoned\":[{\"file\":\"audit/audit.log\",\"line\":3,\"run_id\":\"dead\"");
    free(report);

    /* a second recover has nothing to do; the dead writer's lock file was swept */
    assert_int_equal(recover(f, 0, &st, NULL), RX_AUDIT_VERIFY_OK);
    assert_int_equal(st.abandoned, 0);
    char wdir[PATH_MAX + 32];
    snprintf(wdir, sizeof(wdir), "%s/writers", f->dir);
    assert_int_equal(rmdir(wdir), 0); /* empty */
}

/* An intent that names no writer (written before writers were registered) is kept unless the
 * operator says no rexec of that time runs. */
static void test_recover_unregistered(void **state)
{
    fixture *f = *state;
    rx_audit_recover_stats st;
    char *report = NULL;
    rx_audit *a = open_log(f);
    cJSON *rec = mkrec("old", "intent");
    cJSON_AddNullToObject(rec, "writer"); /* stands for a line from an older rexec */
    rexec_error e = {0};
    assert_int_equal(append_rc(a, rec, &e), 0);
    rx_audit_close(a);
    assert_int_equal(recover(f, 0, &st, &report), RX_AUDIT_VERIFY_INCOMPLETE);
    assert_int_equal(st.kept, 1);
    assert_has(report, "kept: it names no writer (pass --include-unregistered");
    free(report);
    assert_int_equal(recover(f, RX_AUDIT_RECOVER_UNREGISTERED | RX_AUDIT_RECOVER_JSON, &st,
                             &report), RX_AUDIT_VERIFY_OK);
    assert_int_equal(st.abandoned, 1);
    assert_has(report, "{\"abandoned\":1,\"kept\":0,\"intents\":[{\"run_id\":\"old\"");
    assert_has(report, "\"result\":\"abandoned\"");
    free(report);
    assert_int_equal(verify(f, 0, NULL), RX_AUDIT_VERIFY_OK);
}

/* recover refuses a log that does not verify and writes nothing; an abandoned record without
 * an open intent is a finding of verify. */
static void test_recover_refuses_tampered(void **state)
{
    fixture *f = *state;
    rx_audit_recover_stats st;
    rexec_error e = {0};
    char *report = NULL;
    rx_audit *a = open_log(f);
    append_ok(a, "r1", "intent");
    append_ok(a, "r2", "abandoned"); /* no intent before it */
    rx_audit_close(a);
    assert_int_equal(verify(f, 0, &report), RX_AUDIT_VERIFY_TAMPERED);
    assert_has(report, "abandoned record of run r2 without an open intent before it");
    free(report);
    char log[PATH_MAX + 32];
    snprintf(log, sizeof(log), "%s/audit.log", f->dir);
    size_t before = lines_of(log);
    assert_int_equal(rx_audit_recover(f->ws, NULL, 0, &st, NULL, &e), RX_AUDIT_VERIFY_TAMPERED);
    assert_has(e.msg, "the log does not verify");
    assert_int_equal(lines_of(log), before);
}

/* verify without a descriptor left to read head.json with: an error (74), never "tampered".
 * In a child, every descriptor but two is taken: verify holds the lock and audit.log when it
 * reads the head. */
static void test_verify_out_of_fds_not_tampered(void **state)
{
    fixture *f = *state;
    rx_audit *a = open_log(f);
    append_ok(a, "r1", "intent");
    append_ok(a, "r1", "outcome");
    rx_audit_close(a);
    assert_int_equal(verify(f, 0, NULL), RX_AUDIT_VERIFY_OK);
    pid_t pid = fork();
    if (pid == 0) {
        int last = -1, fd;
        while ((fd = open("/dev/null", O_RDONLY)) >= 0)
            last = fd;
        close(last);
        close(last - 1);
        rexec_error e = {0};
        int r = rx_audit_verify_ex(f->ws, NULL, 0, NULL, NULL, &e);
        _exit(r == REXEC_EAUDIT && strstr(e.msg, strerror(EMFILE)) != NULL ? 0
              : r == RX_AUDIT_VERIFY_TAMPERED                              ? 1
                                                                           : 2);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_head_fails_nothing_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_head_behind_not_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removed_head_still_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_gone_and_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_unregistered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_refuses_tampered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_out_of_fds_not_tampered, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
