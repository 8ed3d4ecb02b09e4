/* Warm sessions by host, channel budgets, queueing and safe retries (see pool.h). */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "err.h"
#include "jump.h"
#include "pool.h"
#include "runner.h"
#include "session.h"

#define POOL_MAX_CONNS 8
#define POOL_MAX_CONNECT_RETRIES 8 /* MaxStartups drops: see backoff_ms (about 15 s in all) */
#define POOL_MAX_SETUP_RETRIES 2   /* a call whose channel set-up failed before it sent anything */
#define POOL_RUNNER_IDLE_S 30.0    /* an idle runner closes after this long, unless opts say */
#define POOL_RUNNER_MAX_STDIN (1u << 20) /* larger stdin streams on a channel of its own */

typedef struct pool_conn {
    rx_session *s;
    int budget; /* channels this connection takes; lowered when sshd refuses one */
} pool_conn;

typedef struct pool_host {
    rx_pool *p;
    const rx_host *h;
    pool_conn conns[POOL_MAX_CONNS];
    int n_conns;
    rx_pool_job *queue; /* FIFO */
    int connect_failures;
    int no_runner; /* a runner could not start here: calls take a channel each */
    int calls_done; /* calls reported: runners start with the second (reuse is likely) */
    int held; /* open requests that include this host (rx_pool_hold): its idle runners stay */
    uint64_t first_failure_ms; /* loop time of the first drop in this run of failures */
    uv_timer_t backoff;
    int retired;       /* a reload replaced this host's entry: its connections go once idle */
    uv_timer_t retire; /* looks for idle connections of a retired host, from the loop */
    struct pool_host *next;
} pool_host;

/* A job's lifecycle. Every change goes through job_set (named transitions, checked):
 *   QUEUED -> ON_CHANNEL | ON_RUNNER      dispatched
 *   ON_CHANNEL | ON_RUNNER -> QUEUED      nothing was sent (no runner here, channel refused,
 *                                         connection lost before a byte): tried again, unless
 *                                         the job was cancelled, which ends it there
 *   QUEUED -> REAPING                     cancelled while waiting: reported from the loop
 *   any -> DONE                           reported (the job is freed right after)
 * The cancel is recorded on the job (cancelled), whatever its state: no path requeues, sends or
 * starts a cancelled job. */
typedef enum job_state { JOB_QUEUED = 0, JOB_ON_CHANNEL, JOB_ON_RUNNER, JOB_REAPING, JOB_DONE } job_state;
static const char *const job_state_names[] = {"QUEUED", "ON_CHANNEL", "ON_RUNNER", "REAPING", "DONE"};

struct rx_pool_job {
    pool_host *ph;
    job_state state;
    int cancelled; /* rx_pool_cancel came: never (re)started from now on */
    unsigned char *script, *stdin_data, *runner_code;
    rx_exec_opts opts;
    char nonce[64];
    rx_exec_cb cb;
    rx_pool_start_fn on_start; /* or NULL */
    rexec_error refused;       /* REAPING: what on_start said (code 0: it was cancelled) */
    rx_exec *exec;
    rx_runner *runner;
    int retries;
    int paused;
    rx_jump *tunnel; /* a proxy_jump tunnel waiting for room on this (bastion) host */
    rx_pool_job *next;
};

struct rx_pool {
    uv_loop_t *loop;
    rx_pool_opts opts;
    pool_host *hosts;
    uv_timer_t reaper;       /* delivers cancellations of queued jobs from the loop */
    rx_pool_job *reaping;    /* jobs out of the queue that will not start (cancelled, or refused
                              * by their owner's on_start), awaiting their on_done */
    int closing, sessions_alive, handles_alive;
    int prestart; /* rx_pool_set_runner_prestart */
    void (*on_closed)(void *ud);
    void *closed_ud;
};

static void pool_dispatch(pool_host *ph);

/* ---- jobs ----------------------------------------------------------------------------------- */

static int job_transition_ok(job_state from, job_state to)
{
    switch (to) {
    case JOB_ON_CHANNEL:
    case JOB_ON_RUNNER:
    case JOB_REAPING: return from == JOB_QUEUED;
    case JOB_QUEUED: return from == JOB_ON_CHANNEL || from == JOB_ON_RUNNER;
    case JOB_DONE: return from != JOB_DONE;
    }
    return 0;
}

static void job_set(rx_pool_job *j, job_state to)
{
    if (!job_transition_ok(j->state, to)) {
        rx_log(j->ph->p->opts.log, REXEC_LOG_WARN, "%s: pool job %s -> %s is not a transition",
               j->ph->h->name, job_state_names[j->state], job_state_names[to]);
        abort(); /* a lifecycle bug: a call could run twice or never report */
    }
    j->state = to;
}

/* ---- ----------------------------------------------------------------------------------- */

static void job_free(rx_pool_job *j)
{
    if (j->script)
        OPENSSL_cleanse(j->script, j->opts.script_len);
    free(j->script);
    if (j->runner_code)
        OPENSSL_cleanse(j->runner_code, j->opts.runner_code_len);
    free(j->runner_code);
    free(j->stdin_data);
    free(j);
}

static void job_report(rx_pool_job *j, const rx_exec_result *res)
{
    job_set(j, JOB_DONE);
    if (j->cb.on_done)
        j->cb.on_done(j->cb.ud, res);
    job_free(j);
}

static void job_fail(rx_pool_job *j, int code, const char *msg)
{
    if (j->tunnel) { /* the bastion is unreachable: the host behind it fails, saying so */
        rexec_error e;
        job_set(j, JOB_DONE);
        rx_fail(&e, code, "%s", msg);
        rx_jump_abandon(j->tunnel, &e);
        job_free(j);
        return;
    }
    rx_exec_result res;
    memset(&res, 0, sizeof(res));
    res.err = code;
    snprintf(res.errmsg, sizeof(res.errmsg), "%.*s", (int)sizeof(res.errmsg) - 1, msg);
    job_report(j, &res);
}

static void queue_push(pool_host *ph, rx_pool_job *j, int front)
{
    rx_pool_job **pp = &ph->queue;
    if (!front)
        while (*pp)
            pp = &(*pp)->next;
    j->next = *pp;
    *pp = j;
}

static int queue_remove(pool_host *ph, rx_pool_job *j)
{
    for (rx_pool_job **pp = &ph->queue; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            j->next = NULL;
            return 1;
        }
    return 0;
}

/* ---- connections ---------------------------------------------------------------------------- */

static pool_conn *conn_of(pool_host *ph, rx_session *s)
{
    for (int i = 0; i < ph->n_conns; i++)
        if (ph->conns[i].s == s)
            return &ph->conns[i];
    return NULL;
}

static void conn_remove(pool_host *ph, rx_session *s)
{
    pool_conn *c = conn_of(ph, s);
    if (c) {
        *c = ph->conns[--ph->n_conns];
    }
}

static void on_session_ready(void *ud, rx_session *s)
{
    pool_host *ph = ud;
    (void)s;
    ph->connect_failures = 0;
    pool_dispatch(ph);
}

static void on_backoff(uv_timer_t *t)
{
    pool_dispatch(t->data);
}

/* A connection dropped in the handshake ("Failed getting banner", a reset before the banner) is
 * what sshd's MaxStartups does to a burst: try again after a back-off, for as long as the
 * connect budget (connect_timeout_s from the first drop) lasts. Anything else (refused port,
 * host key, auth, a timeout) is final. */
static int retryable(pool_host *ph, rx_session *s, const rexec_error *err)
{
    /* Behind a proxy_jump a failed handshake is mostly the tunnel's failure (bastion down,
     * forwarding refused), which the bastion's own connection already retried. */
    if (rx_session_failed_in(s) != RX_SS_HANDSHAKE || rx_session_host(s)->jump != NULL ||
        (err->code != REXEC_EHOST && err->code != REXEC_ECONNLOST))
        return 0;
    uint64_t now = uv_now(ph->p->loop);
    if (ph->connect_failures == 0)
        ph->first_failure_ms = now;
    return ph->connect_failures < POOL_MAX_CONNECT_RETRIES &&
           now - ph->first_failure_ms < (uint64_t)(ph->p->opts.connect_timeout_s * 1000);
}

/* Exponential from 100 ms, at most 3.2 s, with jitter (half to all of it): the hosts of a
 * fan-out that were dropped together must not come back together. */
static uint64_t backoff_ms(pool_host *ph)
{
    int k = ph->connect_failures < 5 ? ph->connect_failures : 5;
    uint64_t full = 100u << k;
    return full / 2 + (uv_hrtime() / 1000) % (full / 2 + 1);
}

static void fail_queue(pool_host *ph, const rexec_error *err)
{
    rx_pool_job *q = ph->queue;
    ph->queue = NULL;
    while (q) {
        rx_pool_job *next = q->next;
        job_fail(q, err->code, err->msg);
        q = next;
    }
}

static void on_session_failed(void *ud, rx_session *s, const rexec_error *err)
{
    pool_host *ph = ud;
    int was_ready = rx_session_failed_in(s) == RX_SS_READY;
    conn_remove(ph, s);
    if (ph->p->closing)
        return;
    if (was_ready) {
        /* Its execs report through their own callbacks. Calls still queued behind its channel
         * budget would wait for a slot that never comes (the dying session announces none):
         * give them a fresh connection, from the loop. */
        if (ph->queue && !uv_is_active((uv_handle_t *)&ph->backoff))
            uv_timer_start(&ph->backoff, on_backoff, 0, 0);
        return;
    }
    if (retryable(ph, s, err)) {
        uint64_t ms = backoff_ms(ph);
        ph->connect_failures++;
        uv_timer_start(&ph->backoff, on_backoff, ms, 0);
        return;
    }
    if (ph->n_conns == 0)
        fail_queue(ph, err);
}

static void on_session_freed(void *ud);

static void on_exec_slot(void *ud, rx_session *s)
{
    (void)s;
    pool_dispatch(ud);
}

static pool_host *host_get(rx_pool *p, const rx_host *h);

/* proxy_jump: a tunnel waits in the bastion's queue like a call and takes one of its channels
 * (jump.h); the bastion's connection is opened, or shared, by the usual dispatch. */
static int tunnel_open(pool_host *ph, rx_session_opts *so)
{
    rexec_error e;
    pool_host *bh = host_get(ph->p, ph->h->jump);
    rx_pool_job *j = bh ? calloc(1, sizeof(*j)) : NULL;
    if (j == NULL)
        return REXEC_ENOMEM;
    if ((j->tunnel = rx_jump_new(ph->p->loop, ph->h, &so->tunnel_fd, &so->tunnel, &e)) == NULL) {
        free(j);
        return e.code;
    }
    j->ph = bh;
    queue_push(bh, j, 0);
    pool_dispatch(bh);
    return 0;
}

static int conn_open(pool_host *ph)
{
    rx_pool *p = ph->p;
    rx_session_opts so = {.host = ph->h,
                          .known_hosts = p->opts.known_hosts,
                          .connect_timeout_s = p->opts.connect_timeout_s,
                          .keepalive_s = p->opts.keepalive_s,
                          .log = p->opts.log};
    rx_session_events ev = {on_session_ready, on_session_failed, on_session_freed, on_exec_slot, ph};
    if (ph->h->jump && tunnel_open(ph, &so) != 0)
        return REXEC_ENOMEM;
    rx_session *s = rx_session_new(p->loop, &so, &ev);
    if (s == NULL)
        return REXEC_ENOMEM;
    int budget = ph->h->max_channels > 0 ? ph->h->max_channels : p->opts.default_channels;
    ph->conns[ph->n_conns++] = (pool_conn){s, budget > 0 ? budget : RX_DEFAULT_MAX_CHANNELS};
    p->sessions_alive++;
    return 0;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static void on_job_data(void *ud, int stream, const unsigned char *data, size_t len)
{
    rx_pool_job *j = ud;
    if (j->cb.on_data)
        j->cb.on_data(j->cb.ud, stream, data, len);
}

/* The job never ran: reported as cancelled, naming its host. */
static void job_fail_cancelled(rx_pool_job *j)
{
    char msg[300];
    snprintf(msg, sizeof(msg), "%s: cancelled before it started", j->ph->h->name);
    job_fail(j, REXEC_ECANCELLED, msg);
}

/* Nothing of the job was sent: it goes back to the front of its host's queue, or, when it was
 * cancelled meanwhile, ends there as cancelled (it never ran). */
static void job_requeue(rx_pool_job *j)
{
    pool_host *ph = j->ph;
    if (j->cancelled) {
        job_fail_cancelled(j);
        return;
    }
    job_set(j, JOB_QUEUED);
    queue_push(ph, j, 1);
    pool_dispatch(ph);
}

/* sshd refused the channel (MaxSessions): this connection holds no more than it has now. */
static void lower_budgets(pool_host *ph)
{
    for (int i = 0; i < ph->n_conns; i++)
        if (rx_session_full(ph->conns[i].s)) {
            int n = rx_session_channels(ph->conns[i].s);
            n = n > 0 ? n : 1;
            if (ph->conns[i].budget != n)
                rx_log(ph->p->opts.log, REXEC_LOG_WARN,
                       "%s: sshd refused a channel (MaxSessions below max_channels?): "
                       "the connection takes %d call(s) at a time, the others wait",
                       ph->h->name, n);
            ph->conns[i].budget = n;
        }
}

static rx_runner *free_runner(pool_host *ph);
static pool_conn *conn_with_room(pool_host *ph, int *connecting);

/* rx_pool_set_runner_prestart: the host's first call has ended (on a channel of its own), so
 * its runner starts now, with no call, on a connection with room; a call that comes while it
 * starts waits for it, as for any starting runner. */
static void runner_prestart(pool_host *ph)
{
    int connecting;
    if (!ph->p->prestart || ph->p->closing || ph->retired || !ph->h->runner || ph->no_runner ||
        free_runner(ph) != NULL)
        return;
    pool_conn *c = conn_with_room(ph, &connecting);
    if (c != NULL && rx_runner_new(c->s, (int)ph->h->max_containment,
                                   ph->p->opts.runner_idle_s > 0 ? ph->p->opts.runner_idle_s
                                                                 : POOL_RUNNER_IDLE_S,
                                   &ph->held) != NULL)
        rx_session_kick(c->s); /* its start goes out now (no call drives it); NULL, no memory:
                                * the next call starts one */
}

static void on_job_done(void *ud, const rx_exec_result *res)
{
    rx_pool_job *j = ud;
    pool_host *ph = j->ph;
    int on_runner = j->state == JOB_ON_RUNNER, closing = ph->p->closing;
    j->exec = NULL;
    j->runner = NULL;
    /* No runner can start on this host (remote/runner.sh said so, or the server would not run
     * it): nothing of the call was sent; it and every later call take a channel each. */
    if (res->no_runner && !closing) {
        if (!ph->no_runner)
            rx_log(ph->p->opts.log, REXEC_LOG_WARN,
                   "%s: no runner on this host (%s); calls take a channel each", ph->h->name,
                   res->errmsg);
        ph->no_runner = 1;
        job_requeue(j);
        return;
    }
    if (res->channel_full && !closing) {
        lower_budgets(ph);
        job_requeue(j);
        return;
    }
    /* The channel could not be set up, before a byte of this call's script was sent (the
     * connection died, or libssh2 lost the reply: exec.c setup_failure): nothing ran, so a new
     * channel or connection may take it, a bounded number of times. A call whose script was
     * sent is reported, never re-run. */
    if (!res->sent && res->err == REXEC_ECONNLOST && j->retries < POOL_MAX_SETUP_RETRIES &&
        !closing) {
        j->retries++;
        job_requeue(j);
        return;
    }
    /* a call that could have used a runner went on a channel: the host's first */
    int first = ph->calls_done == 0 && !on_runner && j->opts.runner_code != NULL;
    ph->calls_done++;
    if (j->cancelled && !res->sent && res->err != REXEC_ECANCELLED)
        job_fail_cancelled(j); /* cancelled while its channel or runner was being set up */
    else
        job_report(j, res);
    if (first && !closing)
        runner_prestart(ph);
    if (on_runner && !closing)
        pool_dispatch(ph); /* the runner takes the next call */
}

static pool_conn *conn_with_room(pool_host *ph, int *connecting)
{
    *connecting = 0;
    for (int i = 0; i < ph->n_conns; i++) {
        rx_session *s = ph->conns[i].s;
        rx_session_state st = rx_session_get_state(s);
        if (st == RX_SS_READY && rx_session_channels(s) < ph->conns[i].budget)
            return &ph->conns[i];
        if (st < RX_SS_READY)
            (*connecting)++;
    }
    return NULL;
}

static int use_runner(const pool_host *ph, const rx_pool_job *j)
{
    /* stdin pulled piece by piece streams on a channel of its own (a frame holds all of it), and
     * a runner stages every stdin before its command starts (remote/runner.sh) */
    /* A process that makes one call per host (`rexec run`) would only pay a runner's start:
     * the first call to a host takes a channel of its own, later ones (serve) get runners. */
    return ph->h->runner && !ph->no_runner && ph->calls_done > 0 && j->opts.runner_code != NULL &&
           j->opts.stdin_pull == NULL && j->opts.stdin_len <= POOL_RUNNER_MAX_STDIN &&
           !j->opts.stdin_piped;
}

/* An idle (or starting) runner on a ready connection of this host. */
static rx_runner *free_runner(pool_host *ph)
{
    for (int i = 0; i < ph->n_conns; i++) {
        rx_runner *r;
        if (rx_session_get_state(ph->conns[i].s) == RX_SS_READY &&
            (r = rx_runner_find_free(ph->conns[i].s)) != NULL)
            return r;
    }
    return NULL;
}

/* The job leaves the queue: its owner's on_start first (nothing is sent if it refuses). Returns 0,
 * or the error code with which the job was failed (then j is gone). */
static void job_reap(rx_pool_job *j);

static int job_starting(rx_pool_job *j)
{
    rexec_error e;
    if (j->on_start == NULL || j->on_start(j->cb.ud, &e) == 0)
        return 0;
    j->refused = e;
    if (j->refused.code == 0)
        j->refused.code = REXEC_EINTERNAL;
    job_reap(j); /* reported from the loop: this may be inside rx_pool_exec */
    return j->refused.code;
}

static int job_on_runner(rx_pool_job *j, rx_runner *r)
{
    rx_exec_cb cb = {on_job_data, on_job_done, j};
    int e = rx_runner_call(r, &j->opts, &cb);
    if (e == 0) {
        job_set(j, JOB_ON_RUNNER);
        j->runner = r;
        if (j->paused)
            rx_runner_pause(r, 1);
    }
    return e;
}

/* On a connection with room: a call on a new runner, or on a channel of its own. */
static int job_start(rx_pool_job *j, pool_conn *c)
{
    if (j->tunnel) {
        rx_jump_attach(j->tunnel, c->s);
        job_free(j);
        return 0;
    }
    rx_exec_cb cb = {on_job_data, on_job_done, j};
    if (use_runner(j->ph, j)) {
        rx_runner *rn = rx_runner_new(c->s, (int)j->ph->h->max_containment,
                                        j->ph->p->opts.runner_idle_s > 0 ? j->ph->p->opts.runner_idle_s
                                                                         : POOL_RUNNER_IDLE_S,
                                        &j->ph->held);
        return rn ? job_on_runner(j, rn) : REXEC_ENOMEM;
    }
    int r = rx_exec_start(c->s, &j->opts, &cb, &j->exec);
    if (r == 0) {
        job_set(j, JOB_ON_CHANNEL);
        if (j->paused)
            rx_exec_pause(j->exec, 1);
    }
    return r;
}

static void dispatch_queue(pool_host *ph);

/* A retired host's connections close once nothing of theirs runs or waits: a reload that changed
 * the host's entry must not leave its old connections (and their sshd sessions) open for ever. */
static void on_retire(uv_timer_t *t)
{
    pool_host *ph = t->data;
    if (!ph->retired || ph->queue || ph->p->closing)
        return;
    for (int i = 0; i < ph->n_conns;) {
        rx_session *s = ph->conns[i].s;
        rx_runner *r;
        while ((r = rx_runner_find_free(s)) != NULL)
            rx_runner_retire(r); /* closes; its end comes back here through on_exec_slot */
        if (rx_session_channels(s) == 0 && rx_session_get_state(s) == RX_SS_READY) {
            conn_remove(ph, s);
            rx_session_close(s, NULL);
            continue;
        }
        i++;
    }
}

static void pool_dispatch(pool_host *ph)
{
    dispatch_queue(ph);
    if (ph->retired && ph->queue == NULL && !ph->p->closing)
        uv_timer_start(&ph->retire, on_retire, 0, 0);
}

static void dispatch_queue(pool_host *ph)
{
    int connecting;
    while (ph->queue && !ph->p->closing) {
        rx_runner *r = use_runner(ph, ph->queue) ? free_runner(ph) : NULL;
        if (r != NULL) {
            rx_pool_job *j = ph->queue;
            ph->queue = j->next;
            j->next = NULL;
            if (job_starting(j) == 0 && job_on_runner(j, r) != 0)
                job_fail(j, REXEC_ENOMEM, "out of memory");
            continue;
        }
        pool_conn *c = conn_with_room(ph, &connecting);
        if (c == NULL && !use_runner(ph, ph->queue) && (r = free_runner(ph)) != NULL) {
            rx_runner_retire(r); /* idle runners hold the channels: one makes room */
            return;
        }
        if (c == NULL) {
            int max = ph->h->max_connections > 0 ? ph->h->max_connections : 1;
            if (connecting == 0 && ph->n_conns < max && ph->n_conns < POOL_MAX_CONNS &&
                !uv_is_active((uv_handle_t *)&ph->backoff) && conn_open(ph) != 0) {
                rexec_error e;
                rx_fail(&e, REXEC_ENOMEM, "%s: out of memory", ph->h->name);
                fail_queue(ph, &e);
            }
            return;
        }
        rx_pool_job *j = ph->queue;
        ph->queue = j->next;
        j->next = NULL;
        if ((j->tunnel || job_starting(j) == 0) && job_start(j, c) != 0)
            job_fail(j, REXEC_ENOMEM, "out of memory");
    }
}

/* ---- public --------------------------------------------------------------------------------- */

static pool_host *host_get(rx_pool *p, const rx_host *h)
{
    for (pool_host *ph = p->hosts; ph; ph = ph->next)
        if (ph->h == h)
            return ph;
    pool_host *ph = calloc(1, sizeof(*ph));
    if (ph == NULL)
        return NULL;
    ph->p = p;
    ph->h = h;
    if (uv_timer_init(p->loop, &ph->backoff) != 0 || uv_timer_init(p->loop, &ph->retire) != 0) {
        free(ph); /* libuv's timer init cannot fail (1.44): nothing to close */
        return NULL;
    }
    ph->backoff.data = ph->retire.data = ph;
    p->handles_alive += 2;
    ph->next = p->hosts;
    p->hosts = ph;
    return ph;
}

static unsigned char *dup_bytes(const unsigned char *p, size_t n)
{
    unsigned char *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

int rx_pool_exec(rx_pool *p, const rx_host *h, const rx_exec_opts *opts, const rx_exec_cb *cb,
                 rx_pool_job **out)
{
    return rx_pool_exec_with_start(p, h, opts, cb, NULL, out);
}

int rx_pool_exec_with_start(rx_pool *p, const rx_host *h, const rx_exec_opts *opts,
                            const rx_exec_cb *cb, rx_pool_start_fn on_start, rx_pool_job **out)
{
    pool_host *ph = p->closing ? NULL : host_get(p, h);
    rx_pool_job *j = ph ? calloc(1, sizeof(*j)) : NULL;
    if (j == NULL)
        return REXEC_ENOMEM;
    j->ph = ph;
    j->cb = *cb;
    j->on_start = on_start;
    j->opts = *opts;
    snprintf(j->nonce, sizeof(j->nonce), "%s", opts->nonce);
    j->opts.nonce = j->nonce;
    j->script = dup_bytes(opts->script, opts->script_len);
    j->stdin_data = opts->stdin_data ? dup_bytes(opts->stdin_data, opts->stdin_len) : NULL;
    j->runner_code = opts->runner_code ? dup_bytes(opts->runner_code, opts->runner_code_len) : NULL;
    j->opts.runner_code = j->runner_code;
    if (j->script == NULL || (opts->stdin_data && j->stdin_data == NULL) ||
        (opts->runner_code && j->runner_code == NULL)) {
        job_free(j);
        return REXEC_ENOMEM;
    }
    j->opts.script = j->script;
    j->opts.stdin_data = j->stdin_data;
    if (j->opts.setup_s <= 0) /* a hung warm connection must not outlast the connect budget */
        j->opts.setup_s = p->opts.connect_timeout_s;
    queue_push(ph, j, 0);
    if (out)
        *out = j;
    pool_dispatch(ph);
    return 0;
}

static void on_reaper(uv_timer_t *t)
{
    rx_pool *p = t->data;
    rx_pool_job *j = p->reaping;
    p->reaping = NULL;
    while (j) {
        rx_pool_job *next = j->next;
        if (j->refused.code != 0)
            job_fail(j, j->refused.code, j->refused.msg);
        else
            job_fail_cancelled(j);
        j = next;
    }
}

/* A job out of the queue that will not start: reported from the loop (on_reaper). */
static void job_reap(rx_pool_job *j)
{
    rx_pool *p = j->ph->p;
    job_set(j, JOB_REAPING);
    j->next = p->reaping;
    p->reaping = j;
    uv_timer_start(&p->reaper, on_reaper, 0, 0);
}

void rx_pool_cancel(rx_pool_job *j)
{
    if (j->cancelled || j->state == JOB_DONE)
        return;
    j->cancelled = 1; /* whatever happens to it next, it is not started again */
    switch (j->state) {
    case JOB_ON_CHANNEL: rx_exec_cancel(j->exec); break;
    case JOB_ON_RUNNER: rx_runner_cancel(j->runner); break;
    case JOB_QUEUED: /* report from the loop, not from the caller's stack */
        if (queue_remove(j->ph, j))
            job_reap(j);
        break;
    default: break;
    }
}

void rx_pool_pause(rx_pool_job *j, int on)
{
    j->paused = on;
    if (j->exec)
        rx_exec_pause(j->exec, on);
    else if (j->runner)
        rx_runner_pause(j->runner, on);
}

void rx_pool_retire_host(rx_pool *p, const rx_host *h)
{
    /* Made now if no call reached the pool for h yet: one that started before the reload and
     * comes later must find h retired, or its connection would stay open for good. */
    pool_host *ph = p->closing ? NULL : host_get(p, h);
    if (ph && !ph->retired) {
        ph->retired = 1;
        pool_dispatch(ph);
    }
}

void rx_pool_hold(rx_pool *p, const rx_host *h, int on)
{
    pool_host *ph = p->closing ? NULL : host_get(p, h);
    if (ph == NULL || (!on && ph->held == 0))
        return;
    ph->held += on ? 1 : -1;
    if (ph->held > 0)
        return;
    for (int i = 0; i < ph->n_conns; i++) /* the idle time counts from the end of the request */
        rx_runner_idle_restart(ph->conns[i].s);
}

rx_pool *rx_pool_new(uv_loop_t *loop, const rx_pool_opts *opts)
{
    rx_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->loop = loop;
    p->opts = *opts;
    if (uv_timer_init(loop, &p->reaper) != 0) { /* cannot fail in libuv 1.44; checked all the same */
        free(p);
        return NULL;
    }
    p->reaper.data = p;
    p->handles_alive = 1;
    return p;
}

void rx_pool_set_runner_prestart(rx_pool *p, int on)
{
    p->prestart = on;
}

static void pool_maybe_free(rx_pool *p)
{
    if (!p->closing || p->sessions_alive > 0 || p->handles_alive > 0)
        return;
    for (pool_host *ph = p->hosts, *next; ph; ph = next) {
        next = ph->next;
        free(ph);
    }
    void (*cb)(void *) = p->on_closed;
    void *ud = p->closed_ud;
    free(p);
    if (cb)
        cb(ud);
}

static void on_session_freed(void *ud)
{
    pool_host *ph = ud;
    rx_pool *p = ph->p;
    p->sessions_alive--;
    pool_maybe_free(p);
}

static void on_reaper_closed(uv_handle_t *h)
{
    rx_pool *p = h->data;
    p->handles_alive--;
    pool_maybe_free(p);
}

static void on_backoff_closed(uv_handle_t *h)
{
    pool_host *ph = h->data;
    rx_pool *p = ph->p;
    p->handles_alive--; /* ph itself goes with the pool: its sessions may still report */
    pool_maybe_free(p);
}

void rx_pool_close(rx_pool *p, void (*on_closed)(void *ud), void *ud)
{
    rexec_error e;
    if (p->closing)
        return;
    p->closing = 1;
    p->on_closed = on_closed;
    p->closed_ud = ud;
    rx_fail(&e, REXEC_ECANCELLED, "rexec is shutting down");
    on_reaper(&p->reaper);
    for (pool_host *ph = p->hosts, *next; ph; ph = next) {
        next = ph->next;
        fail_queue(ph, &e);
        /* closing a session fails its execs (their jobs report) and frees it from the loop */
        while (ph->n_conns > 0) {
            rx_session *s = ph->conns[0].s;
            conn_remove(ph, s);
            rx_session_close(s, &e);
        }
        uv_close((uv_handle_t *)&ph->backoff, on_backoff_closed);
        uv_close((uv_handle_t *)&ph->retire, on_backoff_closed);
    }
    uv_close((uv_handle_t *)&p->reaper, on_reaper_closed);
}

void rx_pool_count(const rx_pool *p, rx_pool_counts *out)
{
    memset(out, 0, sizeof(*out));
    for (const pool_host *ph = p ? p->hosts : NULL; ph; ph = ph->next) {
        for (const rx_pool_job *j = ph->queue; j; j = j->next)
            out->queued++;
        for (int i = 0; i < ph->n_conns; i++) {
            rx_session_state st = rx_session_get_state(ph->conns[i].s);
            out->conns[st < RX_SS_READY ? 0 : st == RX_SS_READY ? 1 : st == RX_SS_FAILED ? 2 : 3]++;
            rx_runner_count(ph->conns[i].s, out->runners);
        }
    }
}
