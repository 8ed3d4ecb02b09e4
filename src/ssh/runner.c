/* A runner on one channel (runner.h, remote/runner.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "err.h"
#include "marker.h"
#include "render.h"
#include "runner.h"
#include "ssh_int.h"

typedef enum rn_state { RN_OPEN = 0, RN_EXEC, RN_START, RN_IDLE, RN_CALL, RN_CLOSE, RN_DONE } rn_state;
static const char *const rn_state_names[] = {"OPEN", "EXEC", "START", "IDLE", "CALL", "CLOSE", "DONE"};

enum { KILL_NONE = 0, KILL_TIMEOUT, KILL_CANCEL };

/* A call's life on its runner. Every change goes through call_to, which allows only these:
 *   NONE -> WAIT_READY -> QUEUED          (a runner still starting: the frame waits for "ready")
 *   NONE -> QUEUED -> SENT -> ACKED -> KILLING -> ENDED -> NONE
 *   QUEUED -> ACKED          "start" came while the rest of the frame (its stdin) was going out
 *   QUEUED | SENT -> KILLING "start" came after a kill was queued (kill_why says which)
 *   any active state -> ENDED
 * A kill is queued (a "K" line after the frame, kill_why set) in QUEUED, SENT or ACKED; the
 * state becomes KILLING once the runner has acknowledged the call. Whether the whole frame was
 * written is res.sent (the deadline starts then). */
typedef enum call_state {
    CALL_NONE = 0,   /* no call */
    CALL_WAIT_READY, /* given to a runner that has not said "ready": nothing queued */
    CALL_QUEUED,     /* its frame is in r->out, not all of it written; no "start" yet */
    CALL_SENT,       /* the whole frame was written; no "start" yet */
    CALL_ACKED,      /* the runner said "start": the connection answers */
    CALL_KILLING,    /* acknowledged, and a kill line follows the frame (deadline or cancel) */
    CALL_ENDED,      /* over: reported from the loop */
} call_state;
static const char *const call_state_names[] = {"NONE",  "WAIT_READY", "QUEUED", "SENT",
                                               "ACKED", "KILLING",    "ENDED"};
#define CALL_BIT(s) (1u << (s))
static const unsigned call_next[] = {
    [CALL_NONE] = CALL_BIT(CALL_WAIT_READY) | CALL_BIT(CALL_QUEUED),
    [CALL_WAIT_READY] = CALL_BIT(CALL_QUEUED) | CALL_BIT(CALL_ENDED),
    [CALL_QUEUED] = CALL_BIT(CALL_SENT) | CALL_BIT(CALL_ACKED) | CALL_BIT(CALL_KILLING) |
                    CALL_BIT(CALL_ENDED),
    [CALL_SENT] = CALL_BIT(CALL_ACKED) | CALL_BIT(CALL_KILLING) | CALL_BIT(CALL_ENDED),
    [CALL_ACKED] = CALL_BIT(CALL_KILLING) | CALL_BIT(CALL_ENDED),
    [CALL_KILLING] = CALL_BIT(CALL_ENDED),
    [CALL_ENDED] = CALL_BIT(CALL_NONE),
};

#define RN_HELLO_MAX 200
#define RN_MAX_FRAME_CODE (8u * 1024 * 1024)
#define RN_OUT_KEEP 4096 /* an idle runner's send buffer keeps at most this much (write_out) */

typedef struct rn_call {
    call_state st;
    rx_exec_cb cb;
    rx_exec_result res;
    char nonce[RX_NONCE_LEN + 1];
    double timeout_s, backstop_s;
    size_t frame_start, frame_end; /* where this call's frame lies in r->out */
    int kill_why;      /* KILL_*: a kill line was queued after the frame, and why */
    int desync;        /* the runner said its slot held bytes not its calls': discard it after */
    int out_mark, err_mark; /* the end markers seen on stdout / stderr */
    int paused;        /* the consumer holds the output back (rx_runner_pause) */
    rx_marker mo, me;
    rx_exec_opts opts; /* its buffers belong to the caller until on_done */
} rn_call;

struct rx_runner {
    rx_chan_user u; /* first: the session's list runs through it */
    rx_session *s;
    LIBSSH2_CHANNEL *ch;
    rn_state state;
    int opening, exec_sent;
    int max_rank;
    double idle_s;
    const int *held;  /* the pool's count of open requests that include the host (or NULL) */
    char cmd[RX_BOOT_CMD_MAX]; /* what the channel runs: the start script in one read (render.h) */
    rx_buf out;       /* bytes for the channel: definitions, frames, kill lines */
    size_t out_off;
    int wpending;     /* the last write found no room: libssh2 may hold a copy from out_off on */
    char rnonce[RX_NONCE_LEN + 1];
    char hello[RN_HELLO_MAX];
    size_t hello_len;
    int close_req;    /* close the channel when nothing is in flight (idle timeout, desync) */
    int gave_up;      /* the peer is stuck: leave the channel to libssh2 */
    rn_call call;
    uv_timer_t timer; /* the call's deadline, then its backstop; the idle timeout */
    uv_timer_t deliver;
    uv_timer_t setup; /* the call's set-up deadline: until the runner acknowledges it */
    int deliver_armed;
    rx_exec_cb dcb;   /* a finished call, reported from the loop */
    rx_exec_result dres;
    int dpending;
    int handles, finished;
};

static void rn_set_state(rx_runner *r, rn_state st)
{
    rx_log(rx_session_logger(r->s), REXEC_LOG_DEBUG, "%s: runner %p: %s -> %s",
           rx_session_host(r->s)->name, (void *)r, rn_state_names[r->state], rn_state_names[st]);
    r->state = st;
}

static int call_active(const rn_call *c)
{
    return c->st != CALL_NONE && c->st != CALL_ENDED;
}

/* The frame is (or was) on its way: the runner's answers belong to this call. */
static int call_has_frame(const rn_call *c)
{
    return c->st >= CALL_QUEUED && c->st <= CALL_KILLING;
}

static int call_acked(const rn_call *c)
{
    return c->st == CALL_ACKED || c->st == CALL_KILLING;
}

static void call_to(rx_runner *r, call_state to)
{
    rn_call *c = &r->call;
    rx_log(rx_session_logger(r->s), REXEC_LOG_DEBUG, "%s: runner %p: call %s -> %s",
           rx_session_host(r->s)->name, (void *)r, call_state_names[c->st], call_state_names[to]);
    if (!(call_next[c->st] & CALL_BIT(to))) { /* a lifecycle bug, in release builds too */
        rx_log(rx_session_logger(r->s), REXEC_LOG_WARN, "%s: runner call %s -> %s is not a "
               "transition", rx_session_host(r->s)->name, call_state_names[c->st],
               call_state_names[to]);
        abort();
    }
    c->st = to;
}

static void call_error(rn_call *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void call_error(rn_call *c, int code, const char *fmt, ...)
{
    va_list ap;
    if (c->res.err != REXEC_OK)
        return;
    va_start(ap, fmt);
    vsnprintf(c->res.errmsg, sizeof(c->res.errmsg), fmt, ap);
    va_end(ap);
    c->res.err = code;
}

/* ---- reporting a call ----------------------------------------------------------------------- */

static void deliver_now(rx_runner *r)
{
    if (!r->dpending)
        return;
    r->dpending = 0;
    rx_exec_cb cb = r->dcb;
    rx_exec_result res = r->dres;
    OPENSSL_cleanse(&r->dres, sizeof(r->dres));
    if (cb.on_done)
        cb.on_done(cb.ud, &res);
}

static void on_deliver(uv_timer_t *t)
{
    deliver_now(t->data);
}

static void arm(rx_runner *r, double seconds, uv_timer_cb cb)
{
    uv_timer_start(&r->timer, cb, (uint64_t)(seconds * 1000) + 1, 0);
}

static void on_idle_timer(uv_timer_t *t);
static int start_call(rx_runner *r);

/* Ends the current call: it is reported from the loop, never from inside the session's drive
 * (whose callers may close the session under it). The runner takes no call until then. */
static void call_end(rx_runner *r)
{
    rn_call *c = &r->call;
    if (!call_active(c))
        return;
    call_to(r, CALL_ENDED);
    uv_timer_stop(&r->timer);
    uv_timer_stop(&r->setup);
    r->dcb = c->cb;
    r->dres = c->res;
    r->dpending = 1;
    call_to(r, CALL_NONE);
    OPENSSL_cleanse(c, sizeof(*c)); /* CALL_NONE */
    uv_timer_start(&r->deliver, on_deliver, 0, 0);
    if (r->state == RN_CALL) {
        rn_set_state(r, RN_IDLE);
        if (r->idle_s > 0)
            arm(r, r->idle_s, on_idle_timer);
    }
}

/* ---- timers --------------------------------------------------------------------------------- */

/* A runner whose host is part of a request still running stays: the request's other hosts may
 * take longer than the idle limit, and a fan-out that restarts its runners every round would
 * never be warm. The pool re-arms the timer when the last such request ends
 * (rx_runner_idle_restart). */
static void on_idle_timer(uv_timer_t *t)
{
    rx_runner *r = t->data;
    if (r->held != NULL && *r->held > 0)
        return;
    if (r->state == RN_IDLE && r->call.st == CALL_NONE) {
        r->close_req = 1;
        rx_session_kick(r->s);
    }
}

static void queue_kill(rx_runner *r, int why)
{
    rn_call *c = &r->call;
    if (c->kill_why != KILL_NONE)
        return;
    c->kill_why = why;
    if (c->st == CALL_ACKED)
        call_to(r, CALL_KILLING);
    if (rx_buf_adds(&r->out, "K\n") != 0) {
        /* The call cannot be stopped in band: the runner goes instead (its channel's close is
         * EOF to it, which stops the call), and the call's result says so. */
        call_error(c, REXEC_ECONNLOST,
                   "%s: the call could not be stopped in band (no memory for the kill line): "
                   "its runner was discarded, which stops it; its result is unknown",
                   rx_session_host(r->s)->name);
        r->close_req = 1;
    }
    rx_session_kick(r->s);
}

static void on_call_timer(uv_timer_t *t)
{
    rx_runner *r = t->data;
    rn_call *c = &r->call;
    if (!call_active(c))
        return;
    if (c->kill_why == KILL_NONE) { /* the call's own deadline: stop it in-band */
        queue_kill(r, KILL_TIMEOUT);
        arm(r, c->backstop_s > c->timeout_s ? c->backstop_s - c->timeout_s : 1, on_call_timer);
        return;
    }
    /* Output we have not read yet is not a stuck connection: the consumer holds it back. Look
     * again a second later; the paused time does not count against the host. */
    if (c->paused) {
        arm(r, 1.0, on_call_timer);
        return;
    }
    /* No end markers long after the kill: the connection or the runner is stuck. */
    call_error(c, REXEC_ECONNLOST,
               "%s: no end of call from the host within %.0f s: connection stuck, result unknown",
               rx_session_host(r->s)->name, c->backstop_s);
    r->gave_up = 1;
    r->close_req = 1;
    call_end(r);
    rx_session_kick(r->s);
}

/* No "start" from the runner within setup_s: on a warm connection whose peer froze, the frame
 * sits in a socket buffer and nothing answers; only the keepalive would find it, much later.
 * The call ends like a channel-per-call one whose channel open hangs, and the connection goes. */
static void on_setup_timer(uv_timer_t *t)
{
    rx_runner *r = t->data;
    rn_call *c = &r->call;
    if (!call_active(c) || call_acked(c) || c->res.ended)
        return;
    call_error(c, REXEC_ETIMEDOUT,
               "%s: the connection does not answer: the runner did not acknowledge the call "
               "within %.1f s (connect_timeout_s); %s",
               rx_session_host(r->s)->name, c->opts.setup_s,
               c->res.sent ? "the call was sent and may have started; it is not re-run"
                           : "nothing ran");
    r->gave_up = 1;
    r->close_req = 1;
    call_end(r);
    rx_session_kick(r->s);
}

/* ---- the streams ---------------------------------------------------------------------------- */

static void emit_out(void *ud, const unsigned char *p, size_t n)
{
    rx_runner *r = ud;
    if (r->call.out_mark) { /* bytes after the call's end: the runner is out of step */
        r->close_req = 1;
        return;
    }
    if (r->call.cb.on_data)
        r->call.cb.on_data(r->call.cb.ud, REXEC_STDOUT, p, n);
}

static void emit_err(void *ud, const unsigned char *p, size_t n)
{
    rx_runner *r = ud;
    if (r->call.err_mark) {
        r->close_req = 1;
        return;
    }
    if (r->call.cb.on_data)
        r->call.cb.on_data(r->call.cb.ud, REXEC_STDERR, p, n);
}

static void line_out(void *ud, const char *body)
{
    rx_runner *r = ud;
    if (strcmp(body, "end") == 0)
        r->call.out_mark = 1;
    else
        r->close_req = 1;
}

/* "start": the runner has the call; the set-up deadline is met. */
static void call_ack(rx_runner *r)
{
    uv_timer_stop(&r->setup);
    call_to(r, r->call.kill_why != KILL_NONE ? CALL_KILLING : CALL_ACKED);
}

/* "end <phase> <rc> <timed_out> <containment> <killed> <started> <desync>" */
static void line_err(void *ud, const char *body)
{
    rx_runner *r = ud;
    rn_call *c = &r->call;
    rx_exec_result *x = &c->res;
    int to = 0, killed = 0, started = 0, desync = 0;
    if (strcmp(body, "start") == 0 && !call_acked(c)) {
        call_ack(r);
        return;
    }
    if (sscanf(body, "end %15s %d %d %31s %d %d %d", x->phase, &x->rc, &to, x->containment,
               &killed, &started, &desync) != 7) {
        r->close_req = 1;
        return;
    }
    rx_log(rx_session_logger(r->s), REXEC_LOG_DEBUG, "%s: runner %p: %s", rx_session_host(r->s)->name,
           (void *)r, body);
    c->err_mark = 1;
    c->desync = desync != 0;
    x->ended = 1;
    x->started = started;
    x->timed_out = killed && c->kill_why == KILL_TIMEOUT;
    x->cancelled = killed && c->kill_why == KILL_CANCEL;
    if (strcmp(x->phase, "contain") == 0)
        x->started = 0;
    /* The slot refused the frame its call's shell was given (not this call's, by its nonce):
     * nothing of the call ran, and the runner is not used again. */
    if (strcmp(x->phase, "desync") == 0) {
        x->started = 0;
        c->desync = 1;
        call_error(c, REXEC_ECONNLOST,
                   "%s: the runner fell out of step (its slot held bytes that were not this "
                   "call's): the call was not run; the runner is discarded",
                   rx_session_host(r->s)->name);
    }
}

/* Before "ready": the first line on stdout is the runner's answer; stderr is not the call's. */
static void hello_feed(rx_runner *r, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n && r->state == RN_START; i++) {
        if (p[i] != '\n') {
            if (r->hello_len < RN_HELLO_MAX - 1)
                r->hello[r->hello_len++] = (char)p[i];
            continue;
        }
        char want[80], cont[32] = "";
        r->hello[r->hello_len] = 0;
        snprintf(want, sizeof(want), "\036rexec-runner:%s:ready ", r->rnonce);
        if (strncmp(r->hello, want, strlen(want)) != 0 || i + 1 != n ||
            sscanf(r->hello + strlen(want), "%31s", cont) != 1) {
            r->close_req = 2; /* refused (":none") or out of step: this host gets no runner */
            return;
        }
        rn_set_state(r, RN_IDLE);
        if (r->call.st == CALL_WAIT_READY && start_call(r) != 0) {
            call_error(&r->call, REXEC_ENOMEM, "out of memory");
            call_end(r);
        } else if (r->call.st == CALL_NONE && r->idle_s > 0) {
            arm(r, r->idle_s, on_idle_timer);
        }
    }
}

static int ssh_err(rx_runner *r, char *buf, size_t n)
{
    return rx_session_last_error(r->s, buf, n);
}

/* A call whose consumer holds its output back: its stdout is not read (the channel's window
 * fills and the command waits in its write), nor its stderr once the runner's "start" is in:
 * the set-up deadline waits for that, and nothing of the command comes before it. */
static int call_held(const rx_runner *r, int stream)
{
    return r->state == RN_CALL && call_active(&r->call) && r->call.paused &&
           (stream == 0 || call_acked(&r->call));
}

/* Reads what both streams hold, at most RX_READ_BUDGET reads of each (session.h, "Fairness
 * on the loop"): a stream with more returns 1 (progress) and is read again when the session
 * comes back to it, after the loop's other handles had their turn (rn_pending tells the
 * session that libssh2 still holds data). Returns 1 if bytes came, 0 if none, -1 on error. */
static int read_streams(rx_runner *r)
{
    unsigned char buf[32768];
    int got = 0;
    for (int stream = 0; stream < 2; stream++) {
        if (call_held(r, stream))
            continue;
        for (int reads = 0; reads < RX_READ_BUDGET; reads++) {
            ssize_t n = libssh2_channel_read_ex(r->ch, stream, (char *)buf, sizeof(buf));
            if (n == LIBSSH2_ERROR_EAGAIN || n == 0)
                break;
            if (n < 0) {
                char m[200];
                ssh_err(r, m, sizeof(m));
                call_error(&r->call, REXEC_ECONNLOST, "%s: connection lost while reading: %s",
                           rx_session_host(r->s)->name, m);
                return -1;
            }
            got = 1;
            if (r->state == RN_START) {
                if (stream == 0)
                    hello_feed(r, buf, (size_t)n);
            } else if (!call_has_frame(&r->call)) {
                r->close_req = 1; /* nothing may come between calls */
            } else {
                rx_marker_feed(stream == 0 ? &r->call.mo : &r->call.me, buf, (size_t)n);
                if (call_held(r, stream))
                    break; /* paused from the consumer's callback: leave the rest unread */
            }
        }
    }
    return got;
}

/* Writes what is queued. Returns 1 if bytes went, 0 if none, -1 on error. */
static int write_out(rx_runner *r)
{
    int went = 0;
    while (r->out_off < r->out.len) {
        ssize_t n = libssh2_channel_write(r->ch, (const char *)r->out.data + r->out_off,
                                          r->out.len - r->out_off);
        r->wpending = n == LIBSSH2_ERROR_EAGAIN;
        if (n == LIBSSH2_ERROR_EAGAIN)
            break;
        if (n < 0) {
            char m[200];
            ssh_err(r, m, sizeof(m));
            call_error(&r->call, REXEC_ECONNLOST, "%s: connection lost while sending: %s",
                       rx_session_host(r->s)->name, m);
            return -1;
        }
        r->out_off += (size_t)n;
        went = 1;
    }
    rn_call *c = &r->call;
    if (call_has_frame(c) && !c->res.sent && r->out_off >= c->frame_end) {
        c->res.sent = 1;
        if (c->st == CALL_QUEUED)
            call_to(r, CALL_SENT);
        arm(r, c->timeout_s, on_call_timer);
    }
    if (r->out_off == r->out.len && r->out_off > 0) {
        /* Everything went: the frame (with the secrets) is wiped from memory. A buffer grown
         * past RN_OUT_KEEP (the runner's definitions, 32 KiB; a large stdin) goes with it: kept,
         * it would be that much of every idle runner's memory (1,000 hosts: 32 MiB). */
        if (r->out.cap > RN_OUT_KEEP) {
            size_t max = r->out.max;
            rx_buf_free(&r->out);
            rx_buf_init(&r->out, max);
        } else {
            OPENSSL_cleanse(r->out.data, r->out.len);
            r->out.len = 0;
        }
        r->out_off = 0;
        c->frame_start = c->frame_end = 0;
    }
    return went;
}

/* ---- states --------------------------------------------------------------------------------- */

/* A runner that cannot start is not the call's failure: the call goes back to the pool, which
 * runs it on a channel of its own (no_runner) or, when the connection is gone, elsewhere. */
static void start_failed(rx_runner *r, int code, int no_runner, const char *why)
{
    rn_call *c = &r->call;
    if (call_active(c)) {
        call_error(c, code, "%s: %s", rx_session_host(r->s)->name, why);
        c->res.no_runner = no_runner;
        call_end(r);
    }
}

static int st_open(rx_runner *r)
{
    char m[200];
    r->ch = libssh2_channel_open_session(rx_session_ssh(r->s));
    if (r->ch) {
        r->opening = 0;
        rn_set_state(r, RN_EXEC);
        return RX_STEP_PROGRESS;
    }
    int code = ssh_err(r, m, sizeof(m));
    r->opening = code == LIBSSH2_ERROR_EAGAIN;
    if (code == LIBSSH2_ERROR_EAGAIN)
        return RX_STEP_AGAIN;
    if (code == LIBSSH2_ERROR_CHANNEL_FAILURE) {
        rx_session_mark_full(r->s);
        r->call.res.channel_full = 1;
    }
    start_failed(r, rx_ssh_conn_gone(code) || code == LIBSSH2_ERROR_SOCKET_NONE ? REXEC_ECONNLOST
                                                                                 : REXEC_EHOST,
                 0, "cannot open a channel for a runner");
    rn_set_state(r, RN_DONE);
    return RX_STEP_DONE;
}

static int st_exec(rx_runner *r)
{
    int rc = libssh2_channel_exec(r->ch, r->cmd);
    r->exec_sent = 1;
    if (rc == LIBSSH2_ERROR_EAGAIN)
        return RX_STEP_AGAIN;
    if (rc != 0) {
        char m[200];
        int code = ssh_err(r, m, sizeof(m));
        start_failed(r, rx_ssh_conn_gone(code) ? REXEC_ECONNLOST : REXEC_EHOST, !rx_ssh_conn_gone(code),
                     "the server refused to start a runner");
        rn_set_state(r, RN_CLOSE);
        return RX_STEP_PROGRESS;
    }
    rn_set_state(r, RN_START);
    return RX_STEP_PROGRESS;
}

static int runner_dead(rx_runner *r)
{
    char *sig = NULL;
    size_t len = 0;
    if (libssh2_channel_eof(r->ch) || libssh2_channel_get_exit_status(r->ch) != 0)
        return 1;
    if (libssh2_channel_get_exit_signal(r->ch, &sig, &len, NULL, NULL, NULL, NULL) == 0 && sig) {
        libssh2_free(rx_session_ssh(r->s), sig);
        return 1;
    }
    return 0;
}

static int st_start(rx_runner *r)
{
    int w = write_out(r), rd = w < 0 ? -1 : read_streams(r);
    if (rd < 0 || w < 0) {
        start_failed(r, REXEC_ECONNLOST, 0, "connection lost while starting a runner");
        rn_set_state(r, RN_CLOSE);
        return RX_STEP_PROGRESS;
    }
    if (r->close_req || (r->state == RN_START && runner_dead(r))) {
        start_failed(r, REXEC_EHOST, 1, "a runner cannot start here");
        rn_set_state(r, RN_CLOSE);
        return RX_STEP_PROGRESS;
    }
    return w || rd || r->state != RN_START ? RX_STEP_PROGRESS : RX_STEP_AGAIN;
}

/* Idle or in a call: frames and kill lines out, output in, the end of a call or of the runner. */
static int st_run(rx_runner *r)
{
    rn_call *c = &r->call;
    int w = write_out(r), rd = w < 0 ? -1 : read_streams(r);
    if (rd < 0 || w < 0) {
        /* A frame not sent whole never runs (res.sent stays 0): the runner needs all of it to
         * start the call. */
        call_end(r);
        rn_set_state(r, RN_CLOSE);
        return RX_STEP_PROGRESS;
    }
    if (call_active(c) && c->out_mark && c->err_mark) {
        int desync = c->desync;
        call_end(r);
        if (desync) /* its slot held what it should not: no later call may run there */
            r->close_req = 1;
        return RX_STEP_PROGRESS;
    }
    if (r->close_req || runner_dead(r)) {
        if (call_has_frame(c)) {
            call_error(c, REXEC_ECONNLOST,
                       "%s: the runner died or fell out of step during the call; the call is not "
                       "re-run and its result is unknown",
                       rx_session_host(r->s)->name);
            call_end(r);
        }
        if (!call_active(c)) {
            rn_set_state(r, RN_CLOSE);
            return RX_STEP_PROGRESS;
        }
    }
    return w || rd ? RX_STEP_PROGRESS : RX_STEP_AGAIN;
}

static int st_close(rx_runner *r)
{
    if (r->ch && r->gave_up)
        r->ch = NULL; /* a stuck peer never answers CHANNEL_CLOSE; libssh2 frees it */
    if (r->ch) {
        int rc = libssh2_channel_close(r->ch); /* EOF to the runner: it stops what it started */
        if (rc == LIBSSH2_ERROR_EAGAIN)
            return RX_STEP_AGAIN;
        libssh2_channel_free(r->ch);
        r->ch = NULL;
    }
    start_failed(r, REXEC_ECONNLOST, 0, "the runner closed");
    rn_set_state(r, RN_DONE);
    return RX_STEP_DONE;
}

static int rn_step(rx_chan_user *u)
{
    rx_runner *r = (rx_runner *)u;
    switch (r->state) {
    case RN_OPEN: return st_open(r);
    case RN_EXEC: return st_exec(r);
    case RN_START: return st_start(r);
    case RN_IDLE:
    case RN_CALL: return st_run(r);
    case RN_CLOSE: return st_close(r);
    default: return RX_STEP_DONE;
    }
}

static int rn_pending(rx_chan_user *u)
{
    rx_runner *r = (rx_runner *)u;
    if (r->ch == NULL || r->state < RN_START || r->state > RN_CALL)
        return 0;
    return (!call_held(r, 0) && libssh2_poll_channel_read(r->ch, 0) > 0) ||
           (!call_held(r, 1) && libssh2_poll_channel_read(r->ch, 1) > 0);
}

static int rn_holds_channel(const rx_chan_user *u)
{
    return ((const rx_runner *)u)->state != RN_DONE;
}

static void rn_fail(rx_chan_user *u, int code, const char *msg)
{
    rx_runner *r = (rx_runner *)u;
    rn_call *c = &r->call;
    if (call_active(c)) {
        call_error(c, code, "%s", msg);
        call_end(r);
    }
    r->ch = NULL; /* the session is going: libssh2 frees its channels with it */
    r->state = RN_DONE;
}

static void on_runner_closed(uv_handle_t *h)
{
    rx_runner *r = h->data;
    if (--r->handles > 0)
        return;
    OPENSSL_cleanse(r->out.data, r->out.len);
    rx_buf_free(&r->out);
    OPENSSL_cleanse(r, sizeof(*r));
    free(r);
}

static void rn_finish(rx_chan_user *u)
{
    rx_runner *r = (rx_runner *)u;
    if (r->finished)
        return;
    r->finished = 1;
    uv_timer_stop(&r->deliver);
    deliver_now(r);
    uv_close((uv_handle_t *)&r->timer, on_runner_closed);
    uv_close((uv_handle_t *)&r->deliver, on_runner_closed);
    uv_close((uv_handle_t *)&r->setup, on_runner_closed);
}

static int rn_hung(const rx_chan_user *u)
{
    return ((const rx_runner *)u)->gave_up;
}

static int rn_paused(const rx_chan_user *u)
{
    return call_held((const rx_runner *)u, 1); /* both streams held */
}

static const rx_chan_ops runner_ops = {.step = rn_step, .pending = rn_pending,
                                       .holds_channel = rn_holds_channel, .fail = rn_fail,
                                       .finish = rn_finish, .hung = rn_hung, .paused = rn_paused};

/* ---- public --------------------------------------------------------------------------------- */

rx_runner *rx_runner_new(rx_session *s, int max_rank, double idle_s, const int *held)
{
    rx_runner *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->u.ops = &runner_ops;
    r->s = s;
    r->max_rank = max_rank;
    r->idle_s = idle_s;
    r->held = held;
    rx_buf_init(&r->out, 64u << 20);
    if (rx_nonce_new(r->rnonce) != 0 || rx_render_runner_start(&r->out, r->rnonce, max_rank) != 0) {
        rx_buf_free(&r->out);
        free(r);
        return NULL;
    }
    rx_render_boot_cmd(r->cmd, sizeof(r->cmd), r->out.data, r->out.len); /* out: the start only */
    uv_timer_init(rx_session_loop(s), &r->timer);
    uv_timer_init(rx_session_loop(s), &r->deliver);
    uv_timer_init(rx_session_loop(s), &r->setup);
    r->timer.data = r->deliver.data = r->setup.data = r;
    r->handles = 3;
    rx_session_attach(s, &r->u);
    return r;
}

int rx_runner_free_for_call(const rx_runner *r)
{
    return r->call.st == CALL_NONE && !r->dpending && !r->close_req && !r->finished &&
           r->state <= RN_IDLE;
}

rx_runner *rx_runner_find_free(rx_session *s)
{
    for (rx_chan_user *u = rx_session_users(s); u; u = u->next)
        if (u->ops == &runner_ops && rx_runner_free_for_call((rx_runner *)u))
            return (rx_runner *)u;
    return NULL;
}

void rx_runner_idle_restart(rx_session *s)
{
    for (rx_chan_user *u = rx_session_users(s); u; u = u->next) {
        rx_runner *r = (rx_runner *)u;
        if (u->ops == &runner_ops && r->state == RN_IDLE && r->call.st == CALL_NONE &&
            !r->close_req && !r->finished && r->idle_s > 0)
            arm(r, r->idle_s, on_idle_timer);
    }
}

rx_session *rx_runner_session(const rx_runner *r)
{
    return r->s;
}

/* A call frame's header is this many bytes, spaces before its newline: the runner reads it
 * with two fixed-length reads (remote/runner.sh), where a line would take a read() a byte. */
#define RN_FRAME_HEAD 96

/* Queues the call's frame: "C <nonce> <min_rank> <stdin_len> <code_len>" (and " o" when the
 * code may run in a fork of the slot), spaces up to RN_FRAME_HEAD - 1 bytes, "\n", the code,
 * the stdin. */
static int queue_frame(rx_runner *r, const rx_exec_opts *o)
{
    long long in = o->stdin_data ? (long long)o->stdin_len : -1;
    char head[RN_FRAME_HEAD + 1];
    int n = snprintf(head, sizeof(head), "C %s %d %lld %zu%s", o->nonce, o->min_rank, in,
                     o->runner_code_len, o->runner_fork ? " o" : "");
    if (n < 0 || n > RN_FRAME_HEAD - 1) /* 32 + 11 + 20 + 20 digits, "o", 7 separators fit */
        return REXEC_EINTERNAL;
    memset(head + n, ' ', (size_t)(RN_FRAME_HEAD - 1 - n));
    head[RN_FRAME_HEAD - 1] = '\n';
    int e = rx_buf_add(&r->out, head, RN_FRAME_HEAD);
    if (e == 0)
        e = rx_buf_add(&r->out, o->runner_code, o->runner_code_len);
    if (e == 0 && o->stdin_data && o->stdin_len)
        e = rx_buf_add(&r->out, o->stdin_data, o->stdin_len);
    return e;
}

static int start_call(rx_runner *r)
{
    rn_call *c = &r->call;
    size_t before = r->out.len;
    int e = queue_frame(r, &c->opts);
    if (e != 0) {
        OPENSSL_cleanse(r->out.data + before, r->out.len - before);
        r->out.len = before;
        return e;
    }
    c->frame_start = before;
    c->frame_end = r->out.len;
    call_to(r, CALL_QUEUED);
    uv_timer_stop(&r->timer); /* the idle timeout */
    rn_set_state(r, RN_CALL);
    return 0;
}

int rx_runner_call(rx_runner *r, const rx_exec_opts *o, const rx_exec_cb *cb)
{
    rn_call *c = &r->call;
    if (!rx_runner_free_for_call(r) || o->runner_code == NULL || strlen(o->nonce) != RX_NONCE_LEN)
        return REXEC_EINTERNAL;
    memset(c, 0, sizeof(*c)); /* CALL_NONE */
    c->cb = *cb;
    snprintf(c->nonce, sizeof(c->nonce), "%s", o->nonce);
    c->timeout_s = o->timeout_s > 0 ? o->timeout_s : 1;
    c->backstop_s = o->backstop_s > c->timeout_s ? o->backstop_s : c->timeout_s + 10;
    c->opts = *o;
    rx_marker_init(&c->mo, o->nonce, emit_out, line_out, r);
    rx_marker_init(&c->me, o->nonce, emit_err, line_err, r);
    if (o->setup_s > 0) /* a starting runner's wait for "ready" counts too */
        uv_timer_start(&r->setup, on_setup_timer, (uint64_t)(o->setup_s * 1000) + 1, 0);
    /* A starting runner gets the frame once it said "ready": a runner that cannot start has
     * then read nothing of the call, which may run on a channel of its own. */
    if (r->state == RN_IDLE) {
        if (start_call(r) != 0) {
            memset(c, 0, sizeof(*c));
            return REXEC_ENOMEM;
        }
    } else {
        call_to(r, CALL_WAIT_READY);
    }
    rx_session_kick(r->s);
    return 0;
}

void rx_runner_retire(rx_runner *r)
{
    if (rx_runner_free_for_call(r)) {
        r->close_req = 1;
        rx_session_kick(r->s);
    }
}

void rx_runner_pause(rx_runner *r, int on)
{
    if (!call_active(&r->call) || r->call.paused == on)
        return;
    r->call.paused = on;
    rx_session_kick(r->s); /* resumed: read what waits; paused: stop watching for it */
}

/* Takes the call's frame back out of r->out, wiped, when no byte of it has left: not written,
 * and no write in progress that libssh2 may hold a copy of. 0 when some of it may be on its
 * way (the runner then needs the rest, and a kill line after it). */
static int drop_frame(rx_runner *r)
{
    rn_call *c = &r->call;
    size_t n = c->frame_end - c->frame_start;
    if (c->st != CALL_QUEUED || r->wpending || r->out_off > c->frame_start)
        return 0;
    memmove(r->out.data + c->frame_start, r->out.data + c->frame_end, r->out.len - c->frame_end);
    OPENSSL_cleanse(r->out.data + r->out.len - n, n);
    r->out.len -= n;
    c->frame_start = c->frame_end = 0;
    return 1;
}

void rx_runner_cancel(rx_runner *r)
{
    rn_call *c = &r->call;
    if (!call_active(c) || c->kill_why != KILL_NONE)
        return;
    /* Not sent yet (or waiting for "ready"): it never will be, and the call did not run. */
    if (c->st == CALL_WAIT_READY || drop_frame(r)) {
        call_error(c, REXEC_ECANCELLED, "%s: cancelled before it started (never sent)",
                   rx_session_host(r->s)->name);
        c->res.sent = 0;
        call_end(r);
        return;
    }
    queue_kill(r, KILL_CANCEL);
}

void rx_runner_count(rx_session *s, uint64_t counts[4])
{
    for (rx_chan_user *u = rx_session_users(s); u; u = u->next) {
        if (u->ops != &runner_ops)
            continue;
        rn_state st = ((const rx_runner *)u)->state;
        counts[st <= RN_START ? 0 : st == RN_IDLE ? 1 : st == RN_CALL ? 2 : 3]++;
    }
}
