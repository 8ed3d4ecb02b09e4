/* The recorder (recorder.h): audit appends and evidence commits off the loop thread, with one
 * fsync shared by the records that wait together. */
#include "recorder.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "metrics.h"

struct rx_recorder {
    uv_loop_t *loop;
    rx_audit *audit;
    /* One user of the audit log at a time (the drain, the head's work, rx_recorder_append_now),
     * and it guards pending: an append whose records are durable and reported, whose head is
     * not written yet and which still holds the log's lock. Whoever takes the mutex next
     * finishes it first (audit_settle), so the head is never skipped and the lock never
     * outlives the next append. */
    uv_mutex_t append_mu;
    rx_audit_pending pending;
    uv_work_t work, head_work;
    int draining;         /* work is queued or running */
    int head_out;         /* head_work is queued or running */
    int head_again;       /* head_work to be queued again once it is back */
    int closing;          /* rx_recorder_close came while work was out: free at its end */
    rx_record_job *head, *tail; /* waiting, in order */
    size_t queued;
    rx_record_job *batch; /* the drain's jobs (touched only by the drain until it reports) */
    unsigned long batch_appends; /* the drain's appends (written by the drain) */
    /* counts: atomic, as rx_recorder_append_now may run on a thread of the pool (a call's gate,
     * call.c) while the loop counts a drain */
    _Atomic unsigned long appends, records;
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
    r->pending.lock_fd = -1;
    r->work.data = r;
    r->head_work.data = r;
    *out = r;
    return 0;
}

void rx_recorder_counts(const rx_recorder *r, unsigned long *appends, unsigned long *records)
{
    *appends = r->appends;
    *records = r->records;
}

size_t rx_recorder_queued(const rx_recorder *r)
{
    return r ? r->queued : 0;
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

/* The pending append's head, written now, and the log's lock let go; returns the head's file
 * to sync (or -1), which the caller syncs, or closes when a newer head follows: a later head's
 * fdatasync makes the same page durable. Under append_mu. */
static int audit_settle_write(rx_recorder *r)
{
    rexec_error e;
    int fd = -1;
    if (r->pending.lock_fd >= 0)
        (void)rx_audit_append_end_write(r->audit, &r->pending, &fd, &e); /* a failure: the next
                                                                           * append retries */
    return fd;
}

/* The head's fdatasync, outside append_mu when the caller let go of it: the next append does
 * not wait for the disk's flush (docs/audit.md, "The head"). A failure marks the head behind,
 * under the mutex, like an append. */
static void head_sync(rx_recorder *r, int fd, int locked)
{
    rexec_error e;
    if (fd < 0 || rx_audit_append_sync(r->audit, fd, &e) == 0)
        return;
    if (!locked)
        uv_mutex_lock(&r->append_mu);
    rx_audit_head_is_behind(r->audit);
    if (!locked)
        uv_mutex_unlock(&r->append_mu);
}

/* The pending append's head, written and synced now. Under append_mu. */
static void audit_settle(rx_recorder *r)
{
    head_sync(r, audit_settle_write(r), 1);
}

/* One append of n records; each of their jobs gets its outcome. The head is left pending:
 * written by the next append of this drain, or after the jobs are reported. Returns 1. */
static unsigned long append_flush(rx_recorder *r, char **texts, rx_record_job **jobs, size_t n)
{
    rexec_error e;
    uv_mutex_lock(&r->append_mu);
    /* An earlier append's head still pending (its work has not run yet): written, not synced,
     * as this append's head follows and its sync covers the same page; synced only if this
     * append fails (then no head follows). */
    int stale = audit_settle_write(r);
    uint64_t t0 = uv_hrtime();
    int rc = rx_audit_append_begin(r->audit, texts, n, &r->pending, &e);
    rx_metrics_observe_audit_write((uv_hrtime() - t0) / 1000);
    if (rc != 0)
        head_sync(r, stale, 1);
    else if (stale >= 0)
        close(stale);
    uv_mutex_unlock(&r->append_mu);
    for (size_t i = 0; i < n; i++) {
        if (rc != 0)
            job_fail(jobs[i], rc, &e);
        free(jobs[i]->text);
        jobs[i]->text = NULL;
    }
    return 1;
}

static void ev_commit_one(rx_record_job *j)
{
    rx_evidence *ev = j->ev;
    j->ev = NULL; /* freed by the commit, whatever its outcome */
    uint64_t t0 = uv_hrtime();
    j->ev_rc = rx_evidence_commit(ev, j->ev_meta, j->ev_sha, &j->ev_path, &j->ev_err);
    rx_metrics_observe_evidence_write((uv_hrtime() - t0) / 1000);
    if (j->ev_rc != 0) { /* the record names evidence that is not there: not appended */
        free(j->text);
        j->text = NULL;
    }
}

/* The evidence commits of one drain, side by side on up to REC_EV_THREADS threads. A commit
 * is a few fsyncs (its files, its directory, the parent after the rename); on a file system
 * without a journal each is a device flush of its own, about 2 ms here, and one after another
 * the commits of a 1,000-host fan-out took 5-10 s of the drain (docs/PERFORMANCE.md, issue 34).
 * The device takes flushes side by side. The commits are independent (each its own directory);
 * the drain's audit records are appended only after all of them, as before. */
#define REC_EV_THREADS 16

typedef struct ev_batch {
    rx_record_job **jobs;
    size_t n;
    _Atomic size_t next;
} ev_batch;

static void *ev_worker(void *arg)
{
    ev_batch *b = arg;
    size_t i;
    while ((i = atomic_fetch_add(&b->next, 1)) < b->n)
        ev_commit_one(b->jobs[i]);
    return NULL;
}

static void ev_commit_all(rx_record_job *jobs)
{
    size_t n = 0, k = 0;
    for (rx_record_job *j = jobs; j; j = j->next)
        n += j->ev != NULL;
    rx_record_job **a = n > 1 ? malloc(n * sizeof(*a)) : NULL;
    if (a == NULL) { /* one commit, or no memory for the list: here, in order */
        for (rx_record_job *j = jobs; j; j = j->next)
            if (j->ev)
                ev_commit_one(j);
        return;
    }
    for (rx_record_job *j = jobs; j; j = j->next)
        if (j->ev)
            a[k++] = j;
    ev_batch b = {a, n, 0};
    pthread_t t[REC_EV_THREADS - 1];
    size_t want = n < REC_EV_THREADS ? n - 1 : REC_EV_THREADS - 1, nt = 0;
    while (nt < want && pthread_create(&t[nt], NULL, ev_worker, &b) == 0)
        nt++; /* fewer threads (none) when they cannot be made: this one does the rest */
    ev_worker(&b);
    for (size_t i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    free(a);
}

/* The work of jobs (a list): every evidence commit, then every audit record in order, in
 * appends of up to RX_AUDIT_BATCH_MAX records. Returns the number of appends. */
static unsigned long jobs_run(rx_recorder *r, rx_record_job *jobs)
{
    char *texts[RX_AUDIT_BATCH_MAX];
    rx_record_job *with_text[RX_AUDIT_BATCH_MAX];
    size_t n = 0, left = 0;
    unsigned long appends = 0;

    ev_commit_all(jobs);
    for (rx_record_job *j = jobs; j; j = j->next)
        left += j->text != NULL;
    for (rx_record_job *j = jobs; j; j = j->next) {
        if (!j->text)
            continue;
        texts[n] = j->text;
        with_text[n++] = j;
        left--;
        if (n == RX_AUDIT_BATCH_MAX || left == 0) {
            appends += append_flush(r, texts, with_text, n);
            n = 0;
        }
    }
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
    uv_mutex_lock(&r->append_mu);
    audit_settle(r);
    uv_mutex_unlock(&r->append_mu);
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
    audit_settle(r); /* no thread is out: no lock needed */
    rx_evidence_spare_drop();
    rx_audit_close(r->audit);
    uv_mutex_destroy(&r->append_mu);
    free(r);
}

/* After a drain's jobs are reported: the head of its last append, then a spare evidence
 * directory for the next call (evidence.c), both off the calls' path. */
static void on_head(uv_work_t *w)
{
    rx_recorder *r = w->data;
    uv_mutex_lock(&r->append_mu);
    int fd = audit_settle_write(r);
    uv_mutex_unlock(&r->append_mu);
    head_sync(r, fd, 0); /* the next append need not wait for this flush */
    rx_evidence_spare_fill();
}

static void head_start(rx_recorder *r);

static void on_head_done(uv_work_t *w, int status)
{
    rx_recorder *r = w->data;
    (void)status;
    r->head_out = 0;
    if (r->head_again) /* a drain ended while this work was out: its head may still wait */
        head_start(r);
    if (r->closing && !r->draining && !r->head_out)
        free_recorder(r);
}

/* The head of the drain's last append is written after its jobs are reported: by this work,
 * or by the next append if that takes the mutex first. */
static void head_start(rx_recorder *r)
{
    if (r->head_out) {
        r->head_again = 1; /* it may have passed its turn already: another one after it */
        return;
    }
    r->head_again = 0;
    r->head_out = 1;
    if (uv_queue_work(r->loop, &r->head_work, on_head, on_head_done) != 0) {
        on_head(&r->head_work); /* cannot happen with a valid loop */
        r->head_out = 0;
    }
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
    head_start(r);
    r->draining = 0;
    drain_start(r);
    if (r->closing && !r->draining && !r->head_out)
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
    job->rc = job->ev_rc = 0;
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
    audit_settle(r);
    uint64_t t0 = uv_hrtime();
    int rc = rx_audit_append_texts(r->audit, &text, 1, err);
    rx_metrics_observe_audit_write((uv_hrtime() - t0) / 1000);
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
    if (r->draining || r->head_out) {
        r->closing = 1;
        return;
    }
    free_recorder(r);
}
