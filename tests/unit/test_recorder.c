/* The recorder (src/api/recorder.c) on a real loop and a real audit log: jobs are done in their
 * order, records waiting together share one append (group commit), every done callback runs on
 * the loop thread after the work, a full queue is worked off inline, a failed append fails
 * every record it carried, evidence and its record go in one job (the record only if the
 * evidence is in place), and the head is written after the report without keeping the lock. */
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "audit.h"
#include "evidence.h"
#include "recorder.h"
#include "redact.h"

#define NJOBS 20

typedef struct fixture {
    char ws[64];
    uv_loop_t loop;
    rx_recorder *rec;
    pthread_t loop_thread;
    int order[RX_RECORDER_MAX_JOBS + 8];
    size_t n_done;
    int off_thread; /* a done callback ran on another thread */
} fixture;

typedef struct tjob {
    rx_record_job job;
    fixture *f;
    int id;
} tjob;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    rexec_error e = {0};
    rx_audit *a = NULL;
    strcpy(f->ws, "/tmp/rx-recorder-XXXXXX");
    if (mkdtemp(f->ws) == NULL || uv_loop_init(&f->loop) != 0)
        return -1;
    if (rx_audit_open(&a, f->ws, NULL, &e) != 0 || rx_recorder_new(&f->rec, &f->loop, a, &e) != 0)
        return -1;
    f->loop_thread = pthread_self();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    rx_recorder_close(f->rec);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_loop_close(&f->loop);
    rx_test_rm_tree(f->ws);
    free(f);
    return 0;
}

static void on_done(rx_record_job *j)
{
    tjob *t = (tjob *)j;
    fixture *f = t->f;
    if (!pthread_equal(pthread_self(), f->loop_thread))
        f->off_thread = 1;
    f->order[f->n_done++] = j->rc == 0 ? t->id : -t->id;
}

static char *text_of(const char *run)
{
    rexec_error e = {0};
    char *text = NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run_id", run);
    cJSON_AddStringToObject(o, "phase", "intent");
    assert_int_equal(rx_audit_render(o, NULL, &text, &e), 0);
    cJSON_Delete(o);
    return text;
}

static void submit_text(fixture *f, tjob *t, int id)
{
    char run[32];
    snprintf(run, sizeof(run), "run-%d", id);
    memset(t, 0, sizeof(*t));
    t->f = f;
    t->id = id;
    t->job.text = text_of(run);
    t->job.done = on_done;
    rx_recorder_submit(f->rec, &t->job);
}

static size_t log_lines(const fixture *f)
{
    char path[PATH_MAX], buf[4096];
    size_t n = 0, k;
    snprintf(path, sizeof(path), "%s/audit/audit.log", f->ws);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return 0;
    while ((k = fread(buf, 1, sizeof(buf), fp)) > 0)
        for (size_t i = 0; i < k; i++)
            n += buf[i] == '\n';
    fclose(fp);
    return n;
}

static int verify(const fixture *f)
{
    char *report = NULL;
    size_t sz = 0;
    rexec_error e = {0};
    FILE *out = open_memstream(&report, &sz);
    int rc = rx_audit_verify(f->ws, NULL, out, &e);
    fclose(out);
    free(report);
    return rc;
}

/* 20 records submitted at once: reported in order, on the loop, after they are in the log; the
 * first goes out alone (the drain starts at once), the 19 that waited behind it in one append. */
static void test_order_and_group_commit(void **state)
{
    fixture *f = *state;
    tjob t[NJOBS];
    unsigned long appends, records;
    for (int i = 0; i < NJOBS; i++)
        submit_text(f, &t[i], i + 1);
    assert_int_equal(f->n_done, 0); /* nothing is reported from inside submit */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->n_done, NJOBS);
    for (int i = 0; i < NJOBS; i++)
        assert_int_equal(f->order[i], i + 1);
    assert_false(f->off_thread);
    assert_int_equal(log_lines(f), NJOBS);
    rx_recorder_counts(f->rec, &appends, &records);
    assert_int_equal(records, NJOBS);
    assert_int_equal(appends, 2);
    assert_int_equal(verify(f), RX_AUDIT_VERIFY_INCOMPLETE); /* whole, with intents only */
}

/* Evidence is committed (files in place, path handed back) before the record behind it. */
static void test_evidence_job(void **state)
{
    fixture *f = *state;
    rexec_error e = {0};
    rx_evidence *ev = NULL;
    char run[RX_RUN_ID_LEN], path[PATH_MAX + 64];
    struct stat st;
    tjob t;
    rx_run_id_new(run);
    assert_int_equal(rx_evidence_open(&ev, f->ws, run, NULL, &e), 0);
    rx_evidence_append(ev, 0, "hello\n", 6);
    memset(&t, 0, sizeof(t));
    t.f = f;
    t.id = 7;
    t.job.ev = ev;
    t.job.ev_meta = cJSON_CreateObject();
    t.job.ev_sha[0] = t.job.ev_sha[1] = "";
    t.job.done = on_done;
    rx_recorder_submit(f->rec, &t.job);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->n_done, 1);
    assert_int_equal(f->order[0], 7);
    assert_non_null(t.job.ev_path);
    snprintf(path, sizeof(path), "%s/stdout", t.job.ev_path);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 6);
    free(t.job.ev_path);
    cJSON_Delete(t.job.ev_meta);
}

/* Evidence and the record behind it in one job: the record is appended once the evidence is in
 * place; when the evidence cannot be committed, the record is not appended (it would name
 * evidence that is not there) and the job says why. */
static void evidence_and_text(fixture *f, tjob *t, const char *run, rx_evidence **evp,
                              const rx_redactor *red)
{
    rexec_error e = {0};
    assert_int_equal(rx_evidence_open(evp, f->ws, run, red, &e), 0);
    rx_evidence_append(*evp, 0, "out\n", 4);
    memset(t, 0, sizeof(*t));
    t->f = f;
    t->id = 9;
    t->job.ev = *evp;
    t->job.ev_meta = cJSON_CreateObject();
    t->job.ev_sha[0] = t->job.ev_sha[1] = "";
    t->job.text = text_of(run);
    t->job.done = on_done;
}

static void test_evidence_with_record(void **state)
{
    fixture *f = *state;
    rx_evidence *ev;
    char run[RX_RUN_ID_LEN];
    tjob t;
    rx_run_id_new(run);
    rx_evidence_counts c0, c1;
    evidence_and_text(f, &t, run, &ev, NULL);
    rx_evidence_counts_get(&c0);
    rx_recorder_submit(f->rec, &t.job);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    rx_evidence_counts_get(&c1);
    /* the commit synced no directory: the name was made durable since the open */
    assert_int_equal(c1.dirs_at_commit - c0.dirs_at_commit, 0);
    assert_int_equal(c1.parents_at_commit - c0.parents_at_commit, 0);
    assert_int_equal(f->n_done, 1);
    assert_int_equal(t.job.ev_rc, 0);
    assert_int_equal(t.job.rc, 0);
    assert_non_null(t.job.ev_path);
    assert_int_equal(log_lines(f), 1);
    free(t.job.ev_path);
    cJSON_Delete(t.job.ev_meta);
}

static void test_evidence_failure_drops_record(void **state)
{
    fixture *f = *state;
    rx_evidence *ev;
    char run[RX_RUN_ID_LEN], final[PATH_MAX];
    struct stat st;
    tjob t;
    rx_redactor *red = NULL;
    rexec_error e = {0};
    static const char secret[] = "s3cr3t-T0KEN-value-42";
    rx_secret sec = {"T", (const unsigned char *)secret, sizeof(secret) - 1};
    assert_int_equal(rx_redactor_new(&red, &sec, 1, &e), 0);
    rx_run_id_new(run);
    evidence_and_text(f, &t, run, &ev, red);
    rx_evidence_append(ev, 0, secret, sizeof(secret) - 1); /* the commit refuses it */
    snprintf(final, sizeof(final), "%s/evidence/%s", f->ws, run);
    assert_int_equal(stat(final, &st), 0); /* under its final name from the open on */
    rx_recorder_submit(f->rec, &t.job);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->n_done, 1);
    assert_int_equal(t.job.ev_rc, REXEC_EAUDIT);
    assert_non_null(strstr(t.job.ev_err.msg, "still holds a secret"));
    assert_null(t.job.ev_path);
    assert_int_equal(log_lines(f), 0);
    assert_int_equal(stat(final, &st), -1); /* the failed commit removed it */
    cJSON_Delete(t.job.ev_meta);
    rx_redactor_free(red);
}

/* The head is written after the records are reported, by a work of its own: once the loop has
 * nothing left, head.json names the last record, is one sector long, and the log's lock is free
 * (another process can append). */
static void test_head_after_report(void **state)
{
    fixture *f = *state;
    char path[PATH_MAX];
    rx_audit_head h;
    rexec_error e = {0};
    struct stat st;
    tjob t[3];
    for (int i = 0; i < 3; i++)
        submit_text(f, &t[i], i + 1);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->n_done, 3);
    snprintf(path, sizeof(path), "%s/audit", f->ws);
    assert_int_equal(rx_audit_head_load(path, &h, &e), 0);
    assert_int_equal(h.seq, 3);
    snprintf(path, sizeof(path), "%s/audit/head.json", f->ws);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, RX_AUDIT_HEAD_SIZE);
    snprintf(path, sizeof(path), "%s/audit/.lock", f->ws);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    close(fd);
    assert_int_equal(verify(f), RX_AUDIT_VERIFY_INCOMPLETE);
}

/* A chain of appends, each submitted from the previous one's done callback (a client that asks
 * again as soon as it is answered): each drain races the previous drain's head work for the
 * log, and whichever comes first, the head ends at the last record, the lock is free and the
 * log verifies (a head written but not yet synced is covered by the next head's sync). */
typedef struct chain {
    tjob t[8];
    int next;
} chain;

static chain the_chain;

static void on_chain_done(rx_record_job *j)
{
    tjob *t = (tjob *)j;
    on_done(j);
    if (the_chain.next < 8) {
        int k = the_chain.next++;
        submit_text(t->f, &the_chain.t[k], k + 1);
        the_chain.t[k].job.done = on_chain_done;
    }
}

static void test_chained_appends_heads(void **state)
{
    fixture *f = *state;
    char path[PATH_MAX];
    rx_audit_head h;
    rexec_error e = {0};
    memset(&the_chain, 0, sizeof(the_chain));
    the_chain.next = 1;
    submit_text(f, &the_chain.t[0], 1);
    the_chain.t[0].job.done = on_chain_done;
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->n_done, 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(f->order[i], i + 1);
    assert_int_equal(log_lines(f), 8);
    snprintf(path, sizeof(path), "%s/audit", f->ws);
    assert_int_equal(rx_audit_head_load(path, &h, &e), 0);
    assert_int_equal(h.seq, 8);
    snprintf(path, sizeof(path), "%s/audit/.lock", f->ws);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    close(fd);
    assert_int_equal(verify(f), RX_AUDIT_VERIFY_INCOMPLETE);
}

/* Past RX_RECORDER_MAX_JOBS waiting, a job is done inline: reported before submit returns. */
static void test_full_queue_inline(void **state)
{
    fixture *f = *state;
    size_t n = RX_RECORDER_MAX_JOBS + 2;
    tjob *t = calloc(n, sizeof(*t));
    for (size_t i = 0; i + 1 < n; i++) /* the first drains; MAX wait behind it */
        submit_text(f, &t[i], (int)i + 1);
    assert_int_equal(f->n_done, 0);
    submit_text(f, &t[n - 1], (int)n);
    assert_int_equal(f->n_done, 1);
    assert_int_equal(f->order[0], (int)n);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->n_done, n);
    assert_int_equal(log_lines(f), n);
    assert_int_equal(verify(f), RX_AUDIT_VERIFY_INCOMPLETE);
    free(t);
}

/* A head that no longer matches the log refuses the append: every record of it fails, none is
 * written. */
static void test_failed_append_fails_all(void **state)
{
    fixture *f = *state;
    char path[PATH_MAX];
    tjob t[3];
    submit_text(f, &t[0], 1);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    snprintf(path, sizeof(path), "%s/audit/head.json", f->ws);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("{\"seq\":9,\"hash\":\"00\"}\n", fp);
    fclose(fp);
    submit_text(f, &t[1], 2);
    submit_text(f, &t[2], 3);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->n_done, 3);
    assert_int_equal(f->order[1], -2);
    assert_int_equal(f->order[2], -3);
    assert_int_equal(t[2].job.rc, REXEC_EAUDIT);
    assert_non_null(strstr(t[2].job.err.msg, "head"));
    assert_int_equal(log_lines(f), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_order_and_group_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evidence_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evidence_with_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evidence_failure_drops_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_after_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chained_appends_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_queue_inline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_append_fails_all, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
