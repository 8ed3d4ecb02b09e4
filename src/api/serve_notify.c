/* approvals.notify (serve_notify.h): one job per notification, each with four handles (the
 * process, its stdin and stdout pipes, its timer), freed when the last has closed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "serve_notify.h"

typedef struct notify_job notify_job;

struct rx_notifier {
    uv_loop_t *loop;
    notify_job *jobs;
    unsigned running;
    unsigned long failures;
    int closing;
    void (*on_closed)(void *ud);
    void *closed_ud;
};

struct notify_job {
    rx_notifier *n;
    notify_job *next;
    uv_process_t proc;
    uv_pipe_t in, out;
    uv_timer_t timer;
    uv_write_t w;
    uv_shutdown_t shut;
    char *text;
    char about[64];
    char buf[16384]; /* stdout is read into this and dropped */
    size_t out_bytes;
    int handles, exited, failed, killed;
    double timeout_s;
};

static void notify_maybe_closed(rx_notifier *n)
{
    if (!n->closing || n->jobs != NULL)
        return;
    void (*cb)(void *) = n->on_closed;
    void *ud = n->closed_ud;
    free(n);
    if (cb)
        cb(ud);
}

static void job_fail(notify_job *j, const char *fmt, const char *what)
{
    if (j->failed)
        return;
    j->failed = 1;
    j->n->failures++;
    rx_metrics_count_notify_failure(); /* rexec_notify_failures_total (docs/metrics.md) */
    fprintf(stderr, "rexec serve: approvals.notify for %s: ", j->about);
    fprintf(stderr, fmt, what);
    fprintf(stderr, " (the call is not affected; %lu notification(s) failed so far)\n",
            j->n->failures);
}

static void on_job_handle_closed(uv_handle_t *h)
{
    notify_job *j = h->data;
    if (--j->handles > 0)
        return;
    rx_notifier *n = j->n;
    for (notify_job **pp = &n->jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    n->running--;
    free(j->text);
    free(j);
    notify_maybe_closed(n);
}

static void job_close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, on_job_handle_closed);
}

/* The process is gone and its stdout is closed (or given up on): the job ends. */
static void job_end(notify_job *j)
{
    job_close_handle((uv_handle_t *)&j->timer);
    job_close_handle((uv_handle_t *)&j->in);
    job_close_handle((uv_handle_t *)&j->out);
    job_close_handle((uv_handle_t *)&j->proc);
}

static void job_kill(notify_job *j, const char *why)
{
    if (!j->exited && !j->killed) {
        j->killed = 1;
        uv_process_kill(&j->proc, SIGKILL);
        job_fail(j, "%s: killed", why);
    }
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    notify_job *j = p->data;
    char why[64];
    j->exited = 1;
    if (sig != 0 && !j->killed) {
        snprintf(why, sizeof(why), "%d", sig);
        job_fail(j, "the program died of signal %s", why);
    } else if (status != 0 && !j->killed) {
        snprintf(why, sizeof(why), "%lld", (long long)status);
        job_fail(j, "the program exited %s", why);
    }
    job_end(j); /* its stdout may hold more: it is thrown away anyway */
}

static void on_timeout(uv_timer_t *t)
{
    notify_job *j = t->data;
    char why[64];
    snprintf(why, sizeof(why), "no exit within %.10g s", j->timeout_s);
    job_kill(j, why);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    notify_job *j = h->data;
    (void)suggested;
    *b = uv_buf_init(j->buf, sizeof(j->buf));
}

/* Read and dropped; past the cap the program is stopped: it writes to no one. */
static void on_out(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    notify_job *j = s->data;
    (void)b;
    if (nread > 0 && (j->out_bytes += (size_t)nread) > RX_NOTIFY_OUT_MAX) {
        uv_read_stop(s);
        job_kill(j, "more than 1 MiB on stdout");
    } else if (nread < 0) {
        uv_read_stop(s);
    }
}

static void on_shutdown(uv_shutdown_t *r, int status)
{
    (void)r;
    (void)status; /* a program that does not read its stdin is not a failure */
}

static void on_written(uv_write_t *w, int status)
{
    notify_job *j = w->data;
    if (status == 0 && !uv_is_closing((uv_handle_t *)&j->in)) {
        j->shut.data = j;
        uv_shutdown(&j->shut, (uv_stream_t *)&j->in, on_shutdown);
    }
}

static int job_spawn(notify_job *j, char *const argv[])
{
    static char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL, NULL};
    static char home[512];
    const char *h = getenv("HOME");
    if (h != NULL && env[1] == NULL && strlen(h) < sizeof(home) - 6) {
        snprintf(home, sizeof(home), "HOME=%s", h);
        env[1] = home;
    }
    uv_stdio_container_t io[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&j->in},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&j->out},
        {.flags = UV_IGNORE}};
    uv_process_options_t o = {.exit_cb = on_exit_cb, .file = argv[0], .args = (char **)argv,
                              .env = env, .cwd = "/", .stdio = io, .stdio_count = 3};
    return uv_spawn(j->n->loop, &j->proc, &o);
}

void rx_notify_start(rx_notifier *n, char *const argv[], double timeout_s, const char *json,
                     const char *about)
{
    notify_job *j;
    int r = 0;
    if (n == NULL || n->closing || argv == NULL || argv[0] == NULL)
        return;
    if (n->running >= RX_NOTIFY_RUNNING || (j = calloc(1, sizeof(*j))) == NULL) {
        n->failures++;
        rx_metrics_count_notify_failure();
        fprintf(stderr, "rexec serve: approvals.notify for %s: not started (%s; %lu "
                "notification(s) failed so far)\n", about, n->running >= RX_NOTIFY_RUNNING ?
                "16 still run" : "out of memory", n->failures);
        return;
    }
    j->n = n;
    j->timeout_s = timeout_s;
    snprintf(j->about, sizeof(j->about), "%s", about);
    j->text = malloc(strlen(json) + 2);
    uv_pipe_init(n->loop, &j->in, 0);
    uv_pipe_init(n->loop, &j->out, 0);
    uv_timer_init(n->loop, &j->timer);
    j->in.data = j->out.data = j->timer.data = j->proc.data = j->w.data = j;
    j->handles = 4;
    j->next = n->jobs;
    n->jobs = j;
    n->running++;
    if (j->text == NULL || (r = job_spawn(j, argv)) != 0) {
        j->exited = 1;
        job_fail(j, "cannot start it: %s", j->text ? uv_strerror(r) : "out of memory");
        /* uv_spawn failed: the process handle was not started, but it is closable */
        job_end(j);
        return;
    }
    sprintf(j->text, "%s\n", json);
    uv_buf_t b = uv_buf_init(j->text, (unsigned)strlen(j->text));
    uv_write(&j->w, (uv_stream_t *)&j->in, &b, 1, on_written);
    uv_read_start((uv_stream_t *)&j->out, on_alloc, on_out);
    uv_timer_start(&j->timer, on_timeout, (uint64_t)(timeout_s * 1000), 0);
}

rx_notifier *rx_notifier_new(uv_loop_t *loop)
{
    rx_notifier *n = calloc(1, sizeof(*n));
    if (n != NULL)
        n->loop = loop;
    return n;
}

unsigned long rx_notifier_failures(const rx_notifier *n)
{
    return n ? n->failures : 0;
}

void rx_notifier_close(rx_notifier *n, void (*on_closed)(void *ud), void *ud)
{
    n->closing = 1;
    n->on_closed = on_closed;
    n->closed_ud = ud;
    for (notify_job *j = n->jobs; j; j = j->next) {
        if (!j->exited && !j->killed) {
            j->killed = 1;
            uv_process_kill(&j->proc, SIGKILL);
        }
        job_end(j);
    }
    notify_maybe_closed(n);
}
