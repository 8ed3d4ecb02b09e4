/* The fake session of the lifecycle test: session.h and ssh_int.h without a socket (fake.h).
 *
 * It replaces src/ssh/session.c in the test executable, keeping that file's contract with the
 * modules above it: states RESOLVE..AUTH advance only when the scheduler grants a step (or fail
 * there: EHOST in CONNECT, EHOST/ECONNLOST in HANDSHAKE, which the pool retries with its
 * back-off, EAUTH in AUTH; ETIMEDOUT from the connect timer); READY calls on_ready from inside
 * the drive loop; session_drive and st_ready are session.c's (step every attached user until
 * none makes progress and none has data pending, collect the DONE ones, fail the connection when
 * a done user met a dead socket or gave up on a hung one, then finish the done users and call
 * on_exec_slot, callbacks last; at most RX_DRIVE_PASSES passes, then again from an idle handle);
 * kicks run the drive from a zero timer; a network event of the
 * fake server runs it as on_poll would (lc_session_poll, with on_poll's error and idle-EOF
 * paths); rx_session_close fails and finishes every user, then frees from the loop (on_freed).
 * st_ready and session_drive are copies of session.c's: a change there must be made here too
 * (the test cannot link session.c, which owns the socket and libssh2's session).
 * Not modelled: resolving, sockets, host keys, authentication, keepalives and pings, pause's
 * poll bookkeeping, proxy_jump (the rx_jump_* entry points abort). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libssh2.h>

#include "err.h"
#include "fake.h"
#include "jump.h"
#include "session.h"
#include "ssh_int.h"

LIBSSH2_SESSION *lc_conn_ssh(lc_conn *c);

struct rx_session {
    uv_loop_t *loop;
    rx_session_opts opts;
    rx_session_events ev;
    rx_session_state state;
    lc_conn *conn;
    uv_timer_t timer; /* the connect timeout */
    uv_timer_t kick;
    uv_idle_t resume; /* a drive out of passes with work left goes on from here (session.c) */
    int open_handles;
    rx_chan_user *users;
    int driving, again, full, closing;
    int grant;                  /* connect steps the scheduler allowed */
    rx_session_state fail_at;   /* the state this connection attempt fails in (RX_SS_READY: none) */
    int fail_code;
    rx_session_state failed_in;
    rexec_error err;
    int id;                     /* for the trace: 1, 2, ... in a run */
    struct rx_session *next_live;
};

static rx_session *live; /* sessions not closing: the scheduler's choice */
static int ids;
static int alive;        /* sessions not freed yet */

static const char *const state_names[] = {"RESOLVE", "CONNECT", "HANDSHAKE", "HOSTKEY",
                                          "AUTH",    "READY",   "FAILED",    "CLOSED"};

const char *rx_session_state_name(rx_session_state st)
{
    return st <= RX_SS_CLOSED ? state_names[st] : "?";
}

static void set_state(rx_session *s, rx_session_state st)
{
    lc_trace("session %d: %s -> %s", s->id, state_names[s->state], state_names[st]);
    s->state = st;
}

static void session_drive(rx_session *s);
static void session_fail(rx_session *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void live_remove(rx_session *s)
{
    for (rx_session **pp = &live; *pp; pp = &(*pp)->next_live)
        if (*pp == s) {
            *pp = s->next_live;
            return;
        }
}

/* ---- tear-down (session.c's) ----------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h)
{
    rx_session *s = h->data;
    if (--s->open_handles > 0)
        return;
    rx_session_events ev = s->ev;
    lc_trace("session %d: freed", s->id);
    free(s);
    alive--;
    if (ev.on_freed)
        ev.on_freed(ev.ud);
}

static void fail_users(rx_session *s, const rexec_error *err)
{
    rx_chan_user *u = s->users;
    s->users = NULL;
    while (u) {
        rx_chan_user *next = u->next;
        u->next = NULL;
        u->ops->fail(u, err->code, err->msg);
        u->ops->finish(u);
        u = next;
    }
}

void rx_session_close(rx_session *s, const rexec_error *err)
{
    rexec_error cancelled;
    if (s->closing)
        return;
    s->closing = 1;
    live_remove(s);
    if (err == NULL) {
        rx_fail(&cancelled, REXEC_ECANCELLED, "%s: connection closed", s->opts.host->name);
        err = &cancelled;
    }
    fail_users(s, err);
    lc_conn_free(s->conn); /* the peers read EOF; their channels live on until drained */
    s->conn = NULL;
    if (s->state != RX_SS_FAILED)
        set_state(s, RX_SS_CLOSED);
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->kick, on_handle_closed);
    uv_close((uv_handle_t *)&s->resume, on_handle_closed);
}

static void session_fail(rx_session *s, int code, const char *fmt, ...)
{
    va_list ap;
    char msg[sizeof(s->err.msg)];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rx_fail(&s->err, code, "%s: %s", s->opts.host->name, msg);
    s->failed_in = s->state;
    set_state(s, RX_SS_FAILED);
    if (s->ev.on_failed)
        s->ev.on_failed(s->ev.ud, s, &s->err);
    rx_session_close(s, &s->err);
}

static void on_connect_timeout(uv_timer_t *t)
{
    rx_session *s = t->data;
    session_fail(s, REXEC_ETIMEDOUT, "no SSH session within %.1f s (stuck in %s)",
                 s->opts.connect_timeout_s, rx_session_state_name(s->state));
}

/* ---- connecting ------------------------------------------------------------------------------ */

enum { ST_AGAIN = 0, ST_NEXT = 1, ST_FAILED = -1 };

static int fail_here(rx_session *s)
{
    if (s->fail_at != s->state)
        return 0;
    session_fail(s, s->fail_code, "fake failure in %s", state_names[s->state]);
    return 1;
}

/* HANDSHAKE, HOSTKEY, AUTH: one state per step the scheduler grants. */
static int st_connecting(rx_session *s)
{
    if (s->grant == 0)
        return ST_AGAIN;
    s->grant--;
    if (fail_here(s))
        return ST_FAILED;
    if (s->state != RX_SS_AUTH) {
        set_state(s, s->state + 1);
        return ST_NEXT;
    }
    uv_timer_stop(&s->timer);
    set_state(s, RX_SS_READY);
    if (s->ev.on_ready)
        s->ev.on_ready(s->ev.ud, s);
    return s->closing ? ST_FAILED : ST_NEXT;
}

/* ---- READY (session.c's st_ready and session_drive, without the ping) ------------------------ */

#ifndef RX_DRIVE_PASSES /* a session.h from before the drive's budget: no limit */
#define RX_DRIVE_PASSES 1000000000
#endif

static void session_resume_later(rx_session *s);

static int st_ready(rx_session *s, rx_chan_user **done)
{
    int progress, passes = 0;
    do {
        progress = 0;
        rx_chan_user **pp = &s->users;
        while (*pp && !s->closing) {
            rx_chan_user *u = *pp;
            int r = u->ops->step(u);
            if (r == RX_STEP_DONE) {
                *pp = u->next;
                u->next = *done;
                *done = u;
                progress = 1;
                continue;
            }
            if (r == RX_STEP_PROGRESS || u->ops->pending(u))
                progress = 1;
            pp = &u->next;
        }
        /* as session.c: every user is asked once more after the pass (KNOWN (c), fixed) */
        for (rx_chan_user *u = s->users; u && !progress && !s->closing; u = u->next)
            progress = u->ops->pending(u);
    } while (progress && !s->closing && ++passes < RX_DRIVE_PASSES);
    if (progress && !s->closing)
        session_resume_later(s);
    return ST_AGAIN;
}

static void finish_done(rx_chan_user *done)
{
    while (done) {
        rx_chan_user *next = done->next;
        done->next = NULL;
        done->ops->finish(done);
        done = next;
    }
}

int rx_ssh_conn_gone(int code)
{
    return code == LIBSSH2_ERROR_SOCKET_SEND || code == LIBSSH2_ERROR_SOCKET_RECV ||
           code == LIBSSH2_ERROR_SOCKET_DISCONNECT || code == LIBSSH2_ERROR_SOCKET_TIMEOUT;
}

static void session_drive(rx_session *s)
{
    rx_chan_user *done = NULL;
    if (s->driving) {
        s->again = 1;
        return;
    }
    s->driving = 1;
    do {
        int r = ST_NEXT;
        s->again = 0;
        while (r == ST_NEXT && !s->closing) {
            switch (s->state) {
            case RX_SS_HANDSHAKE:
            case RX_SS_HOSTKEY:
            case RX_SS_AUTH: r = st_connecting(s); break;
            case RX_SS_READY: r = st_ready(s, &done); break;
            default: r = ST_AGAIN; break;
            }
        }
    } while (s->again && !s->closing);
    const char *m;
    if (!s->closing && done != NULL && s->state == RX_SS_READY &&
        rx_ssh_conn_gone(lc_conn_last_error(s->conn, &m)))
        session_fail(s, REXEC_ECONNLOST, "the connection to the server is gone");
    for (rx_chan_user *u = done; u && !s->closing; u = u->next)
        if (u->ops->hung && u->ops->hung(u))
            session_fail(s, REXEC_ECONNLOST, "the server stopped answering on this connection");
    /* the poll: a socket in error wakes it (session.c's on_poll -> session_fail) */
    if (!s->closing && s->state == RX_SS_READY && lc_conn_dead(s->conn))
        session_fail(s, REXEC_ECONNLOST, "connection error (fake poll)");
    s->driving = 0;
    int has_done = done != NULL;
    finish_done(done);
    if (has_done && !s->closing && s->ev.on_exec_slot)
        s->ev.on_exec_slot(s->ev.ud, s);
}

/* on_poll: a network event on the fake connection. */
void lc_session_poll(rx_session *s)
{
    if (s->closing || s->state != RX_SS_READY)
        return;
    if (lc_conn_dead(s->conn) && lc_below(2)) {
        session_fail(s, REXEC_ECONNLOST, "connection error: connection reset by peer (fake)");
        return;
    }
    if (s->users == NULL && lc_conn_dead(s->conn)) {
        session_fail(s, REXEC_ECONNLOST, "the server closed the connection");
        return;
    }
    session_drive(s);
}

static void on_resume(uv_idle_t *h)
{
    rx_session *s = h->data;
    uv_idle_stop(h);
    if (!s->closing && s->state == RX_SS_READY)
        session_drive(s);
}

static void session_resume_later(rx_session *s)
{
    if (!uv_is_active((uv_handle_t *)&s->resume))
        uv_idle_start(&s->resume, on_resume);
}

static void on_kick(uv_timer_t *t)
{
    rx_session *s = t->data;
    if (!s->closing && s->state == RX_SS_READY)
        session_drive(s);
}

void rx_session_kick(rx_session *s)
{
    if (!s->closing && s->state == RX_SS_READY)
        uv_timer_start(&s->kick, on_kick, 0, 0);
}

/* ---- for the scheduler ------------------------------------------------------------------------ */

int lc_sessions_alive(void) { return alive; }

static rx_session *pick(int ready)
{
    rx_session *cand[64];
    int n = 0;
    for (rx_session *s = live; s && n < 64; s = s->next_live)
        if ((s->state == RX_SS_READY) == ready && !s->closing)
            cand[n++] = s;
    return n ? cand[lc_below((unsigned)n)] : NULL;
}

/* One step of a connection being set up: -1 if none is. */
int lc_session_event(void)
{
    rx_session *s = pick(0);
    if (s == NULL)
        return -1;
    switch (s->state) {
    case RX_SS_RESOLVE:
        if (!fail_here(s))
            set_state(s, RX_SS_CONNECT);
        break;
    case RX_SS_CONNECT:
        if (!fail_here(s)) {
            set_state(s, RX_SS_HANDSHAKE);
            session_drive(s);
        }
        break;
    default:
        s->grant++;
        session_drive(s);
        break;
    }
    return 0;
}

/* The network drops a READY connection: -1 if there is none. */
int lc_session_fault(void)
{
    static const int codes[] = {LIBSSH2_ERROR_SOCKET_RECV, LIBSSH2_ERROR_SOCKET_SEND,
                                LIBSSH2_ERROR_SOCKET_DISCONNECT};
    rx_session *s = pick(1);
    if (s == NULL)
        return -1;
    lc_trace("fault: session %d: connection lost", s->id);
    lc_conn_lost(s->conn, codes[lc_below(3)]);
    if (lc_below(2))
        lc_session_poll(s);
    else
        rx_session_kick(s);
    return 0;
}

void lc_sessions_reset(void)
{
    live = NULL;
    alive = 0;
    ids = 0;
}

/* ---- session.h / ssh_int.h -------------------------------------------------------------------- */

rx_session *rx_session_new(uv_loop_t *loop, const rx_session_opts *opts, const rx_session_events *ev)
{
    static const rx_session_state where[] = {RX_SS_RESOLVE, RX_SS_CONNECT, RX_SS_HANDSHAKE,
                                             RX_SS_HANDSHAKE, RX_SS_AUTH};
    static const int codes[] = {REXEC_EHOST, REXEC_EHOST, REXEC_EHOST, REXEC_ECONNLOST, REXEC_EAUTH};
    rx_session *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->loop = loop;
    s->opts = *opts;
    s->ev = *ev;
    s->state = RX_SS_RESOLVE;
    s->fail_at = RX_SS_READY;
    if (lc_permille((unsigned)lc_f.connect_fail)) {
        int k = (int)lc_below(5);
        s->fail_at = where[k];
        s->fail_code = codes[k];
    }
    s->conn = lc_conn_new(s);
    uv_timer_init(loop, &s->timer);
    uv_timer_init(loop, &s->kick);
    uv_idle_init(loop, &s->resume);
    s->timer.data = s->kick.data = s->resume.data = s;
    s->open_handles = 3;
    uint64_t ms = (uint64_t)(opts->connect_timeout_s * 1000);
    uv_timer_start(&s->timer, on_connect_timeout, ms ? ms : 1, 0);
    s->next_live = live;
    live = s;
    alive++;
    s->id = ++ids;
    lc_trace("session %d: new (fails in %s)", s->id,
             s->fail_at == RX_SS_READY ? "-" : state_names[s->fail_at]);
    return s;
}

rx_session_state rx_session_get_state(const rx_session *s) { return s->state; }
rx_session_state rx_session_failed_in(const rx_session *s) { return s->failed_in; }
const rx_host *rx_session_host(const rx_session *s) { return s->opts.host; }
LIBSSH2_SESSION *rx_session_ssh(rx_session *s) { return lc_conn_ssh(s->conn); }
uv_loop_t *rx_session_loop(rx_session *s) { return s->loop; }
const rx_logger *rx_session_logger(const rx_session *s) { return s->opts.log; }
int rx_session_full(const rx_session *s) { return s->full; }
void rx_session_mark_full(rx_session *s) { s->full = 1; }
rx_chan_user *rx_session_users(rx_session *s) { return s->users; }

int rx_session_channels(const rx_session *s)
{
    int n = 0;
    for (const rx_chan_user *u = s->users; u; u = u->next)
        n += u->ops->holds_channel(u);
    return n;
}

void rx_session_attach(rx_session *s, rx_chan_user *u)
{
    rx_chan_user **pp = &s->users;
    while (*pp)
        pp = &(*pp)->next;
    u->next = NULL;
    *pp = u;
    rx_session_kick(s);
}

int rx_session_last_error(rx_session *s, char *buf, size_t n)
{
    const char *m = "";
    int e = s->conn ? lc_conn_last_error(s->conn, &m) : LIBSSH2_ERROR_SOCKET_DISCONNECT;
    snprintf(buf, n, "%s", m && *m ? m : "unknown libssh2 error");
    return e;
}

void rx_tunnel_link_unref(rx_tunnel_link *l)
{
    if (l && --l->refs == 0)
        free(l);
}

/* proxy_jump is not modelled: the test's hosts have no jump. */
rx_jump *rx_jump_new(uv_loop_t *loop, const rx_host *target, int *session_fd, rx_tunnel_link **link,
                     rexec_error *err)
{
    (void)loop, (void)target, (void)session_fd, (void)link, (void)err;
    abort();
}

void rx_jump_attach(rx_jump *j, rx_session *bastion)
{
    (void)j, (void)bastion;
    abort();
}

void rx_jump_abandon(rx_jump *j, const rexec_error *why)
{
    (void)j, (void)why;
    abort();
}
