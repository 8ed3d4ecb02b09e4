/* The recorder (recorder.h): audit appends and evidence commits off the loop thread, with one
 * fsync shared by the records that wait together. */
#include "recorder.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

struct rx_recorder {
    uv_loop_t *loop;
    rx_audit *audit;
    uv_mutex_t append_mu; /* one appender at a time: the drain, or rx_recorder_append_now */
    uv_work_t work;
    int draining;         /* work is queued or running */
    int closing;          /* rx_recorder_close came while draining: free at its end */
    rx_record_job *head, *tail; /* waiting, in order */
    size_t queued;
    rx_record_job *batch; /* the drain's jobs (touched only by the drain until it reports) */
    unsigned long batch_appends; /* the drain's appends (written by the drain) */
    unsigned long appends, records;
};

int rx_recorder_new(rx_recorder **out, uv_loop_t *loop, rx_audit *a, rexec_error *err)
{
    rx_recorder *r = calloc(1, sizeof(*r));
    if (r == NULL || uv_mutex_init(&r->append_mu) != 0) {
        free(r);
        return rx_fail(err, REXEC_ENOMEM, "out of memory starting the audit writer");
    }
    r->loop = loop;
    r->audit = a;
    r->work.data = r;
    *out = r;
    return 0;
}

void rx_recorder_counts(const rx_recorder *r, unsigned long *appends, unsigned long *records)
{
    *appends = r->appends;
    *records = r->records;
}

static void job_fail(rx_record_job *j, int rc, const rexec_error *e)
{
    j->rc = rc;
    j->err = *e;
}

static void jobs_report(rx_record_job *jobs)
{
    while (jobs) {
        rx_record_job *next = jobs->next;
        jobs->next = NULL;
        jobs->done(jobs); /* may free the job (it is the caller's) */
        jobs = next;
    }
}

/* One append of n records; each of their jobs gets its outcome. Returns 1 (one append). */
static unsigned long append_flush(rx_recorder *r, char **texts, rx_record_job **jobs, size_t n)
{
    rexec_error e;
    uv_mutex_lock(&r->append_mu);
    int rc = rx_audit_append_texts(r->audit, texts, n, &e);
    uv_mutex_unlock(&r->append_mu);
    for (size_t i = 0; i < n; i++) {
        if (rc != 0)
            job_fail(jobs[i], rc, &e);
        free(jobs[i]->text);
        jobs[i]->text = NULL;
    }
    return 1;
}

/* The work of jobs (a list): every evidence commit in order, then every audit record, in
 * appends of up to RX_AUDIT_BATCH_MAX records. Returns the number of appends. */
static unsigned long jobs_run(rx_recorder *r, rx_record_job *jobs)
{
    char *texts[RX_AUDIT_BATCH_MAX];
    rx_record_job *with_text[RX_AUDIT_BATCH_MAX];
    size_t n = 0;
    unsigned long appends = 0;

    for (rx_record_job *j = jobs; j; j = j->next)
        if (j->ev) {
            rx_evidence *ev = j->ev;
            j->ev = NULL; /* freed by the commit, whatever its outcome */
            j->rc = rx_evidence_commit(ev, j->ev_meta, j->ev_sha, &j->ev_path, &j->err);
        }
    for (rx_record_job *j = jobs; j; j = j->next) {
        if (!j->text)
            continue;
        texts[n] = j->text;
        with_text[n++] = j;
        if (n == RX_AUDIT_BATCH_MAX) {
            appends += append_flush(r, texts, with_text, n);
            n = 0;
        }
    }
    if (n > 0)
        appends += append_flush(r, texts, with_text, n);
    return appends;
}

static unsigned long jobs_texts(const rx_record_job *jobs)
{
    unsigned long n = 0;
    for (; jobs; jobs = jobs->next)
        n += jobs->text != NULL;
    return n;
}

/* Runs jobs here and now, and reports them. */
static void jobs_inline(rx_recorder *r, rx_record_job *jobs)
{
    r->records += jobs_texts(jobs);
    r->appends += jobs_run(r, jobs);
    jobs_report(jobs);
}

static void on_drain(uv_work_t *w)
{
    rx_recorder *r = w->data;
    r->batch_appends = jobs_run(r, r->batch);
}

static void drain_start(rx_recorder *r);

static void free_recorder(rx_recorder *r)
{
    rx_audit_close(r->audit);
    uv_mutex_destroy(&r->append_mu);
    free(r);
}

static void on_drained(uv_work_t *w, int status)
{
    rx_recorder *r = w->data;
    rx_record_job *jobs = r->batch;
    (void)status; /* a queued work cannot be cancelled here: nobody calls uv_cancel on it */
    r->batch = NULL;
    r->appends += r->batch_appends;
    /* Still "draining" while the callbacks run: what they submit queues behind, and a close
     * they cause is deferred to here, after the last of them. */
    jobs_report(jobs);
    r->draining = 0;
    drain_start(r);
    if (r->closing && !r->draining)
        free_recorder(r);
}

/* Hands the waiting jobs to the thread pool, unless a drain is already out. */
static void drain_start(rx_recorder *r)
{
    if (r->draining || r->head == NULL)
        return;
    r->batch = r->head;
    r->head = r->tail = NULL;
    r->queued = 0;
    r->records += jobs_texts(r->batch); /* counted here: the drain must not touch the jobs' text */
    r->draining = 1;
    if (uv_queue_work(r->loop, &r->work, on_drain, on_drained) != 0) {
        r->draining = 0; /* cannot happen with a valid loop; do the work here rather than lose it */
        rx_record_job *jobs = r->batch;
        r->batch = NULL;
        r->records -= jobs_texts(jobs);
        jobs_inline(r, jobs);
    }
}

void rx_recorder_submit(rx_recorder *r, rx_record_job *job)
{
    job->rc = 0;
    job->ev_path = NULL;
    job->next = NULL;
    if (r->queued >= RX_RECORDER_MAX_JOBS) { /* the disk is behind: wait for it here */
        jobs_inline(r, job);
        return;
    }
    if (r->tail)
        r->tail->next = job;
    else
        r->head = job;
    r->tail = job;
    r->queued++;
    drain_start(r);
}

int rx_recorder_append_now(rx_recorder *r, char *text, rexec_error *err)
{
    uv_mutex_lock(&r->append_mu);
    int rc = rx_audit_append_texts(r->audit, &text, 1, err);
    uv_mutex_unlock(&r->append_mu);
    free(text);
    r->appends++;
    r->records++;
    return rc;
}

void rx_recorder_close(rx_recorder *r)
{
    if (r == NULL)
        return;
    if (r->draining) {
        r->closing = 1;
        return;
    }
    free_recorder(r);
}
