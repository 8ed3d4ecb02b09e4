/* rexec serve: a long-lived controller on a Unix socket (docs/serve-protocol.md). Requests and
 * replies are newline-delimited JSON; every call goes through the same library path as the CLI,
 * on the same loop, so connections to hosts stay warm between calls. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "approvals.h"
#include "call.h"
#include "err.h"
#include "host_hold.h"
#include "jsonx.h"
#include "request.h"
#include "serve_approvals.h"
#include "serve_log.h"
#include "serve_fanout.h"
#include "serve_metrics.h"
#include "serve_peer.h"
#include "serve_stdin.h"

#define SERVE_LINE_MAX (RX_REQUEST_MAX_LEN + 4096)
/* Back-pressure: above HIGH bytes queued to a client its calls stop reading their hosts (the SSH
 * windows fill and the commands on the VMs wait); below LOW they read again. A client that reads
 * is never dropped, however slowly it reads. */
#define SERVE_HIGH_WATER ((size_t)4 << 20)
#define SERVE_LOW_WATER ((size_t)1 << 20)
/* A result line carries at most this much of each captured stream; past it the line says so
 * (stdout_truncated_in_result) and stdout_bytes / the evidence file have the whole. */
#define SERVE_RESULT_MAX ((size_t)256 << 20)
#define SERVE_MAX_REQS 1024 /* requests in flight per client */
#define SERVE_WRITE_CHUNK ((size_t)1 << 30) /* uv_buf_t lengths are unsigned int */
#define SERVE_STDIN_TIMEOUT_S 60.0 /* default longest pause of a streamed stdin */
#define SERVE_RAW_MAX ((uint64_t)1 << 20) /* a raw stdin piece ("bytes"): at most this many */
#define SERVE_READ_BUF 65536 /* a client's read buffer: one, reused for every read */

typedef struct serve_client serve_client;
typedef struct serve_req serve_req;

/* A client's life, one way only (client_set_state checks every step):
 *   READING  --client_stop_reading-->  DRAINING   it half-closed, or serve lost step with its
 *                                                 stream: nothing more is read; what it asked
 *                                                 runs to the end and is answered
 *   READING | DRAINING --client_finish--> FLUSHING   nothing left to run: the replies queued
 *                                                 are written (uv_shutdown), then it closes
 *   any of those --client_close--> CLOSING        gone, or done: its calls are cancelled, its
 *                                                 handles close
 *   CLOSING --on_client_handle_closed--> CLOSED   both handles closed: its memory goes
 * (throttled is not part of it: a READING or DRAINING client is throttled or not, any time.) */
typedef enum client_state { CL_READING = 0, CL_DRAINING, CL_FLUSHING, CL_CLOSING, CL_CLOSED }
    client_state;

/* Admissions of the last few seconds, by the peer's (uid, gid) under one workspace: a client
 * that makes a connection per call (`rexec --socket ... run`) is admitted on the loop from here,
 * without the thread pool's round trip and the NSS lookups (~0.7 ms a connection). An entry
 * lasts SERVE_ADMIT_TTL_MS and none outlives a reload (serve.clients may have changed): a user
 * taken out of a group that serve.clients names keeps that group's verbs on new connections
 * for at most that long, as under nscd's cache (docs/gate.md). */
#define SERVE_ADMIT_CACHE 8
#define SERVE_ADMIT_TTL_MS 5000
typedef struct admit_entry {
    const rx_ws *ws; /* NULL: empty */
    unsigned gen;    /* the context's reloads then: a workspace's address may come back */
    uid_t uid;
    gid_t gid;
    uint64_t until; /* loop time (ms) */
    rx_peer peer;
    unsigned verbs;
} admit_entry;

struct rexec_server {
    rexec_ctx *ctx;
    admit_entry admits[SERVE_ADMIT_CACHE];
    unsigned admit_next;
    uv_pipe_t listener;
    char *path;
    double idle_s;
    double stdin_timeout_s; /* a streamed stdin that pauses longer ends its request */
    serve_client *clients;
    int stopping, handles;
    int activated; /* the listening socket came from systemd: the file is not ours to remove */
    uv_pipe_t reject; /* a connection serve cannot take is accepted into this and closed */
    int reject_busy, reject_due; /* reject is closing / another connection waits for it */
    size_t reqs_alive;
    unsigned long accepted; /* connections admitted so far */
    void (*on_stopped)(void *ud);
    void *stopped_ud;
    rx_serve_log log;
    rx_hub *hub; /* approvals: the approver ops, watchers, waits (serve_approvals.c) */
    rx_metrics_file *metrics_file; /* --metrics-file, or NULL */
};

struct serve_client {
    rexec_server *srv;
    serve_client *next;
    uv_pipe_t pipe;
    uv_timer_t idle;
    rx_buf line;
    serve_req *reqs;
    size_t n_reqs;
    client_state state;
    int handles, overlong;
    /* A raw stdin piece ({"op":"stdin",…,"bytes":N}): N bytes that are not lines follow.
     * raw_target is the request they go to (a copy of its id; NULL: read and dropped). */
    uint64_t raw_left;
    cJSON *raw_target;
    int raw_eof;
    char *rbuf; /* SERVE_READ_BUF */
    int throttled; /* its calls are paused: the write queue went above SERVE_HIGH_WATER */
    uv_shutdown_t shut;
    rx_peer peer;       /* who connected (SO_PEERCRED) */
    uv_work_t admit;    /* who it is and what it may do, looked up on the thread pool */
    int admitting;      /* that lookup has not reported yet (1; 2: taken from the cache): the
                         * pipe stays open until it has */
    int admit_fd, admit_failed;
    unsigned long admit_seq; /* the how-many-th connection (the test build's admission gate) */
    const rx_ws *admit_ws; /* the workspace the verbs are computed against */
    unsigned verbs;     /* what it may do (RX_VERB_*), as of workspace load verbs_gen */
    unsigned verbs_gen;
};

/* One host of a request. */
/* A request waiting for its streamed stdin: the deadline for the next chunk. Its own allocation,
 * because the timer is the loop's until its close callback, which may run after the request. */
typedef struct serve_wait {
    uv_timer_t timer;
    serve_req *q; /* NULL once the wait is over */
    rexec_server *srv;
} serve_wait;

typedef struct serve_call {
    serve_req *req;
    const char *host;
    rexec_call *call;
    int gated;  /* its gate has decided (or it ended before one) */
    int needs;  /* that decision was REQUIRES_APPROVAL */
    int held;   /* wait_approval_s: its REQUIRES_APPROVAL result is held for the decision */
} serve_call;

/* One request: a run/eval over TARGETS, or a check. Outlives its client when the client leaves
 * (its calls are cancelled, and it goes once they have reported). */
struct serve_req {
    rexec_server *srv;
    serve_client *cl; /* NULL once the client is gone */
    serve_req *next;
    cJSON *id;
    char *op, *grant;
    char batch[REXEC_BATCH_ID_SIZE]; /* the batch_id of a request to several hosts */
    int stream;
    rx_request parsed;
    rexec_param *params;
    rexec_request view;
    const char **hosts;
    serve_call *calls;
    size_t n, started, finished;
    size_t listed; /* hosts in "accepted" (n drops to started when the rest are dropped) */
    int worst;
    int parallel; /* hosts at once; 0: limits.parallel */
    rx_peer peer; /* who asked, for the log (the client may be gone when it ends) */
    uint64_t t0;  /* uv_hrtime() when it arrived */
    rx_spool spool;   /* "stdin_stream": the stdin as it arrives, then what the calls read */
    serve_wait *wait; /* "stdin_stream": set until its "eof" arrives */
    /* approvals (docs/serve-protocol.md, "Waiting for a decision") */
    double wait_approval_s; /* 0: hosts that need approval report 75 at once */
    char challenge[RX_APPROVAL_ID_LEN + 1]; /* the request's challenge, once a gate made it */
    size_t gated, waiting_hosts; /* hosts whose gate decided; hosts held for the decision */
    int verdict;  /* 0 undecided, 1 approved, 2 not (why says) */
    int waiting;  /* registered with the hub */
    int pins;     /* > 0: held hosts are being resolved: req_done waits for the loop's end */
    int gating_batch; /* its batch_id is with the hub until every host's gate has decided */
    char *why;
    rexec_fanout *fan; /* "batch", "canary", "max_failures", "retry_unavailable"; or NULL */
    int cancelled;     /* a cancel came: no host is tried again */
    const rx_host **held; /* its hosts, held in the pool until it ends (host_hold.h) */
    size_t n_held;
};

static void client_close(serve_client *cl);
static void client_finish(serve_client *cl);

/* Replies may still be sent to it, and its requests still belong to it. */
static int client_open(const serve_client *cl)
{
    return cl->state < CL_CLOSING;
}
static void touch(serve_client *cl);
static void server_maybe_done(rexec_server *s);
static void stop_idle_clients(rexec_server *s);
static void on_listener_closed(uv_handle_t *h);
static void say_who(const rx_ws *ws);

/* ---- writing replies ------------------------------------------------------------------------ */

typedef struct serve_write {
    uv_write_t w;
    serve_client *cl;
    char *line;
} serve_write;

/* Pauses (on = 1) or resumes every call the client's requests have running. */
static void client_throttle(serve_client *cl, int on)
{
    cl->throttled = on;
    for (serve_req *q = cl->reqs; q; q = q->next)
        for (size_t i = 0; i < q->started && q->calls; i++)
            if (q->calls[i].call)
                (on ? rexec_call_pause : rexec_call_resume)(q->calls[i].call);
}

static size_t client_queued(serve_client *cl)
{
    return uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe);
}

/* libuv calls this for every write, also with UV_ECANCELED when the pipe closes, and always
 * before the pipe's close callback: cl is still allocated here. */
static void on_written(uv_write_t *req, int status)
{
    serve_write *w = (serve_write *)req;
    serve_client *cl = w->cl;
    free(w->line);
    free(w);
    /* a half-closed client that is gone for good shows up only here (EPIPE) */
    if (cl->state == CL_DRAINING && status < 0 && status != UV_ECANCELED) {
        client_close(cl);
        return;
    }
    if (client_open(cl) && cl->throttled && client_queued(cl) < SERVE_LOW_WATER)
        client_throttle(cl, 0);
}

/* Sends one JSON object as a line. Never closes the client (callers hold its requests): a
 * client that reads slowly is throttled instead. Returns 0, or -1 when the line could not be
 * built (out of memory) or the client is gone. */
/* What every reply echoes of the caller's own text, the id (of any JSON type) and an error
 * message (which may quote the request), redacted on the way out: one place for every reply. */
static void reply_redact(serve_client *cl, cJSON *o)
{
    const rx_redactor *r = rx_ctx_redactor(cl->srv->ctx);
    cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
    cJSON *c;
    if (id && (cJSON_IsString(id) || cJSON_IsArray(id) || cJSON_IsObject(id)) &&
        (c = rx_redact_json(r, id)) != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(o, "id", c);
    if (cJSON_IsString(err) && (c = rx_redact_json(r, err)) != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(o, "error", c);
}

static int client_send(serve_client *cl, cJSON *o)
{
    if (cl && client_open(cl))
        reply_redact(cl, o);
    char *text = cl && client_open(cl) ? cJSON_PrintUnformatted(o) : NULL;
    if (text == NULL)
        return -1;
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    serve_write *w = malloc(sizeof(*w));
    if (line == NULL || w == NULL) {
        free(line ? line : text);
        free(w);
        return -1;
    }
    line[n++] = '\n';
    uv_buf_t b[8];
    unsigned nb = 0;
    for (size_t off = 0; off < n && nb < 8; nb++) {
        size_t len = n - off < SERVE_WRITE_CHUNK ? n - off : SERVE_WRITE_CHUNK;
        b[nb] = uv_buf_init(line + off, (unsigned)len);
        off += len;
    }
    w->cl = cl;
    w->line = line;
    if (uv_write(&w->w, (uv_stream_t *)&cl->pipe, b, nb, on_written) != 0) {
        free(line);
        free(w);
        return -1;
    }
    if (!cl->throttled && client_queued(cl) > SERVE_HIGH_WATER)
        client_throttle(cl, 1);
    return 0;
}

/* Every reply carries the request's "id" (null when it had none) and its "type". */
static cJSON *add_head(cJSON *o, const cJSON *id, const char *type)
{
    cJSON_AddItemToObject(o, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static cJSON *reply_to(const cJSON *id, const char *type)
{
    return add_head(cJSON_CreateObject(), id, type);
}

static cJSON *reply(const serve_req *q, const char *type)
{
    return reply_to(q ? q->id : NULL, type);
}

static void send_error(serve_client *cl, const cJSON *id, int code, const char *msg)
{
    cJSON *o = reply_to(id, "error");
    cJSON_AddStringToObject(o, "error", msg);
    cJSON_AddNumberToObject(o, "exit_status", rexec_err_exit_code(code));
    client_send(cl, o);
    cJSON_Delete(o);
}

/* ---- the log -------------------------------------------------------------------------------- */

static rx_serve_log_who who_of(const rx_peer *p, const char *op, const cJSON *id)
{
    return (rx_serve_log_who){p ? (long)p->uid : -1, p ? p->user : NULL, op, id, NULL};
}

static uint64_t ms_since(uint64_t t0)
{
    return (uv_hrtime() - t0) / 1000000;
}

/* ---- requests ------------------------------------------------------------------------------- */

static void wait_end(serve_req *q);

static void req_free(serve_req *q)
{
    rexec_server *s = q->srv;
    if (q->waiting)
        rx_hub_unwait(s->hub, q);
    if (q->gating_batch)
        rx_hub_batch_end(s->hub, q->view.batch_id);
    free(q->why);
    wait_end(q);
    rx_ctx_release_hosts(s->ctx, q->held, q->n_held);
    rx_spool_close(&q->spool);
    cJSON_Delete(q->id);
    free(q->op);
    free(q->grant);
    rx_request_free(&q->parsed);
    free(q->params);
    free(q->hosts);
    free(q->calls);
    rexec_fanout_free(q->fan);
    free(q);
    s->reqs_alive--;
}

static void req_unlink(serve_req *q)
{
    if (q->cl == NULL)
        return;
    for (serve_req **pp = &q->cl->reqs; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            q->cl->n_reqs--;
            break;
        }
    q->cl = NULL;
}

/* All hosts reported: the "done" line with the aggregate status (largest wins, as the CLI). */
static void req_done(serve_req *q)
{
    cJSON *o = reply(q, "done");
    rexec_fanout_progress fp;
    rexec_fanout_get_progress(q->fan, &fp);
    q->worst = rexec_fanout_exit_status(q->fan, q->worst);
    cJSON_AddNumberToObject(o, "exit_status", q->worst);
    if (fp.stopped)
        cJSON_AddStringToObject(o, "stopped", "STOPPED_FAILURE_THRESHOLD");
    client_send(q->cl, o);
    cJSON_Delete(o);
    rx_serve_log_who w = who_of(&q->peer, q->op, q->id);
    w.traceparent = q->parsed.traceparent;
    rx_serve_log_request(&q->srv->log, q->srv->ctx, &w, q->listed, q->worst, ms_since(q->t0), NULL);
    rexec_server *s = q->srv;
    serve_client *cl = q->cl;
    req_unlink(q);
    req_free(q);
    if (cl && cl->state == CL_DRAINING && cl->reqs == NULL)
        client_finish(cl); /* a half-closed client: its last result is queued */
    /* The idle time counts from the end of the last request: the idle timer may have fired while
     * this one ran (on_idle spares a client with requests), and nothing else would re-arm it, so
     * a client whose request outlived --idle-timeout was never closed for idleness. */
    if (cl && client_open(cl))
        touch(cl);
    if (s->stopping) /* a stopping server closes each client once its last request is done */
        stop_idle_clients(s);
    server_maybe_done(s);
}

static void req_launch(serve_req *q);
static void on_call_gate(void *ud, const char *reason, const char *challenge_id);
static int approval_hold(serve_call *sc, const rexec_result *r);

static void on_call_output(void *ud, int stream, const void *data, size_t len)
{
    serve_call *sc = ud;
    if (!sc->req->stream || sc->req->cl == NULL)
        return;
    cJSON *o = reply(sc->req, "output");
    rx_json_add_str(o, "host", sc->host);
    rx_json_add_str(o, "stream", stream == REXEC_STDOUT ? "stdout" : "stderr");
    rx_json_add_bytes(o, "data", data, len);
    client_send(sc->req->cl, o);
    cJSON_Delete(o);
}

/* The result without its captured streams, and why: the line every host gets when the full
 * one cannot be built (out of memory). */
static int send_result_bare(serve_req *q, const rexec_result *r)
{
    rexec_result b = *r;
    char msg[512];
    snprintf(msg, sizeof(msg), "%s: the result line could not be built (out of memory): its "
             "output is left out%s%s", r->host ? r->host : "?", r->error ? "; " : "",
             r->error ? r->error : "");
    b.stdout_data = b.stderr_data = NULL;
    b.stdout_len = b.stderr_len = 0;
    b.error = msg;
    cJSON *o = rx_result_json(&b);
    int rc = o ? client_send(q->cl, add_head(o, q->id, "result")) : -1;
    cJSON_Delete(o);
    return rc;
}

/* One host's "result" line; the request's status is the largest of its hosts'. Captured output
 * beyond SERVE_RESULT_MAX is cut from the line, which says so. */
static void send_result(serve_req *q, const rexec_result *r)
{
    rexec_result c = *r;
    int cut_out = c.stdout_len > SERVE_RESULT_MAX, cut_err = c.stderr_len > SERVE_RESULT_MAX;
    if (cut_out)
        c.stdout_len = SERVE_RESULT_MAX, c.stdout_truncated_in_result = 1;
    if (cut_err)
        c.stderr_len = SERVE_RESULT_MAX, c.stderr_truncated_in_result = 1;
    cJSON *o = rx_result_json(&c);
    if (q->cl && (o == NULL || client_send(q->cl, add_head(o, q->id, "result")) != 0) &&
        client_open(q->cl))
        send_result_bare(q, r);
    cJSON_Delete(o);
    if (r->exit_status > q->worst)
        q->worst = r->exit_status;
}

static int call_begin(serve_req *q, serve_call *sc);

/* The fan-out's side of a host's end: its tries, the threshold (the stop is recorded once). */
static void fanout_host_done(serve_req *q, size_t i, rexec_result *r)
{
    r->tries = rexec_fanout_tries(q->fan, i);
    if (rexec_fanout_done(q->fan, i, r)) {
        rexec_error e;
        rx_fanout_who w = {q->hosts, q->n, q->view.action, q->view.batch_id, q->peer.user,
                           (unsigned)q->peer.uid};
        rexec_fanout_record_stop(q->srv->ctx, q->fan, w.hosts, w.action, w.batch_id,
                                 w.client_user, w.client_uid, &e);
    }
}

static void on_call_done(void *ud, const rexec_result *r)
{
    serve_call *sc = ud;
    serve_req *q = sc->req;
    rx_serve_log_who w = who_of(&q->peer, q->op, q->id);
    w.traceparent = q->parsed.traceparent;
    rexec_result res = *r;
    size_t i = (size_t)(sc - q->calls);
    sc->call = NULL;
    rx_serve_log_call(&q->srv->log, q->srv->ctx, &w, r);
    if (!sc->gated)
        on_call_gate(sc, NULL, NULL); /* it ended before its gate: decided all the same */
    if (q->cl && !q->cancelled && rexec_fanout_retry(q->fan, i, r)) { /* it never reached it */
        call_begin(q, sc);
        return;
    }
    if (approval_hold(sc, r))
        return;
    fanout_host_done(q, i, &res);
    send_result(q, &res);
    if (++q->finished == q->n && q->pins == 0)
        req_done(q);
    else if (q->finished < q->n)
        req_launch(q);
}

/* One host's call; 1 when it could not start (on_call_done has reported it, and q may be gone). */
static int call_begin(serve_req *q, serve_call *sc)
{
    rexec_callbacks cb = {.on_output = on_call_output, .on_done = on_call_done, .ud = sc,
                          .on_gate = on_call_gate};
    rexec_request req = q->view;
    rexec_error e;
    req.host = sc->host;
    req.start_delay_ms = rexec_fanout_delay_ms(q->fan, (size_t)(sc - q->calls)); /* a retry */
    if (rexec_call_start(q->srv->ctx, &req, &cb, &sc->call, &e) != 0) {
        rexec_result r = rexec_result_not_started(sc->host, req.action, e.code, e.msg);
        on_call_done(sc, &r);
        return 1;
    }
    if (q->cl && q->cl->throttled && sc->call)
        rexec_call_pause(sc->call);
    return 0;
}

/* The fan-out crossed its failure threshold: every host not started reports so, none starts. */
static void req_drop_stopped(serve_req *q)
{
    size_t never = q->n - q->started;
    q->n = q->started;
    for (size_t i = 0; i < never; i++) {
        size_t k = q->started + i;
        rexec_fanout_next(q->fan, k); /* marks it skipped */
        rexec_result r = rexec_fanout_skipped(q->fan, k, q->calls[k].host, q->view.action);
        send_result(q, &r);
    }
    if (q->finished == q->n)
        req_done(q);
}

static void req_launch(serve_req *q)
{
    int parallel = q->parallel > 0 ? q->parallel : q->srv->ctx->ws->limits.parallel;
    while (q->started < q->n && (int)(q->started - q->finished) < parallel && q->cl) {
        int go = rexec_fanout_next(q->fan, q->started);
        if (go == REXEC_FANOUT_WAIT) /* a later batch: it starts when this one has ended */
            return;
        if (go == REXEC_FANOUT_SKIP) {
            req_drop_stopped(q);
            return;
        }
        if (call_begin(q, &q->calls[q->started++]))
            return; /* on_call_done launched the rest */
    }
}

static void on_check_done(void *ud, const rexec_check_result *r)
{
    serve_call *sc = ud;
    serve_req *q = sc->req;
    cJSON *o = rx_check_json(r);
    if (o) {
        add_head(o, q->id, "check");
        client_send(q->cl, o);
        cJSON_Delete(o);
    }
    if (r->exit_status > q->worst)
        q->worst = r->exit_status;
    if (++q->finished == q->n)
        req_done(q);
}

static serve_req *req_new(serve_client *cl, const cJSON *root, const char *op)
{
    serve_req *q = calloc(1, sizeof(*q));
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (q == NULL)
        return NULL;
    q->srv = cl->srv;
    rx_spool_init(&q->spool);
    q->id = id ? cJSON_Duplicate(id, 1) : NULL;
    if ((q->op = strdup(op)) == NULL || (id && q->id == NULL)) {
        cJSON_Delete(q->id);
        free(q->op);
        free(q);
        return NULL;
    }
    q->cl = cl;
    q->peer = cl->peer;
    q->t0 = uv_hrtime();
    q->next = cl->reqs;
    cl->reqs = q;
    cl->n_reqs++;
    cl->srv->reqs_alive++;
    return q;
}

/* TARGETS from "targets", else the request's "host". */
static int req_targets(serve_req *q, const cJSON *root, const char *host, rexec_error *err)
{
    const char *targets = host;
    int r = rx_json_get_string(root, "targets", "", 0, &targets, REXEC_EREQUEST, err);
    if (r)
        return r;
    if (targets == NULL)
        return rx_fail(err, REXEC_EREQUEST, "targets: missing (a host, h1,h2 or @group)");
    /* as on the command line: targets decide where the call goes, a host naming another is a
     * mistake, not a choice between the two */
    if (host && strcmp(host, targets) != 0)
        return rx_fail(err, REXEC_EREQUEST,
                       "targets \"%s\" differs from the request's host \"%s\"", targets, host);
    if ((r = rexec_ctx_targets(q->srv->ctx, targets, &q->hosts, &q->n, err)) != 0)
        return r;
    q->calls = calloc(q->n, sizeof(*q->calls));
    if (q->calls == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    for (size_t i = 0; i < q->n; i++)
        q->calls[i] = (serve_call){.req = q, .host = q->hosts[i]};
    q->listed = q->n;
    return 0;
}

/* Tells the client which hosts will report, before any output arrives; for a streamed stdin,
 * that its pieces may come raw ("bytes"), which a serve older than that does not say. */
static void send_accepted(serve_req *q, int streamed)
{
    cJSON *o = reply(q, "accepted"), *hosts = cJSON_CreateArray();
    for (size_t i = 0; i < q->n; i++)
        cJSON_AddItemToArray(hosts, cJSON_CreateString(q->hosts[i]));
    cJSON_AddItemToObject(o, "hosts", hosts);
    if (streamed)
        cJSON_AddTrueToObject(o, "stdin_bytes");
    client_send(q->cl, o);
    cJSON_Delete(o);
}

/* ---- streamed stdin (docs/serve-protocol.md, "Streaming stdin") ------------------------------ */

static void req_drop_unstarted(serve_req *q, int code, const char *why);

/* ---- approvals: a request held for its challenge's decision ---------------------------------- */

/* "wait_approval_s": N (run only), 0 < N <= limits.approval_ttl_s. */
static int approval_wait_parse(serve_req *q, const cJSON *root, rexec_error *err)
{
    double n = 0;
    int64_t ttl = rx_approvals_ttl(q->srv->ctx->ws);
    int r = rx_json_get_number(root, "wait_approval_s", "", 0, &n, REXEC_EREQUEST, err);
    if (r != 0 || cJSON_GetObjectItemCaseSensitive(root, "wait_approval_s") == NULL)
        return r;
    if (!(n > 0 && n <= (double)ttl))
        return rx_fail(err, REXEC_EREQUEST, "wait_approval_s: from 0 (excluded) to %lld s, the "
                       "challenge's lifetime (limits.approval_ttl_s)", (long long)ttl);
    /* a batch whose hosts are held never ends, so the next would never start: one decision
     * for a fan-out in batches is asked for without waiting (75), then run with grant_id */
    if (cJSON_GetObjectItemCaseSensitive(root, "batch") != NULL ||
        cJSON_GetObjectItemCaseSensitive(root, "canary") != NULL)
        return rx_fail(err, REXEC_EREQUEST, "wait_approval_s: exclusive with batch and canary "
                       "(held hosts would keep the next batch from starting)");
    q->wait_approval_s = n;
    return 0;
}

/* {"type":"challenge"}: the request is held until an approver decides. */
static void approval_announce(serve_req *q)
{
    rx_challenge c;
    rexec_error e;
    char t[32];
    cJSON *o = reply(q, "challenge"), *hosts = cJSON_CreateArray();
    rx_json_add_str(o, "challenge_id", q->challenge);
    for (size_t i = 0; i < q->n; i++)
        if (q->calls[i].needs)
            cJSON_AddItemToArray(hosts, cJSON_CreateString(q->calls[i].host));
    cJSON_AddItemToObject(o, "hosts", hosts);
    if (rx_approvals_load(q->srv->ctx->ws, q->challenge, &c, &e) == 0) {
        rx_approval_time_str(c.expires, t);
        rx_json_add_str(o, "expires", t);
        rx_challenge_free(&c);
    }
    cJSON_AddNumberToObject(o, "wait_s", q->wait_approval_s);
    client_send(q->cl, o);
    cJSON_Delete(o);
}

static void approval_decided(void *ud, int approved, const char *why);

/* Every host's gate has decided: the request's challenge (one for a fan-out) goes to the
 * watchers and the notify program, and a waiting request is held for its decision. */
static void approval_all_gated(serve_req *q)
{
    rexec_server *s = q->srv;
    if (q->gating_batch)
        rx_hub_batch_end(s->hub, q->view.batch_id);
    q->gating_batch = 0;
    if (q->challenge[0] == 0)
        return;
    rx_hub_pending(s->hub, q->challenge);
    if (q->wait_approval_s <= 0 || q->verdict != 0 || q->cl == NULL)
        return;
    approval_announce(q);
    if (rx_hub_wait(s->hub, q->challenge, q->wait_approval_s, approval_decided, q) == 0)
        q->waiting = 1;
    else
        approval_decided(q, 0, "out of memory: nothing ran");
}

static void on_call_gate(void *ud, const char *reason, const char *challenge_id)
{
    serve_call *sc = ud;
    serve_req *q = sc->req;
    if (sc->gated)
        return; /* a held host started again with the grant */
    sc->gated = 1;
    sc->needs = reason != NULL && strcmp(reason, "REQUIRES_APPROVAL") == 0;
    if (challenge_id != NULL && q->challenge[0] == 0)
        snprintf(q->challenge, sizeof(q->challenge), "%s", challenge_id);
    if (++q->gated == q->n)
        approval_all_gated(q);
}

/* A held host starts again, with the request's grant. */
static void approval_rerun(serve_call *sc)
{
    serve_req *q = sc->req;
    rexec_callbacks cb = {.on_output = on_call_output, .on_done = on_call_done, .ud = sc,
                          .on_gate = on_call_gate};
    rexec_request req = q->view;
    rexec_error e;
    req.host = sc->host;
    req.grant_id = q->challenge;
    if (rexec_call_start(q->srv->ctx, &req, &cb, &sc->call, &e) != 0) {
        rexec_result r = rexec_result_not_started(sc->host, req.action, e.code, e.msg);
        on_call_done(sc, &r);
        return;
    }
    if (q->cl && q->cl->throttled && sc->call)
        rexec_call_pause(sc->call);
}

/* A held host's end without running: denied, withdrawn, expired, cancelled. */
static void approval_fail(serve_call *sc, int code, const char *why)
{
    serve_req *q = sc->req;
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s: %s", sc->host, why);
    rexec_result r = rexec_result_not_started(sc->host, q->view.action, code, msg);
    fanout_host_done(q, (size_t)(sc - q->calls), &r);
    send_result(q, &r);
    q->finished++;
}

/* The held hosts go on: each runs with the grant, or ends with why. q may be gone after. */
static void approval_resolve(serve_req *q, int code)
{
    q->pins++;
    for (size_t i = 0; i < q->n; i++) {
        serve_call *sc = &q->calls[i];
        if (!sc->held)
            continue;
        sc->held = 0;
        q->waiting_hosts--;
        if (q->verdict == 1 && q->cl != NULL)
            approval_rerun(sc);
        else
            approval_fail(sc, code, q->why ? q->why : "not approved: nothing ran");
    }
    if (--q->pins == 0 && q->finished == q->n)
        req_done(q);
}

static void approval_decided(void *ud, int approved, const char *why)
{
    serve_req *q = ud;
    q->waiting = 0;
    q->verdict = approved ? 1 : 2;
    free(q->why);
    q->why = approved ? NULL : strdup(why);
    approval_resolve(q, REXEC_EDENIED);
}

/* wait_approval_s: a host's REQUIRES_APPROVAL result is held (1) until the decision, or dealt
 * with now when the decision came first. 0: report it as it is. */
static int approval_hold(serve_call *sc, const rexec_result *r)
{
    serve_req *q = sc->req;
    if (q->wait_approval_s <= 0 || r->reason == NULL ||
        strcmp(r->reason, "REQUIRES_APPROVAL") != 0 || r->challenge_id == NULL ||
        strcmp(r->challenge_id, q->challenge) != 0 || q->verdict == 2)
        return 0;
    sc->held = 1;
    q->waiting_hosts++;
    if (q->verdict == 1) /* approved before this host's refusal came back */
        approval_resolve(q, REXEC_EDENIED);
    else if (q->finished < q->n)
        req_launch(q);
    return 1;
}

/* The caller left or cancelled while hosts were held: the challenge is withdrawn, and they end
 * as cancelled. 1 when that ended the request (q is gone). */
static int approval_abandon(serve_req *q, const char *why)
{
    if (q->wait_approval_s <= 0 || q->challenge[0] == 0 || q->verdict != 0)
        return 0;
    if (q->waiting)
        rx_hub_unwait(q->srv->hub, q);
    q->waiting = 0;
    q->verdict = 2;
    q->why = strdup("cancelled before it started (the approval wait was withdrawn)");
    rx_hub_withdraw(q->srv->hub, q->challenge, why);
    if (q->waiting_hosts == 0)
        return 0;
    size_t left = q->n - q->finished - q->waiting_hosts;
    approval_resolve(q, REXEC_ECANCELLED);
    return left == 0; /* approval_resolve ended it */
}

static int stdin_stream_check(const serve_req *q, int streamed, rexec_error *err)
{
    if (streamed && q->parsed.has_stdin)
        return rx_fail(err, REXEC_EREQUEST, "stdin_stream: exclusive with stdin and stdin_base64 "
                                            "(the stdin comes in \"stdin\" lines instead)");
    return 0;
}

static void on_wait_closed(uv_handle_t *h)
{
    serve_wait *w = h->data;
    rexec_server *s = w->srv;
    free(w);
    s->handles--;
    server_maybe_done(s);
}

static void wait_end(serve_req *q)
{
    if (q->wait == NULL)
        return;
    q->wait->q = NULL;
    uv_close((uv_handle_t *)&q->wait->timer, on_wait_closed);
    q->wait = NULL;
}

static void on_stdin_stalled(uv_timer_t *t)
{
    serve_wait *w = t->data;
    char why[160];
    if (w->q == NULL)
        return;
    snprintf(why, sizeof(why), "stdin: nothing arrived for %.10g s (a streamed stdin must keep "
             "coming until its \"eof\"): nothing ran", w->srv->stdin_timeout_s);
    req_drop_unstarted(w->q, REXEC_EREQUEST, why);
}

static void wait_touch(serve_req *q)
{
    uv_timer_start(&q->wait->timer, on_stdin_stalled, (uint64_t)(q->srv->stdin_timeout_s * 1000),
                   0);
}

static int wait_start(serve_req *q)
{
    serve_wait *w = calloc(1, sizeof(*w));
    if (w == NULL || uv_timer_init(q->srv->ctx->loop, &w->timer) != 0) {
        free(w);
        return -1;
    }
    w->timer.data = w;
    w->q = q;
    w->srv = q->srv;
    q->srv->handles++;
    q->wait = w;
    wait_touch(q);
    return 0;
}

/* Its stdin is all in: the calls start, each reading the spool like `rexec run --stdin FILE`. */
static void stdin_complete(serve_req *q)
{
    wait_end(q);
    q->view.stdin_path = q->spool.path;
    req_launch(q);
}

static serve_req *stdin_target(serve_client *cl, const cJSON *target)
{
    for (serve_req *q = cl->reqs; q; q = q->next)
        if (q->wait && q->id && cJSON_Compare(q->id, target, 1))
            return q;
    return NULL;
}

/* A piece that cannot be taken ends its request at once, nothing run. */
static void stdin_refused(serve_req *q, int code, const rexec_error *err)
{
    char why[sizeof(err->msg) + 16];
    snprintf(why, sizeof(why), "%s: nothing ran", err->msg);
    req_drop_unstarted(q, code, why);
}

static void client_desync(serve_client *cl, const char *why);

/* "bytes": N says that N raw bytes follow the line. Returns 0 with cl->raw_left set, or -1 when N
 * is not a count serve can take: then serve cannot tell where the next line starts, and the
 * connection reads nothing more (client_desync). */
static int stdin_raw_count(serve_client *cl, const cJSON *bytes)
{
    double v = cJSON_IsNumber(bytes) ? bytes->valuedouble : -1;
    if (v < 1 || v > (double)SERVE_RAW_MAX || v != (double)(uint64_t)v) {
        char m[160];
        snprintf(m, sizeof(m), "stdin: bytes must be a whole number from 1 to %llu: the raw "
                 "bytes after it cannot be told from the next line, so this connection reads "
                 "nothing more", (unsigned long long)SERVE_RAW_MAX);
        client_desync(cl, m);
        return -1;
    }
    cl->raw_left = (uint64_t)v;
    return 0;
}

/* {"op":"stdin","target":ID,"data"|"data_base64"|"bytes":…,"eof":true}: the next piece of a
 * "stdin_stream" request's stdin, in the line or (bytes) as that many raw bytes after it. A line
 * that names no waiting request is an error line (its raw bytes are read and dropped); a piece
 * that cannot be taken (bad base64, past limits.max_stdin_bytes, disk full) ends that request
 * at once, nothing run, each host's result saying why. Success is silent. */
static int do_stdin(serve_client *cl, const cJSON *root, rexec_error *err)
{
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(root, "target");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(root, "bytes");
    serve_req *q = target ? stdin_target(cl, target) : NULL;
    int eof = 0, present = 0, r;
    if (bytes != NULL && stdin_raw_count(cl, bytes) != 0)
        return 0; /* said, and the connection is ending */
    if (target == NULL)
        return rx_fail(err, REXEC_EREQUEST, "target: missing (the id of the \"stdin_stream\" "
                                            "request this stdin belongs to)");
    if (q == NULL) {
        char *t = cJSON_PrintUnformatted(target);
        r = rx_fail(err, REXEC_EREQUEST, "stdin: no request %.64s of this connection is waiting "
                    "for its stdin (not sent with \"stdin_stream\": true, or already ended)",
                    t ? t : "?");
        free(t);
        return r;
    }
    rx_buf chunk;
    rx_buf_init(&chunk, SERVE_LINE_MAX);
    if ((r = rx_serve_check_keys(root, "stdin", err)) == 0 &&
        (r = rx_json_get_bool(root, "eof", "", 0, &eof, REXEC_EREQUEST, err)) == 0 &&
        (r = rx_request_bytes(root, "data", "", &chunk, &present, err)) == 0 && bytes && present)
        r = rx_fail(err, REXEC_EREQUEST, "stdin: bytes is exclusive with data and data_base64");
    if (r == 0 && !bytes)
        r = rx_spool_add(&q->spool, chunk.data, chunk.len, err);
    rx_buf_free(&chunk);
    if (r != 0) {
        stdin_refused(q, r, err);
        return 0;
    }
    if (bytes) { /* the piece follows: stdin_raw_take, then stdin_raw_end */
        cl->raw_target = cJSON_Duplicate(target, 1);
        cl->raw_eof = eof;
        if (cl->raw_target == NULL) { /* q may be gone after this */
            rx_fail(err, REXEC_ENOMEM, "out of memory");
            stdin_refused(q, REXEC_ENOMEM, err);
        } else {
            wait_touch(q);
        }
    } else if (eof) {
        stdin_complete(q);
    } else {
        wait_touch(q);
    }
    return 0;
}

/* Raw bytes of a piece, as they arrive: into the spool of the request they go to, if it is
 * still waiting for them (it may have ended meanwhile: then they are dropped). */
static void stdin_raw_take(serve_client *cl, const char *p, size_t n)
{
    serve_req *q = cl->raw_target ? stdin_target(cl, cl->raw_target) : NULL;
    rexec_error err = {0};
    int r;
    if (q == NULL)
        return;
    if ((r = rx_spool_add(&q->spool, p, n, &err)) != 0) {
        cJSON_Delete(cl->raw_target);
        cl->raw_target = NULL;
        stdin_refused(q, r, &err);
        return;
    }
    wait_touch(q);
}

static void stdin_raw_end(serve_client *cl)
{
    serve_req *q = cl->raw_target ? stdin_target(cl, cl->raw_target) : NULL;
    if (q != NULL && cl->raw_eof)
        stdin_complete(q);
    cJSON_Delete(cl->raw_target);
    cl->raw_target = NULL;
    cl->raw_eof = 0;
}

/* A client that half-closes cannot send the rest of a streamed stdin; nor can one whose stream
 * serve lost step with. */
static void stdin_cut_short(serve_client *cl, const char *why)
{
    for (serve_req *q = cl->reqs, *next; q; q = next) {
        next = q->next;
        if (q->wait)
            req_drop_unstarted(q, REXEC_EREQUEST, why);
    }
}

static int start_run(serve_client *cl, const cJSON *root, const char *op, rexec_error *err)
{
    long long parallel = 0;
    int streamed = 0;
    serve_req *q = req_new(cl, root, op);
    const char *grant = NULL;
    int r;
    if (q == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if ((r = rx_request_from_serve(root, op, &q->parsed, err)) != 0 ||
        (r = rx_json_get_string(root, "grant_id", "", 0, &grant, REXEC_EREQUEST, err)) != 0 ||
        (r = rx_json_get_bool(root, "stream", "", 0, &q->stream, REXEC_EREQUEST, err)) != 0 ||
        (r = rx_json_get_int(root, "parallel", "", 0, 1, 4096, &parallel, REXEC_EREQUEST, err)) ||
        (r = rx_json_get_bool(root, "stdin_stream", "", 0, &streamed, REXEC_EREQUEST, err)) ||
        (r = approval_wait_parse(q, root, err)) != 0 ||
        (r = stdin_stream_check(q, streamed, err)) != 0 ||
        (r = rx_request_view(&q->parsed, &q->view, &q->params)) != 0 ||
        (r = req_targets(q, root, q->parsed.host, err)) != 0 ||
        (streamed && (r = rx_spool_open(&q->spool, q->srv->ctx->ws->dir,
                                        q->srv->ctx->ws->limits.max_stdin_bytes, err)) != 0)) {
        req_unlink(q);
        req_free(q);
        return r == REXEC_ENOMEM ? rx_fail(err, r, "out of memory") : r;
    }
    /* the grant id lives in the tree, which goes after this line: keep a copy */
    q->view.grant_id = grant ? (q->grant = strdup(grant)) : NULL;
    if (grant && q->grant == NULL) {
        req_unlink(q);
        req_free(q);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    q->parallel = (int)parallel;
    if (q->n > 1 && rexec_batch_id_new(q->batch) == 0)
        q->view.batch_id = q->batch;
    rx_fanout_who fw = {q->hosts, q->n, q->view.action, q->view.batch_id, cl->peer.user,
                        (unsigned)cl->peer.uid};
    if ((r = rx_serve_fanout_new(q->srv->ctx, root, &fw, &q->fan, err)) != 0) {
        req_unlink(q);
        req_free(q);
        return r;
    }
    q->view.eval_only = strcmp(op, "eval") == 0;
    if (q->view.batch_id && !q->view.eval_only)
        q->gating_batch = rx_hub_batch_begin(q->srv->hub, q->view.batch_id) == 0;
    q->view.capture = 1;
    q->view.client_user = cl->peer.user;
    q->view.client_uid = (unsigned)cl->peer.uid;
    q->held = rx_ctx_hold_hosts(q->srv->ctx, q->hosts, q->n, &q->n_held);
    send_accepted(q, streamed);
    if (!streamed)
        req_launch(q);
    else if (wait_start(q) != 0)
        req_drop_unstarted(q, REXEC_ENOMEM, "out of memory");
    return 0;
}

char *rexec_serve_keys_json(void)
{
    return rx_serve_keys_json();
}

static int start_check(serve_client *cl, const cJSON *root, rexec_error *err)
{
    serve_req *q;
    int r = rx_serve_check_keys(root, "check", err);
    if (r != 0)
        return r;
    if ((q = req_new(cl, root, "check")) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if ((r = req_targets(q, root, NULL, err)) != 0) {
        req_unlink(q);
        req_free(q);
        return r;
    }
    /* Every host reports, also one whose check could not start: otherwise the request never
     * got its "done" and rexec_server_stop waited for it for ever. q may be gone after the
     * last report: count first. */
    size_t n = q->n;
    for (size_t i = 0; i < n; i++) {
        rexec_error e;
        if (rexec_check_start(q->srv->ctx, q->hosts[i], on_check_done, &q->calls[i], &e) != 0) {
            rexec_check_result cr = {.host = q->hosts[i], .err = e.code, .error = e.msg,
                                     .exit_status = rexec_err_exit_code(e.code)};
            on_check_done(&q->calls[i], &cr);
        }
    }
    return 0;
}

/* Every host not started yet reports "HOST: why" as not run, so every host listed in
 * "accepted" gets its result line; no more start. q is gone when this was its last host. */
static void req_drop_unstarted(serve_req *q, int code, const char *why)
{
    size_t never = q->n - q->started;
    wait_end(q);
    q->n = q->started;
    for (size_t i = 0; i < never; i++) {
        serve_call *sc = &q->calls[q->started + i];
        char msg[512];
        snprintf(msg, sizeof(msg), "%s: %s", sc->host, why);
        rexec_result r = rexec_result_not_started(sc->host, q->view.action, code, msg);
        send_result(q, &r);
    }
    if (q->finished == q->n)
        req_done(q);
}

/* Cancels what runs; hosts not started yet report "cancelled before it started" at once. */
static void req_cancel(serve_req *q)
{
    q->cancelled = 1;
    if (approval_abandon(q, q->cl ? "the caller cancelled the request"
                                   : "the caller disconnected"))
        return; /* that was its last host: it is done */
    for (size_t i = 0; i < q->started; i++)
        if (q->calls[i].call)
            rexec_call_cancel(q->calls[i].call);
    req_drop_unstarted(q, REXEC_ECANCELLED, "cancelled before it started");
}

static int do_cancel(serve_client *cl, const cJSON *root, rexec_error *err)
{
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(root, "target");
    int r = rx_serve_check_keys(root, "cancel", err), found = 0;
    if (r != 0)
        return r;
    if (target == NULL)
        return rx_fail(err, REXEC_EREQUEST, "target: missing (the id of the request to cancel)");
    for (serve_req *q = cl->reqs, *next; q; q = next) {
        next = q->next;
        if (q->id && cJSON_Compare(q->id, target, 1) && strcmp(q->op, "check") != 0) {
            found = 1;
            req_cancel(q);
        }
    }
    cJSON *o = reply_to(cJSON_GetObjectItemCaseSensitive(root, "id"), "cancelled");
    cJSON_AddItemToObject(o, "target", cJSON_Duplicate(target, 1));
    cJSON_AddBoolToObject(o, "found", found);
    client_send(cl, o);
    cJSON_Delete(o);
    return 0;
}

static int do_simple(serve_client *cl, const cJSON *root, const char *op, rexec_error *err)
{
    int r = rx_serve_check_keys(root, op, err);
    if (r != 0)
        return r;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    int ping = strcmp(op, "ping") == 0;
    cJSON *o = reply_to(id, ping ? "pong" : "list");
    if (ping) {
        cJSON_AddStringToObject(o, "version", rexec_version());
        cJSON_AddNumberToObject(o, "pid", getpid());
    } else {
        char *text = rexec_ctx_list_json(cl->srv->ctx, op);
        cJSON_AddItemToObject(o, op, text ? cJSON_Parse(text) : cJSON_CreateArray());
        free(text);
    }
    client_send(cl, o);
    cJSON_Delete(o);
    return 0;
}

/* {"op":"reload"}: rexec.json again; a file that does not load is refused with its error and the
 * running configuration stays (rexec_ctx_reload). */
static int do_reload(serve_client *cl, const cJSON *root, rexec_error *err)
{
    size_t warm = 0;
    int r = rx_serve_check_keys(root, "reload", err);
    if (r == 0)
        r = rexec_ctx_reload(cl->srv->ctx, &warm, err);
    if (r != 0)
        return r;
    cJSON *o = reply_to(cJSON_GetObjectItemCaseSensitive(root, "id"), "reloaded");
    cJSON_AddNumberToObject(o, "hosts", (double)cl->srv->ctx->ws->n_hosts);
    cJSON_AddNumberToObject(o, "actions", (double)cl->srv->ctx->ws->n_actions);
    cJSON_AddNumberToObject(o, "kept_warm", (double)warm);
    client_send(cl, o);
    cJSON_Delete(o);
    return 0;
}

/* The metrics text with serve's own gauges (its clients by state, its requests) counted now. */
static int server_metrics_text(void *ud, rx_buf *out)
{
    rexec_server *s = ud;
    rx_metrics_gauges g = {0};
    static const int cls[] = {[CL_READING] = RX_MCLI_READING, [CL_DRAINING] = RX_MCLI_DRAINING,
                              [CL_FLUSHING] = RX_MCLI_FLUSHING, [CL_CLOSING] = RX_MCLI_CLOSING,
                              [CL_CLOSED] = RX_MCLI_CLOSING};
    for (serve_client *cl = s->clients; cl; cl = cl->next)
        g.serve_clients[cls[cl->state]]++;
    g.requests_in_flight = s->reqs_alive;
    return rx_serve_metrics_render(s->ctx, &g, out);
}

/* {"op":"metrics"}: the Prometheus text (docs/metrics.md) in one line's "text". */
static int do_metrics(serve_client *cl, const cJSON *root, rexec_error *err)
{
    rx_buf b;
    int r = rx_serve_check_keys(root, "metrics", err);
    if (r != 0)
        return r;
    rx_buf_init(&b, (size_t)1 << 20);
    if (server_metrics_text(cl->srv, &b) != 0) {
        rx_buf_free(&b);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    cJSON *o = reply_to(cJSON_GetObjectItemCaseSensitive(root, "id"), "metrics");
    cJSON_AddStringToObject(o, "format", "text/plain; version=0.0.4");
    cJSON_AddStringToObject(o, "text", (const char *)b.data);
    client_send(cl, o);
    cJSON_Delete(o);
    rx_buf_free(&b);
    return 0;
}

/* The verbs of the workspace as loaded now (a reload may have changed serve.clients). */
static unsigned client_verbs(serve_client *cl)
{
    const rexec_ctx *ctx = cl->srv->ctx;
    if (cl->verbs_gen != ctx->reloads) {
        cl->verbs = rx_peer_verbs(ctx->ws, &cl->peer);
        cl->verbs_gen = ctx->reloads;
    }
    return cl->verbs;
}

/* An op this client was not granted is refused (77) naming what it may do; an unknown op goes
 * on to the "unknown op" error. */
static int client_may(serve_client *cl, const char *op, rexec_error *err)
{
    char have[128];
    unsigned need = rx_serve_op_verb(op), verbs = client_verbs(cl);
    if (need == 0 || (verbs & need) != 0)
        return 0;
    return rx_fail(err, REXEC_EDENIED, "user %s (uid %u) may not use \"%s\" here: serve.clients "
                   "grants it %s", cl->peer.user, (unsigned)cl->peer.uid, op,
                   rx_serve_verbs_str(verbs, have, sizeof(have)));
}

/* The ops that answer at once (and every refused line) are logged here; run, eval and check
 * when their "done" goes out. */
static void log_line_end(serve_client *cl, const cJSON *root, const char *op, int r,
                         const rexec_error *e, uint64_t t0)
{
    /* a stdin piece taken is not worth a line: a streamed GiB is some 20,000 of them */
    int later = r == 0 && op != NULL && (strcmp(op, "run") == 0 || strcmp(op, "eval") == 0 ||
                                         strcmp(op, "check") == 0 || strcmp(op, "stdin") == 0);
    if (later)
        return;
    const cJSON *id = root && cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "id")
                                                   : NULL;
    rx_serve_log_who w = who_of(&cl->peer, op, id);
    rx_serve_log_request(&cl->srv->log, cl->srv->ctx, &w, 0, r ? rexec_err_exit_code(r) : 0,
                         ms_since(t0), r ? e->msg : NULL);
}

static void handle_line(serve_client *cl, const char *line, size_t len)
{
    cJSON *root = NULL;
    rexec_error e = {0};
    const char *op = NULL;
    uint64_t t0 = uv_hrtime();
    int r = rx_json_parse_strict(line, len, SERVE_LINE_MAX, REXEC_EREQUEST, &root, &e);
    if (r == 0)
        r = rx_json_want(root, "", cJSON_Object, REXEC_EREQUEST, &e);
    if (r == 0)
        r = rx_json_get_string(root, "op", "", 1, &op, REXEC_EREQUEST, &e);
    if (r == 0)
        r = client_may(cl, op, &e);
    if (r == 0 && cl->n_reqs >= SERVE_MAX_REQS && (strcmp(op, "run") == 0 ||
                                                   strcmp(op, "eval") == 0 ||
                                                   strcmp(op, "check") == 0))
        r = rx_fail(&e, REXEC_EREQUEST, "too many requests in flight on this connection (at "
                                        "most %d): wait for a \"done\"", SERVE_MAX_REQS);
    else if (r == 0 && (strcmp(op, "run") == 0 || strcmp(op, "eval") == 0))
        r = start_run(cl, root, op, &e);
    else if (r == 0 && strcmp(op, "check") == 0)
        r = start_check(cl, root, &e);
    else if (r == 0 && strcmp(op, "cancel") == 0)
        r = do_cancel(cl, root, &e);
    else if (r == 0 && strcmp(op, "stdin") == 0)
        r = do_stdin(cl, root, &e);
    else if (r == 0 && strcmp(op, "reload") == 0)
        r = do_reload(cl, root, &e);
    else if (r == 0 && (strcmp(op, "approvals") == 0 || strcmp(op, "approve") == 0 ||
                        strcmp(op, "deny") == 0 || strcmp(op, "watch") == 0))
        r = rx_hub_op(cl->srv->hub, cl, &cl->peer, root, op, &e);
    else if (r == 0 && strcmp(op, "metrics") == 0)
        r = do_metrics(cl, root, &e);
    else if (r == 0 && (strcmp(op, "ping") == 0 || strcmp(op, "hosts") == 0 ||
                        strcmp(op, "actions") == 0 || strcmp(op, "groups") == 0))
        r = do_simple(cl, root, op, &e);
    else if (r == 0) {
        char ops[160];
        r = rx_fail(&e, REXEC_EREQUEST, "op: unknown \"%s\" (%s)", op,
                    rx_serve_keys_list(NULL, ops, sizeof(ops)));
    }
    if (r != 0)
        send_error(cl, root && cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "id")
                                                    : NULL,
                   r, e.msg);
    log_line_end(cl, root, op, r, &e, t0);
    cJSON_Delete(root);
}

/* ---- clients -------------------------------------------------------------------------------- */

static const char *const client_state_names[] = {"READING", "DRAINING", "FLUSHING", "CLOSING",
                                                 "CLOSED"};

/* Every change of a client's state goes through here: forward only, one step of the diagram at
 * the top of this file (a jump READING -> FLUSHING or -> CLOSING is allowed, never back). */
static void client_set_state(serve_client *cl, client_state to)
{
    if (to <= cl->state) {
        fprintf(stderr, "rexec serve: internal error: client %s -> %s\n",
                client_state_names[cl->state], client_state_names[to]);
        abort();
    }
    cl->state = to;
}

static void on_client_handle_closed(uv_handle_t *h)
{
    serve_client *cl = h->data;
    if (--cl->handles > 0)
        return;
    rexec_server *s = cl->srv;
    client_set_state(cl, CL_CLOSED);
    rx_buf_free(&cl->line);
    cJSON_Delete(cl->raw_target);
    free(cl->rbuf);
    free(cl);
    s->handles--;
    server_maybe_done(s);
}

static void client_close_handles(serve_client *cl)
{
    uv_close((uv_handle_t *)&cl->pipe, on_client_handle_closed);
    uv_close((uv_handle_t *)&cl->idle, on_client_handle_closed);
}

/* A client that leaves cancels its calls: the remote side stops them per the remote contract. */
static void client_close(serve_client *cl)
{
    if (!client_open(cl))
        return;
    client_set_state(cl, CL_CLOSING);
    rx_hub_forget(cl->srv->hub, cl);
    for (serve_client **pp = &cl->srv->clients; *pp; pp = &(*pp)->next)
        if (*pp == cl) {
            *pp = cl->next;
            break;
        }
    for (serve_req *q = cl->reqs, *next; q; q = next) {
        next = q->next;
        q->cl = NULL;
        if (strcmp(q->op, "check") != 0)
            req_cancel(q);
    }
    cl->reqs = NULL;
    if (cl->admitting)
        return; /* its socket is being asked who is there: admit_done closes the handles */
    client_close_handles(cl);
}

static void on_finished(uv_shutdown_t *req, int status)
{
    (void)status;
    client_close(req->data);
}

/* Closes a client after every queued line is written (uv_close would drop them). */
static void client_finish(serve_client *cl)
{
    if (cl->state >= CL_FLUSHING)
        return;
    client_set_state(cl, CL_FLUSHING);
    cl->shut.data = cl;
    if (uv_shutdown(&cl->shut, (uv_stream_t *)&cl->pipe, on_finished) != 0)
        client_close(cl);
}

static void on_idle(uv_timer_t *t)
{
    serve_client *cl = t->data;
    if (cl->reqs == NULL && !rx_hub_watching(cl->srv->hub, cl))
        client_close(cl);
}

static void touch(serve_client *cl)
{
    if (cl->srv->idle_s > 0)
        uv_timer_start(&cl->idle, on_idle, (uint64_t)(cl->srv->idle_s * 1000), 0);
}

/* One buffer a client, allocated once: libuv reads into it and on_read is done with it before
 * the next read. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    serve_client *cl = h->data;
    (void)suggested;
    if (cl->rbuf == NULL)
        cl->rbuf = malloc(SERVE_READ_BUF);
    b->base = cl->rbuf;
    b->len = cl->rbuf ? SERVE_READ_BUF : 0;
}

/* After a line: only its own bytes need wiping (it may hold stdin), since every line since the
 * last wipe went through here and the buffer only grows by appends in between. */
static void line_reset(serve_client *cl)
{
    if (cl->line.data)
        OPENSSL_cleanse(cl->line.data, cl->line.len);
    cl->line.len = 0;
}

/* Splits what arrived into lines, and the raw bytes of a stdin piece ("bytes") after its line.
 * An over-long line is answered with one error and skipped. */
static void feed_lines(serve_client *cl, const char *p, size_t n)
{
    while (n > 0 && cl->state == CL_READING) {
        if (cl->raw_left > 0) {
            size_t k = n < cl->raw_left ? n : (size_t)cl->raw_left;
            stdin_raw_take(cl, p, k);
            cl->raw_left -= k;
            p += k;
            n -= k;
            if (cl->raw_left == 0)
                stdin_raw_end(cl);
            continue;
        }
        const char *nl = memchr(p, '\n', n);
        size_t len = nl ? (size_t)(nl - p) : n;
        if (len > 0 && !cl->overlong && rx_buf_add(&cl->line, p, len) != 0) {
            cl->overlong = 1;
            char m[64];
            snprintf(m, sizeof(m), "request line longer than %d KiB", SERVE_LINE_MAX / 1024);
            send_error(cl, NULL, REXEC_EREQUEST, m);
        }
        if (nl == NULL)
            return;
        if (!cl->overlong && cl->line.len > 0)
            handle_line(cl, (const char *)cl->line.data, cl->line.len);
        line_reset(cl);
        cl->overlong = 0;
        p = nl + 1;
        n -= len + 1;
    }
}

/* READING -> DRAINING: nothing more is read from it (it half-closed, or its stream cannot be
 * followed); what it asked for runs to the end and is answered. */
static void client_stop_reading(serve_client *cl)
{
    if (cl->state != CL_READING)
        return;
    client_set_state(cl, CL_DRAINING);
    uv_read_stop((uv_stream_t *)&cl->pipe);
}

/* serve lost step with the client's stream (a raw piece it cannot size): one error line, then
 * nothing more is read; what runs finishes and reports, and the connection closes after. */
static void client_desync(serve_client *cl, const char *why)
{
    send_error(cl, NULL, REXEC_EREQUEST, why);
    client_stop_reading(cl);
    stdin_cut_short(cl, "stdin: the connection's stream could not be followed (a raw piece "
                        "without a valid \"bytes\"): nothing ran");
    if (cl->state == CL_DRAINING && cl->reqs == NULL)
        client_finish(cl);
}

/* EOF on a Unix stream socket is either a half-close (shutdown SHUT_WR: the client still
 * reads) or the client gone. Only a peer that closed both ways leaves POLLHUP (or POLLERR) on
 * our side. poll() finding nothing is not "gone": a half-closed client that reads slowly has a
 * full socket buffer, so POLLOUT is not set either, and it must still get all of its output. */
static int peer_gone(serve_client *cl)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) != 0)
        return 1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

/* A half-closed client gets the results of what it sent (a last line without '\n' counts as a
 * line), then the connection closes; a client that is gone has its calls cancelled. */
static void on_eof(serve_client *cl)
{
    if (peer_gone(cl)) {
        client_close(cl);
        return;
    }
    client_stop_reading(cl);
    if (!cl->overlong && cl->line.len > 0)
        handle_line(cl, (const char *)cl->line.data, cl->line.len);
    rx_buf_reset(&cl->line);
    if (client_open(cl))
        stdin_cut_short(cl, "stdin: the client closed its side of the connection before the "
                            "stdin's \"eof\": nothing ran");
    if (cl->state == CL_DRAINING && cl->reqs == NULL)
        client_finish(cl);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    serve_client *cl = st->data;
    if (n > 0) {
        touch(cl);
        feed_lines(cl, b->base, (size_t)n);
        OPENSSL_cleanse(b->base, (size_t)n); /* it may have held stdin */
    } else if (n == UV_EOF) {
        on_eof(cl);
    } else if (n < 0) {
        client_close(cl);
    }
}

/* The user running serve, and the users and groups serve.clients lists, may talk to it; anyone
 * else gets one line saying why, and the connection closes. 1 when refused. */
static int client_refuse(serve_client *cl)
{
    char m[256];
    if (cl->verbs != 0)
        return 0;
    snprintf(m, sizeof(m), "user %s (uid %u) is not admitted by this rexec serve (it admits its "
             "own user and serve.clients in rexec.json)", cl->peer.user, (unsigned)cl->peer.uid);
    send_error(cl, NULL, REXEC_EDENIED, m);
    rx_serve_log_who w = who_of(&cl->peer, NULL, NULL);
    rx_serve_log_request(&cl->srv->log, cl->srv->ctx, &w, 0, rexec_err_exit_code(REXEC_EDENIED),
                         0, m);
    client_finish(cl);
    return 1;
}

/* Who the peer is (SO_PEERCRED, then its user's name) and what it may do: NSS lookups
 * (getpwuid_r, getgrouplist, the names serve.clients lists) that may ask LDAP or sssd and wait,
 * so they run on libuv's thread pool and a slow directory does not stop every other client.
 * Safe there: the workspace is immutable and outlives serve (a reload retires it, the context
 * frees it), nothing on the loop touches peer or verbs before admit_done, and the socket stays
 * open until then (client_close waits), so its descriptor cannot be another connection's. */
#ifdef REXEC_UNITTEST
/* The test build only: REXEC_TEST_SERVE_ADMIT_GATE=PATH holds the first connection's lookups
 * until PATH exists (a directory that does not answer, tests/e2e/t_serve_faults.sh). The first
 * connection accepted, not the first work the pool runs: two works may start in either order. */
static void admit_test_gate(const serve_client *cl)
{
    const char *gate = getenv("REXEC_TEST_SERVE_ADMIT_GATE");
    if (gate == NULL || cl->admit_seq != 1)
        return;
    while (access(gate, F_OK) != 0)
        usleep(10000);
}
#else
#define admit_test_gate(cl) ((void)(cl))
#endif

static void admit_work(uv_work_t *w)
{
    serve_client *cl = w->data;
    admit_test_gate(cl);
    cl->admit_failed = rx_peer_get(cl->admit_fd, &cl->peer) != 0;
    if (!cl->admit_failed)
        cl->verbs = rx_peer_verbs(cl->admit_ws, &cl->peer);
}

/* The admission of a peer like this one (the same uid and gid, the same workspace), made in the
 * last SERVE_ADMIT_TTL_MS: into cl, with its own pid. 1 when found. */
static int admit_cached(serve_client *cl, const struct ucred *cred)
{
    rexec_server *s = cl->srv;
    uint64_t now = uv_now(s->ctx->loop);
    for (int i = 0; i < SERVE_ADMIT_CACHE; i++) {
        const admit_entry *e = &s->admits[i];
        if (e->ws == s->ctx->ws && e->ws != NULL && e->gen == s->ctx->reloads &&
            e->uid == cred->uid && e->gid == cred->gid && now < e->until) {
            cl->peer = e->peer;
            cl->peer.pid = cred->pid;
            cl->verbs = e->verbs;
            cl->admit_failed = 0;
            return 1;
        }
    }
    return 0;
}

static void admit_remember(serve_client *cl)
{
    rexec_server *s = cl->srv;
    if (cl->admit_ws != s->ctx->ws || cl->verbs_gen != s->ctx->reloads) /* a reload meanwhile:
                                                                         * the old workspace's */
        return;
    admit_entry *e = &s->admits[s->admit_next++ % SERVE_ADMIT_CACHE];
    *e = (admit_entry){.ws = cl->admit_ws, .gen = cl->verbs_gen, .uid = cl->peer.uid,
                       .gid = cl->peer.gid,
                       .until = uv_now(s->ctx->loop) + SERVE_ADMIT_TTL_MS, .peer = cl->peer,
                       .verbs = cl->verbs};
}

/* Admitted: it is read from now on. */
static void admit_done(uv_work_t *w, int status)
{
    serve_client *cl = w->data;
    int r;
    int looked_up = cl->admitting == 1; /* 2: from the cache */
    cl->admitting = 0;
    if (!client_open(cl)) { /* closed meanwhile (serve stopping) */
        client_close_handles(cl);
        return;
    }
    if (status != 0 || cl->admit_failed) {
        client_close(cl);
        return;
    }
    if (looked_up)
        admit_remember(cl);
    if (client_refuse(cl))
        return;
    touch(cl);
    if ((r = uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read)) != 0) {
        fprintf(stderr, "rexec serve: cannot read from a client: %s\n", uv_strerror(r));
        client_close(cl);
    }
}

static void client_admit(serve_client *cl)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) != 0) {
        client_close(cl);
        return;
    }
    cl->admit_fd = fd;
    cl->admit_seq = ++cl->srv->accepted;
    cl->admit_ws = cl->srv->ctx->ws;
    cl->verbs_gen = cl->srv->ctx->reloads; /* a reload meanwhile: client_verbs asks again */
    cl->admit.data = cl;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && admit_cached(cl, &cred)) {
        cl->admitting = 2;
        admit_done(&cl->admit, 0);
        return;
    }
    cl->admitting = 1;
    if (uv_queue_work(cl->srv->ctx->loop, &cl->admit, admit_work, admit_done) != 0) {
        admit_work(&cl->admit); /* no thread pool: here, as before */
        admit_done(&cl->admit, 0);
    }
}

/* A client's memory. The test build can be told to fail the first N of these
 * (REXEC_TEST_SERVE_NOMEM=N, tests/e2e/t_serve_faults.sh): out of memory cannot be induced
 * otherwise without failing everything else first. */
static serve_client *client_alloc(void)
{
#ifdef REXEC_UNITTEST
    static long fail_left = -1;
    if (fail_left < 0) {
        const char *v = getenv("REXEC_TEST_SERVE_NOMEM");
        fail_left = v ? strtol(v, NULL, 10) : 0;
    }
    if (fail_left > 0) {
        fail_left--;
        return NULL;
    }
#endif
    return calloc(1, sizeof(serve_client));
}

static void reject_connection(rexec_server *s);

static void on_reject_closed(uv_handle_t *h)
{
    rexec_server *s = h->data;
    s->reject_busy = 0;
    s->handles--;
    if (s->reject_due && !s->stopping) {
        s->reject_due = 0;
        reject_connection(s);
    }
    server_maybe_done(s);
}

/* A connection serve has no memory for is accepted and closed at once (the client reads EOF).
 * Left unaccepted, it would stop the listener for good: libuv stops watching a listening
 * socket until its pending connection is accepted. One rejection at a time (the handle is the
 * loop's until its close callback); the next waits there, the listener paused meanwhile. */
static void reject_connection(rexec_server *s)
{
    if (s->reject_busy) {
        s->reject_due = 1;
        return;
    }
    fprintf(stderr, "rexec serve: out of memory: a connection was closed at once\n");
    uv_pipe_init(s->ctx->loop, &s->reject, 0);
    s->reject.data = s;
    s->reject_busy = 1;
    s->handles++;
    uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&s->reject);
    uv_close((uv_handle_t *)&s->reject, on_reject_closed);
}

static void on_connection(uv_stream_t *server, int status)
{
    rexec_server *s = server->data;
    serve_client *cl;
    if (status < 0 || s->stopping)
        return;
    if ((cl = client_alloc()) == NULL) {
        reject_connection(s);
        return;
    }
    cl->srv = s;
    rx_buf_init(&cl->line, SERVE_LINE_MAX);
    uv_pipe_init(server->loop, &cl->pipe, 0);
    uv_timer_init(server->loop, &cl->idle);
    cl->pipe.data = cl->idle.data = cl;
    cl->handles = 2;
    s->handles++;
    cl->next = s->clients;
    s->clients = cl;
    if (uv_accept(server, (uv_stream_t *)&cl->pipe) != 0) {
        client_close(cl);
        return;
    }
    client_admit(cl);
}

/* ---- the server ----------------------------------------------------------------------------- */

/* The approvals hub reaches clients through these (serve_approvals.h). */
static int hub_send(void *cl, cJSON *o)
{
    return client_send(cl, o);
}

static size_t hub_queued(void *cl)
{
    return client_open(cl) ? client_queued(cl) : 0;
}

/* A watcher that fell behind: the line, then nothing more is read; it closes once written. */
static void hub_drop(void *cl, const char *why)
{
    serve_client *c = cl;
    fprintf(stderr, "rexec serve: user %s (uid %u): %s\n", c->peer.user, (unsigned)c->peer.uid,
            why);
    send_error(c, NULL, REXEC_ENOMEM, why);
    client_stop_reading(c);
    if (c->reqs == NULL)
        client_finish(c);
}

static const rx_hub_port hub_port = {hub_send, hub_queued, hub_drop};

static void on_hub_closed(void *ud)
{
    rexec_server *s = ud;
    s->hub = NULL;
    s->handles--;
    server_maybe_done(s);
}

/* A socket file left by a serve that died is removed; a live one (it accepts) is not ours to
 * take, and anything that is not a socket is refused. */
static int claim_path(const char *path, rexec_error *err)
{
    struct stat st;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return rx_fail(err, REXEC_EUSAGE, "socket path %s is longer than %zu bytes", path,
                       sizeof(sa.sun_path) - 1);
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : rx_fail(err, REXEC_EUSAGE, "%s: %s", path, strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return rx_fail(err, REXEC_EUSAGE, "%s exists and is not a socket: refusing to replace it",
                       path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    if (live)
        return rx_fail(err, REXEC_EUSAGE, "%s: another rexec serve is listening there", path);
    unlink(path);
    return 0;
}

/* systemd socket activation (sd_listen_fds(3)): LISTEN_PID is this process and LISTEN_FDS 1,
 * so fd 3 is a listening socket. Returns 3, or -1 when serve was not started that way. The
 * variables are removed so that nothing started later takes them for its own. */
static int activated_fd(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (pid == NULL || fds == NULL || strtol(pid, NULL, 10) != (long)getpid())
        return -1;
    int one = strcmp(fds, "1") == 0;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return one ? 3 : -2;
}

/* The activated socket must be a listening Unix stream socket; its path names it (and must be
 * --socket's when that is given too). */
static int activated_take(rexec_server *s, int fd, const char *want, rexec_error *err)
{
    struct sockaddr_un sa;
    socklen_t len = sizeof(sa);
    int type = 0, acc = 0;
    socklen_t il = sizeof(int);
    memset(&sa, 0, sizeof(sa));
    if (fd == -2)
        return rx_fail(err, REXEC_EUSAGE, "serve: systemd passed more than one socket "
                                          "(LISTEN_FDS): give the socket unit one ListenStream");
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sun_family != AF_UNIX ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &il) != 0 || type != SOCK_STREAM ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &il) != 0 || !acc || sa.sun_path[0] == 0)
        return rx_fail(err, REXEC_EUSAGE, "serve: the socket systemd passed (fd 3) is not a "
                                          "listening Unix stream socket with a path");
    if (want != NULL && strcmp(want, sa.sun_path) != 0)
        return rx_fail(err, REXEC_EUSAGE, "serve: --socket %s, but systemd passed %s", want,
                       sa.sun_path);
    if ((s->path = strdup(sa.sun_path)) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    s->activated = 1;
    return 0;
}

/* Where to listen: the socket systemd passed, else a fresh one at --socket. */
static int server_listen_setup(rexec_server *s, const rexec_server_opts *opts, rexec_error *err)
{
    int fd = activated_fd();
    if (fd != -1)
        return activated_take(s, fd, opts->socket_path, err);
    if (opts->socket_path == NULL)
        return rx_fail(err, REXEC_EUSAGE, "serve: --socket PATH is required (or start it from a "
                                          "systemd socket unit)");
    if ((s->path = strdup(opts->socket_path)) == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    return claim_path(s->path, err);
}

/* Takes the activated socket into the loop and listens on it. */
static int server_listen_activated(rexec_server *s, rexec_error *err)
{
    int r = uv_pipe_open(&s->listener, 3);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
    if (r != 0)
        rx_fail(err, REXEC_EUSAGE, "cannot listen on the socket systemd passed (%s): %s",
                s->path, uv_strerror(r));
    return r == 0 ? 0 : REXEC_EUSAGE;
}

int rexec_server_start(rexec_ctx *ctx, const rexec_server_opts *opts, rexec_server **out,
                       rexec_error *err)
{
    rexec_server *s = calloc(1, sizeof(*s));
    int r;
    if (s == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    s->ctx = ctx;
    rx_pool_set_runner_prestart(ctx->pool, 1); /* serve makes more calls: runners from the first */
    s->idle_s = opts->idle_timeout_s;
    s->stdin_timeout_s = opts->stdin_timeout_s > 0 ? opts->stdin_timeout_s : SERVE_STDIN_TIMEOUT_S;
    if ((r = rx_serve_log_init(&s->log, opts->log, err)) != 0 ||
        (r = rx_serve_ws_check(ctx->ws, err)) != 0 ||
        (r = server_listen_setup(s, opts, err)) != 0 ||
        (opts->metrics_file != NULL &&
         (r = rx_metrics_file_start(ctx->loop, opts->metrics_file,
                                    opts->metrics_interval_s > 0 ? opts->metrics_interval_s : 15,
                                    server_metrics_text, s, &s->metrics_file, err)) != 0)) {
        rx_serve_log_close(&s->log);
        free(s->path);
        free(s);
        return r;
    }
    uv_pipe_init(ctx->loop, &s->listener, 0);
    s->listener.data = s;
    s->handles = 1;
    if (s->activated) {
        if ((r = server_listen_activated(s, err)) != 0) {
            s->stopping = 1;
            uv_close((uv_handle_t *)&s->listener, on_listener_closed);
            return r;
        }
        goto listening;
    }
    /* Created 0600 from the start (umask), not chmod'ed after: no window for another user.
     * Bound, given its group and mode and listening under a temporary name beside the path,
     * then renamed into place (never over anything): a client that waits for the path to
     * appear and connects at once never finds it bound but not listening yet (ECONNREFUSED),
     * nor without its mode. Where the temporary name does not fit in sun_path or cannot be
     * bound, the path itself is, as before. (libuv unlinks the temporary name at close: gone.) */
    char tmp[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int n = snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", s->path, (long)getpid());
    const char *at = n > 0 && (size_t)n < sizeof(tmp) ? tmp : s->path;
    mode_t old = umask(0177);
    r = uv_pipe_bind(&s->listener, at);
    if (r != 0 && at != s->path) {
        at = s->path;
        r = uv_pipe_bind(&s->listener, at);
    }
    umask(old);
    if (r == 0 && (r = rx_serve_socket_access(ctx->ws, at, err)) != 0) {
        unlink(at);
        s->stopping = 1;
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
        return r;
    }
#ifdef REXEC_UNITTEST
    /* The test build only: REXEC_TEST_SERVE_LISTEN_DELAY_MS=N waits between the bind and the
     * listen, where a client that connects as soon as the path appears would be refused
     * (tests/e2e/t_serve_start.sh). */
    const char *delay = getenv("REXEC_TEST_SERVE_LISTEN_DELAY_MS");
    if (r == 0 && delay != NULL)
        usleep((useconds_t)strtol(delay, NULL, 10) * 1000);
#endif
    if (r == 0)
        r = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
    if (r == 0 && at != s->path &&
        renameat2(AT_FDCWD, at, AT_FDCWD, s->path, RENAME_NOREPLACE) != 0) {
        int e = errno;
        unlink(at);
        rx_fail(err, REXEC_EUSAGE, "cannot listen on %s: %s", s->path,
                e == EEXIST ? "another process created it meanwhile" : strerror(e));
        s->stopping = 1;
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
        return REXEC_EUSAGE;
    }
    if (r != 0) {
        rx_fail(err, REXEC_EUSAGE, "cannot listen on %s: %s", s->path, uv_strerror(r));
        /* The handle is the loop's until its close callback has run: s goes there (freeing it
         * here left the loop closing a freed handle). */
        s->stopping = 1;
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
        return REXEC_EUSAGE;
    }
listening:
    if ((s->hub = rx_hub_new(ctx, &hub_port)) != NULL)
        s->handles++;
    else /* serve goes on; the approval ops say they cannot */
        fprintf(stderr, "rexec serve: out of memory: approvals through serve are off\n");
    ctx->ws_check = rx_serve_ws_check; /* a reload must keep what serve admits safe */
    say_who(ctx->ws);
    *out = s;
    return 0;
}

/* Says at start who may connect; with one user, that approvals are then that user's word. */
static void say_who(const rx_ws *ws)
{
    const rx_serve_conf *sc = &ws->serve;
    char verbs[128];
    if (sc->n_clients == 0) {
        fprintf(stderr, "rexec serve: only uid %u (the user running serve) may connect. It can "
                "also approve, so approvals are only as strong as that user's discipline: run "
                "callers as another user listed in serve.clients (docs/gate.md, \"Two users\")\n",
                (unsigned)geteuid());
        return;
    }
    for (size_t i = 0; i < sc->n_clients; i++)
        fprintf(stderr, "rexec serve: admits %s %s: %s\n", sc->clients[i].user ? "user" : "group",
                sc->clients[i].user ? sc->clients[i].user : sc->clients[i].group,
                rx_serve_verbs_str(sc->clients[i].verbs, verbs, sizeof(verbs)));
}

static void server_maybe_done(rexec_server *s)
{
    if (!s->stopping || s->handles > 0 || s->reqs_alive > 0)
        return;
    void (*cb)(void *) = s->on_stopped;
    void *ud = s->stopped_ud;
    rx_metrics_file_close(s->metrics_file); /* its last write: every call has reported */
    rx_serve_log_close(&s->log);
    free(s->path);
    free(s);
    if (cb)
        cb(ud);
}

static void on_listener_closed(uv_handle_t *h)
{
    rexec_server *s = h->data;
    s->handles--;
    server_maybe_done(s);
}

/* Stops accepting and removes the socket at once; cancels what is in flight, lets the results
 * reach their clients, then closes the clients. */
void rexec_server_stop(rexec_server *s, void (*on_stopped)(void *ud), void *ud)
{
    if (s->stopping)
        return;
    s->stopping = 1;
    s->on_stopped = on_stopped;
    s->stopped_ud = ud;
    if (!s->activated) /* systemd's socket stays, for the next start */
        unlink(s->path);
    uv_close((uv_handle_t *)&s->listener, on_listener_closed);
    s->handles++; /* hold the server while cancelling: a request may finish on the way */
    for (serve_client *cl = s->clients; cl; cl = cl->next)
        for (serve_req *q = cl->reqs, *next; q; q = next) {
            next = q->next;
            if (strcmp(q->op, "check") != 0)
                req_cancel(q);
        }
    stop_idle_clients(s);
    if (s->hub != NULL)
        rx_hub_close(s->hub, on_hub_closed, s);
    s->handles--;
    server_maybe_done(s);
}

/* After stop, a request that finishes closes its client once it has nothing else running. */
static void stop_idle_clients(rexec_server *s)
{
    for (serve_client *cl = s->clients, *next; cl; cl = next) {
        next = cl->next;
        if (cl->reqs == NULL)
            client_close(cl);
    }
}
