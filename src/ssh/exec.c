/* One exec channel running one wrapper script (see exec.h and remote/wrapper.sh). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "err.h"
#include "exec.h"
#include "ssh_int.h"
#include "render.h"

typedef enum exec_state { EX_OPEN = 0, EX_EXEC, EX_SEND, EX_RUN, EX_CLOSE, EX_DONE } exec_state;

static const char *const exec_state_names[] = {"OPEN", "EXEC", "SEND", "RUN", "CLOSE", "DONE"};

#define MARK_BODY_MAX 160
/* After the backstop asks the wrapper to stop (EOF), it gets the drain time and this much more
 * before the connection is declared stuck. */
#define EXEC_STOP_GRACE_MS 1000
/* Channel writes per step (fairness on the loop, as RX_READ_BUDGET for reads): libssh2 1.10
 * sends at most one packet (RX_EXEC_PACKET, 32 KiB) per write, and encrypting one costs far
 * less than handling a 256 KiB read, so 16 of them (512 KiB) keep a step about as short. */
#define EXEC_WRITE_BUDGET 16
/* How long to wait for EOF from escapees after the end line, when the caller does not say. */
#define EXEC_DRAIN_DEFAULT_S 2

/* Strips the wrapper's status lines ("\036rexec:<nonce>:<body>\n") from stderr. Only the bytes
 * that match a prefix of the marker are held back; \036 appears once in the marker, so a failed
 * match never hides the start of another. */
typedef struct marker_filter {
    char prefix[16 + RX_NONCE_LEN]; /* "\036rexec:<nonce>:" */
    size_t plen;
    size_t matched;  /* bytes of prefix matched (held back) */
    int in_body;
    char body[MARK_BODY_MAX];
    size_t blen;
} marker_filter;

struct rx_exec {
    rx_chan_user user; /* first: the session steps its users through user.ops */
    rx_session *s;
    LIBSSH2_CHANNEL *ch;
    exec_state state;
    unsigned char *data; /* script then stdin bytes */
    char cmd[RX_BOOT_CMD_MAX]; /* what the channel runs: the script taken in one read (render.h) */
    size_t len, off, script_len;
    unsigned char *rbuf;  /* RX_EXEC_READ: every read of stdout/stderr lands here */
    size_t rmax;          /* the most of rbuf a read filled (wiped at the end) */
    rx_exec_stdin_pull pull; /* stdin pulled after data (see exec.h) */
    void *pull_ud;
    unsigned char *ibuf;  /* RX_EXEC_CHUNK: the pulled stdin piece being sent */
    size_t ilen, ioff;
    uint64_t pull_left;   /* stdin bytes still to pull */
    int framed;           /* rx_exec_opts.stdin_framed: ibuf holds a frame, its header first */
    int frames_done;      /* the end frame "0\n" is in ibuf or sent */
    int src_waiting;      /* the framed source had nothing at the last pull */
    uint64_t frames, src_waits; /* frames sent, pulls that found the source empty (debug log) */
    size_t icap;          /* ibuf's size */
    rx_exec_cb cb;
    double backstop_s, drain_s;
    uv_timer_t timer;    /* backstop while running, drain after the end line */
    int timer_armed, backstop_fired, drain_expired, drain_armed;
    int gave_up;         /* the backstop or the set-up deadline ran out: the connection is stuck */
    double setup_s;
    uint64_t sent_total;  /* bytes of script and stdin written to the channel so far */
    uint64_t setup_mark;  /* sent_total when the set-up deadline was last armed */
    int cancel_req, eof_sent;
    int stdin_piped;     /* rx_exec_opts.stdin_piped */
    int run_armed;       /* the backstop is armed: the command runs (or the send is over) */
    int paused;          /* the consumer asked us to stop reading (rx_exec_pause) */
    int opening, exec_sent; /* a libssh2 request is in flight and must be completed */
    marker_filter mf;
    rx_exec_result res;
    int finished;
};

static void exec_set_state(rx_exec *e, exec_state st)
{
    rx_log(rx_session_logger(e->s), REXEC_LOG_DEBUG, "%s: exec %p: %s -> %s",
           rx_session_host(e->s)->name, (void *)e, exec_state_names[e->state],
           exec_state_names[st]);
    e->state = st;
}

static void exec_error(rx_exec *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void exec_error(rx_exec *e, int code, const char *fmt, ...)
{
    va_list ap;
    if (e->res.err != REXEC_OK) /* the first cause wins */
        return;
    va_start(ap, fmt);
    vsnprintf(e->res.errmsg, sizeof(e->res.errmsg), fmt, ap);
    va_end(ap);
    e->res.err = code;
}

/* ---- the marker filter ---------------------------------------------------------------------- */

static void mf_init(marker_filter *m, const char *nonce)
{
    memset(m, 0, sizeof(*m));
    m->plen = (size_t)snprintf(m->prefix, sizeof(m->prefix), "\036rexec:%s:", nonce);
}

/* One space-separated word of a status line into out (NUL-terminated); -1 if empty or too long. */
static int word(const char **pp, char *out, size_t cap)
{
    const char *p = *pp;
    size_t n = strcspn(p, " ");
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, p, n);
    out[n] = 0;
    *pp = p + n + (p[n] == ' ');
    return 0;
}

/* One decimal number in [lo, hi]; -1 otherwise. */
static int num(const char **pp, long lo, long hi, int *out)
{
    char w[16], *end;
    if (word(pp, w, sizeof(w)) != 0)
        return -1;
    errno = 0;
    long v = strtol(w, &end, 10);
    if (errno || *end || end == w || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static void mf_parse(rx_exec *e, const char *body)
{
    rx_exec_result *r = &e->res;
    if (strcmp(body, "start") == 0) {
        r->started = 1;
        return;
    }
    /* "end PHASE RC TIMED_OUT CONTAINMENT CANCELLED", from the VM: parsed strictly (sscanf's %d
     * is undefined on a number out of range, and the VM's bytes are not ours). */
    char phase[sizeof(r->phase)], cont[sizeof(r->containment)];
    int rc, to, cancelled;
    const char *p = body + 4;
    if (strncmp(body, "end ", 4) == 0 && word(&p, phase, sizeof(phase)) == 0 &&
        num(&p, 0, 255, &rc) == 0 && num(&p, 0, 1, &to) == 0 &&
        word(&p, cont, sizeof(cont)) == 0 && num(&p, 0, 1, &cancelled) == 0 && *p == 0) {
        memcpy(r->phase, phase, sizeof(phase));
        memcpy(r->containment, cont, sizeof(cont));
        r->rc = rc, r->timed_out = to, r->cancelled = cancelled;
        r->ended = 1;
    }
}

static void mf_emit(rx_exec *e, const unsigned char *p, size_t n)
{
    if (n && e->cb.on_data)
        e->cb.on_data(e->cb.ud, REXEC_STDERR, p, n);
}

static void mf_byte_body(rx_exec *e, unsigned char c)
{
    marker_filter *m = &e->mf;
    if (c == '\n' || m->blen == MARK_BODY_MAX - 1) {
        m->body[m->blen] = 0;
        mf_parse(e, m->body);
        m->in_body = 0;
        m->blen = 0;
        return;
    }
    m->body[m->blen++] = (char)c;
}

static void mf_feed(rx_exec *e, const unsigned char *p, size_t n)
{
    marker_filter *m = &e->mf;
    size_t start = 0; /* first byte of p not yet emitted or consumed */
    for (size_t i = 0; i < n; i++) {
        if (m->in_body) {
            mf_byte_body(e, p[i]);
            start = i + 1;
        } else if (p[i] == (unsigned char)m->prefix[m->matched]) {
            if (m->matched == 0)
                mf_emit(e, p + start, i - start);
            if (++m->matched == m->plen) {
                m->in_body = 1;
                m->matched = 0;
            }
            start = i + 1;
        } else if (m->matched > 0) {
            mf_emit(e, (const unsigned char *)m->prefix, m->matched); /* a false start */
            m->matched = 0;
            start = i;
            i--; /* this byte may begin a marker */
        }
    }
    if (!m->in_body && m->matched == 0)
        mf_emit(e, p + start, n - start);
}

static void mf_flush(rx_exec *e)
{
    if (e->mf.matched > 0)
        mf_emit(e, (const unsigned char *)e->mf.prefix, e->mf.matched);
    e->mf.matched = 0;
}

/* ---- timers --------------------------------------------------------------------------------- */

static void arm(rx_exec *e, double seconds);

static void on_exec_timer(uv_timer_t *t)
{
    rx_exec *e = t->data;
    e->timer_armed = 0;
    if (!e->run_armed && e->state == EX_SEND &&
        (e->sent_total > e->setup_mark || e->paused || e->src_waiting)) {
        /* A long stdin still moving (a slow link, a big file) is not a hung connection: the
         * deadline is for setup_s without progress, so a stuck peer is still found. Nor is a
         * piped stdin's command held back by its consumer (paused: not even its start line is
         * read then); look again a second later. */
        e->setup_mark = e->sent_total;
        arm(e, e->paused ? 1.0 : e->setup_s);
        return;
    }
    if (!e->run_armed && e->res.sent) { /* a piped stdin stuck before the command said it started */
        exec_error(e, REXEC_ECONNLOST,
                   "%s: the connection does not answer: the call's stdin has not moved for %.1f s "
                   "and the command has not said it started (connect_timeout_s); it may have run: "
                   "result unknown", rx_session_host(e->s)->name, e->setup_s);
        e->gave_up = 1;
        rx_session_kick(e->s);
        return;
    }
    if (!e->run_armed) { /* the set-up deadline: channel open, exec request or script send hang */
        exec_error(e, REXEC_ETIMEDOUT,
                   "%s: the connection does not answer: the call was not started within %.1f s "
                   "(stuck in %s; connect_timeout_s); nothing ran",
                   rx_session_host(e->s)->name, e->setup_s, exec_state_names[e->state]);
        e->gave_up = 1;
        rx_session_kick(e->s);
        return;
    }
    /* Output we have not read yet is not a stuck connection: the consumer holds it back. Look
     * again a second later; the paused time does not count against the host. */
    if (e->paused) {
        arm(e, 1.0);
        return;
    }
    if (e->res.ended) {
        e->drain_expired = 1; /* escapees keep the streams open: stop waiting for them */
    } else if (!e->backstop_fired) {
        /* The remote timeout should have ended the call by now: the connection may be stuck.
         * Ask the wrapper to stop (EOF), and give it drain_s more before giving up. */
        e->backstop_fired = 1;
        e->cancel_req = 1;
        e->timer_armed = 1;
        uv_timer_start(&e->timer, on_exec_timer, (uint64_t)(e->drain_s * 1000) + EXEC_STOP_GRACE_MS, 0);
    } else {
        exec_error(e, REXEC_ECONNLOST,
                   "%s: no end of call from the host within %.0f s: connection stuck, result "
                   "unknown", rx_session_host(e->s)->name, e->backstop_s);
        e->drain_expired = 1;
        e->gave_up = 1;
    }
    rx_session_kick(e->s);
}

static void arm(rx_exec *e, double seconds)
{
    e->timer_armed = 1;
    uv_timer_start(&e->timer, on_exec_timer, (uint64_t)(seconds * 1000) + 1, 0);
}

/* The set-up deadline gives way to the backstop, once: the command runs (or may run). */
static void arm_run(rx_exec *e)
{
    if (e->run_armed)
        return;
    e->run_armed = 1;
    arm(e, e->backstop_s);
}

/* ---- states --------------------------------------------------------------------------------- */

/* What a failed channel open or exec request means for the call, which has sent nothing of its
 * script yet: ECONNLOST lets the pool move it to a fresh channel or connection (once).
 * - the connection is gone (the server went away while it was idle, and the call came before the
 *   close was seen; session.c then fails the connection);
 * - LIBSSH2_ERROR_SOCKET_NONE (-1): libssh2 1.10 stopped waiting for the reply ("no packet
 *   available yet") while other channels' packets were arriving, seen under load with many
 *   channels on one connection; the server may have accepted, but `bash -s` then reads an empty
 *   script when this channel closes, so nothing runs.
 * Anything else is the server's refusal: the host is unavailable for this call. */
static int setup_failure(int code)
{
    return rx_ssh_conn_gone(code) || code == LIBSSH2_ERROR_SOCKET_NONE ? REXEC_ECONNLOST
                                                                       : REXEC_EHOST;
}

static int st_open(rx_exec *e)
{
    char m[200];
    if (e->cancel_req && !e->opening) {
        exec_error(e, REXEC_ECANCELLED, "%s: cancelled before it started", rx_session_host(e->s)->name);
        exec_set_state(e, EX_DONE);
        return RX_STEP_DONE;
    }
    e->ch = libssh2_channel_open_ex(rx_session_ssh(e->s), "session", sizeof("session") - 1,
                                    RX_EXEC_WINDOW, RX_EXEC_PACKET, NULL, 0);
    if (e->ch) {
        e->opening = 0;
        exec_set_state(e, EX_EXEC);
        return RX_STEP_PROGRESS;
    }
    int code = rx_session_last_error(e->s, m, sizeof(m));
    e->opening = code == LIBSSH2_ERROR_EAGAIN;
    if (code == LIBSSH2_ERROR_EAGAIN)
        return RX_STEP_AGAIN;
    /* sshd's MaxSessions shows up as a refused channel: the connection is full, not broken. */
    if (code == LIBSSH2_ERROR_CHANNEL_FAILURE) {
        e->res.channel_full = 1;
        rx_session_mark_full(e->s);
    }
    exec_error(e, setup_failure(code), "%s: cannot open a channel: %s",
               rx_session_host(e->s)->name, m);
    exec_set_state(e, EX_DONE);
    return RX_STEP_DONE;
}

static int lost(rx_exec *e)
{
    exec_set_state(e, EX_CLOSE);
    return RX_STEP_PROGRESS;
}

static int st_exec(rx_exec *e)
{
    char m[200];
    if (e->cancel_req && !e->exec_sent) {
        exec_error(e, REXEC_ECANCELLED, "%s: cancelled before it started", rx_session_host(e->s)->name);
        return lost(e);
    }
    int rc = libssh2_channel_exec(e->ch, e->cmd);
    e->exec_sent = 1;
    if (rc == LIBSSH2_ERROR_EAGAIN)
        return RX_STEP_AGAIN;
    if (rc != 0) {
        int code = rx_session_last_error(e->s, m, sizeof(m));
        exec_error(e, setup_failure(code), "%s: the server refused to run bash: %s",
                   rx_session_host(e->s)->name, m);
        exec_set_state(e, EX_CLOSE);
        return RX_STEP_PROGRESS;
    }
    exec_set_state(e, EX_SEND);
    return RX_STEP_PROGRESS;
}

/* Reads what both streams hold, at most `budget` reads each (RX_READ_BUDGET: fairness on the
 * loop, the session drives this exec again, after the loop's other work, while libssh2 holds
 * the rest). Both, always: a remote that fills stderr first would otherwise stall a reader
 * waiting on stdout. Returns 1 if bytes came, 0 if none, -1 on error. */
static int read_streams(rx_exec *e, int budget)
{
    unsigned char *buf = e->rbuf;
    int got = 0;
    if (e->paused)
        return 0;
    for (int stream = 0; stream < 2; stream++) {
        for (int reads = 0; reads < budget; reads++) {
            ssize_t n = libssh2_channel_read_ex(e->ch, stream, (char *)buf, RX_EXEC_READ);
            if (n == LIBSSH2_ERROR_EAGAIN || n == 0)
                break;
            if (n < 0) {
                char m[200];
                rx_session_last_error(e->s, m, sizeof(m));
                exec_error(e, REXEC_ECONNLOST, "%s: connection lost while reading: %s",
                           rx_session_host(e->s)->name, m);
                return -1;
            }
            got = 1;
            if ((size_t)n > e->rmax)
                e->rmax = (size_t)n;
            if (stream == 1)
                mf_feed(e, buf, (size_t)n);
            else if (e->cb.on_data)
                e->cb.on_data(e->cb.ud, REXEC_STDOUT, buf, (size_t)n);
            if (e->paused)
                return got; /* paused from the consumer's callback: leave the rest unread */
        }
    }
    return got;
}

/* The next piece to send: the script (and copied stdin), then pulled stdin pieces. Returns the
 * bytes at *p, 0 when all is sent, -1 when the stdin source failed. */
/* The next frame of a framed stdin into ibuf: "LEN\n" right before the bytes pulled after
 * EXEC_FRAME_HDR, "0\n" at the source's end. 1 with a frame, 0 when the source has nothing yet,
 * -1 when it failed. */
#define EXEC_FRAME_HDR 16
static int next_frame(rx_exec *e)
{
    char m[300] = "", h[EXEC_FRAME_HDR];
    long n = e->pull(e->pull_ud, e->ibuf + EXEC_FRAME_HDR, RX_EXEC_FRAME, m, sizeof(m));
    e->src_waiting = n == RX_EXEC_PULL_WAIT;
    if (n == RX_EXEC_PULL_WAIT) {
        e->src_waits++;
        return 0;
    }
    if (n < 0 || (size_t)n > RX_EXEC_FRAME) {
        exec_error(e, REXEC_EREQUEST, "stdin: %s", m[0] ? m : "the source failed");
        return -1;
    }
    int hl = snprintf(h, sizeof(h), "%ld\n", n);
    memcpy(e->ibuf + EXEC_FRAME_HDR - hl, h, (size_t)hl);
    e->ioff = EXEC_FRAME_HDR - (size_t)hl;
    e->ilen = EXEC_FRAME_HDR + (size_t)n;
    e->frames_done = n == 0;
    e->frames++;
    if (e->frames_done)
        rx_log(rx_session_logger(e->s), REXEC_LOG_DEBUG,
               "%s: exec %p: stdin's last frame: %llu frames, %llu bytes with headers; the "
               "source had nothing %llu times (up to 50 ms each)", rx_session_host(e->s)->name, (void *)e,
               (unsigned long long)e->frames,
               (unsigned long long)(e->sent_total - e->script_len),
               (unsigned long long)e->src_waits);
    return 1;
}

static long send_piece(rx_exec *e, const unsigned char **p)
{
    if (e->off < e->len) {
        *p = e->data + e->off;
        return (long)(e->len - e->off);
    }
    if (e->framed && e->ioff == e->ilen && !e->frames_done) {
        int f = next_frame(e);
        if (f <= 0)
            return f < 0 ? -1 : RX_EXEC_PULL_WAIT;
    }
    if (e->ioff == e->ilen && e->pull_left > 0) {
        char m[300] = "";
        size_t want = e->pull_left < RX_EXEC_CHUNK ? (size_t)e->pull_left : RX_EXEC_CHUNK;
        long n = e->pull(e->pull_ud, e->ibuf, want, m, sizeof(m));
        if (n <= 0 || (size_t)n > want) {
            exec_error(e, REXEC_EREQUEST, "stdin: %s", m[0] ? m : "the source ended early");
            return -1;
        }
        e->ilen = (size_t)n, e->ioff = 0;
        e->pull_left -= (uint64_t)n;
    }
    *p = e->ibuf + e->ioff;
    return (long)(e->ilen - e->ioff);
}

static int send_done(const rx_exec *e)
{
    return e->off == e->len && e->ioff == e->ilen && e->pull_left == 0 &&
           (!e->framed || e->frames_done);
}

static int st_send(rx_exec *e)
{
    int progress = 0;
    const unsigned char *p;
    long want;
    if (e->cancel_req && e->off == 0) { /* bash gets an empty script and exits */
        exec_error(e, REXEC_ECANCELLED, "%s: cancelled before it started", rx_session_host(e->s)->name);
        return lost(e);
    }
    /* bounded like the reads: a big stdin must not hold the loop either */
    for (int writes = 0; writes < EXEC_WRITE_BUDGET &&
                         !(e->cancel_req && e->off >= e->script_len) &&
                         (want = send_piece(e, &p)) != 0; writes++) {
        if (want == RX_EXEC_PULL_WAIT) { /* the source has nothing yet: ask on the next step */
            progress = 1;
            break;
        }
        if (want < 0) { /* EOF now: the wrapper's copy stops short and the command never runs
                        * (a piped stdin's command is stopped before it sees the EOF) */
            e->cancel_req = 1;
            break;
        }
        ssize_t n = libssh2_channel_write(e->ch, (const char *)p, (size_t)want);
        if (n == LIBSSH2_ERROR_EAGAIN)
            break;
        if (n < 0) {
            char m[200];
            rx_session_last_error(e->s, m, sizeof(m));
            exec_error(e, REXEC_ECONNLOST, "%s: connection lost while sending: %s",
                       rx_session_host(e->s)->name, m);
            return lost(e);
        }
        if (e->off < e->len)
            e->off += (size_t)n;
        else
            e->ioff += (size_t)n;
        e->sent_total += (uint64_t)n;
        e->res.wrote_any |= n > 0;
        progress = 1;
    }
    if (e->stdin_piped && e->off >= e->script_len)
        e->res.sent = 1; /* the command may run while its stdin is still on the way */
    int r = read_streams(e, RX_READ_BUDGET);
    if (r < 0)
        return lost(e);
    if (e->stdin_piped && e->res.started)
        arm_run(e); /* the command runs: its own timeout counts from now */
    /* The wrapper has ended before taking all of its stdin (a set-up step failed, or a piped
     * stdin's command stopped reading): nobody reads the rest, and sshd, once the channel is
     * closed, opens no more window for it. Stop sending and take the end as it is. */
    int ended = e->res.ended || libssh2_channel_eof(e->ch);
    if (send_done(e) || (e->cancel_req && e->off >= e->script_len) || ended) {
        if (ended && !send_done(e))
            rx_log(rx_session_logger(e->s), REXEC_LOG_DEBUG,
                   "%s: exec %p: the wrapper ended with %llu bytes of script and stdin unsent",
                   rx_session_host(e->s)->name, (void *)e,
                   (unsigned long long)((e->len - e->off) + (e->ilen - e->ioff) + e->pull_left));
        /* "sent": the script may have run (a script cut short runs nothing, see exec.h) */
        e->res.sent = e->off >= e->script_len || e->res.ended;
        arm_run(e);
        exec_set_state(e, EX_RUN);
        return RX_STEP_PROGRESS;
    }
    return progress || r ? RX_STEP_PROGRESS : RX_STEP_AGAIN;
}

static int st_run(rx_exec *e)
{
    if (e->cancel_req && !e->eof_sent) {
        int rc = libssh2_channel_send_eof(e->ch); /* the wrapper's watchdog stops the command */
        if (rc == LIBSSH2_ERROR_EAGAIN)
            return RX_STEP_AGAIN;
        e->eof_sent = 1;
    }
    /* Once the drain has expired, what libssh2 already holds is read whole (no budget: the
     * call ends now, and a budget would cut its output short); escapees' later bytes are not. */
    int r = read_streams(e, e->drain_expired ? INT_MAX : RX_READ_BUDGET);
    if (r < 0)
        return lost(e);
    /* The end line came: from now on only escapees can hold the streams open. The drain
     * period replaces the backstop (still armed here), which would otherwise keep the call
     * open for the whole timeout + kill-after + slack. */
    if (e->res.ended && !e->drain_armed && !e->drain_expired) {
        e->drain_armed = 1;
        arm(e, e->drain_s);
    }
    int pending = libssh2_poll_channel_read(e->ch, 0) > 0 || libssh2_poll_channel_read(e->ch, 1) > 0;
    /* A consumer that paused the call (from its on_data) holds the rest: its resume ends it.
     * The timer keeps looking meanwhile, as it does for every paused call (on_exec_timer). */
    if (e->drain_expired && pending && e->paused && !e->timer_armed)
        arm(e, 1.0);
    if ((libssh2_channel_eof(e->ch) && !pending) || (e->drain_expired && !(pending && e->paused))) {
        exec_set_state(e, EX_CLOSE);
        return RX_STEP_PROGRESS;
    }
    return r ? RX_STEP_PROGRESS : RX_STEP_AGAIN;
}

static void read_exit(rx_exec *e)
{
    char *sig = NULL;
    size_t siglen = 0;
    e->res.ssh_exit_status = libssh2_channel_get_exit_status(e->ch);
    if (libssh2_channel_get_exit_signal(e->ch, &sig, &siglen, NULL, NULL, NULL, NULL) == 0 && sig) {
        snprintf(e->res.ssh_exit_signal, sizeof(e->res.ssh_exit_signal), "%.*s", (int)siglen, sig);
        libssh2_free(rx_session_ssh(e->s), sig);
    }
}

static int st_close(rx_exec *e)
{
    /* A stuck peer never answers a CHANNEL_CLOSE, and libssh2_channel_close waits for that
     * answer (EAGAIN forever): after the backstop gave up, leave the channel to libssh2, which
     * frees it with the session. */
    if (e->ch && e->gave_up)
        e->ch = NULL;
    if (e->ch) {
        int rc = libssh2_channel_close(e->ch);
        if (rc == LIBSSH2_ERROR_EAGAIN)
            return RX_STEP_AGAIN;
        read_exit(e);
        libssh2_channel_free(e->ch);
        e->ch = NULL;
    }
    mf_flush(e);
    if (!e->res.ended)
        exec_error(e, REXEC_ECONNLOST, "%s: the call ended without a status from the host",
                   rx_session_host(e->s)->name);
    exec_set_state(e, EX_DONE);
    return RX_STEP_DONE;
}

/* The session reaches an exec only through these (rx_chan_ops, session.h). */
static int exec_step(rx_chan_user *u)
{
    rx_exec *e = (rx_exec *)u;
    if (e->gave_up && e->state < EX_RUN)
        exec_set_state(e, EX_CLOSE); /* st_close leaves a stuck channel to libssh2 */
    switch (e->state) {
    case EX_OPEN: return st_open(e);
    case EX_EXEC: return st_exec(e);
    case EX_SEND: return st_send(e);
    case EX_RUN: return st_run(e);
    case EX_CLOSE: return st_close(e);
    default: return RX_STEP_DONE;
    }
}

static int exec_pending(rx_chan_user *u)
{
    rx_exec *e = (rx_exec *)u;
    if (e->ch == NULL || e->state < EX_SEND || e->state > EX_RUN || e->paused)
        return 0;
    return libssh2_poll_channel_read(e->ch, 0) > 0 || libssh2_poll_channel_read(e->ch, 1) > 0 ||
           (e->state == EX_RUN && libssh2_channel_eof(e->ch));
}

static int exec_hung(const rx_chan_user *u)
{
    return ((const rx_exec *)u)->gave_up;
}

static int exec_paused(const rx_chan_user *u)
{
    const rx_exec *e = (const rx_exec *)u;
    return e->paused && e->state >= EX_SEND && e->state <= EX_RUN;
}

static int exec_holds_channel(const rx_chan_user *u)
{
    return ((const rx_exec *)u)->state != EX_DONE;
}

/* ---- life cycle ----------------------------------------------------------------------------- */

static void exec_fail(rx_chan_user *u, int code, const char *msg)
{
    rx_exec *e = (rx_exec *)u;
    exec_error(e, code, "%s", msg);
    if (e->ch) {
        /* The session is going away: libssh2 frees its channels with it. */
        e->ch = NULL;
    }
    e->state = EX_DONE;
}

/* The script holds the secrets' export lines: wipe it, not just free it. */
static void on_exec_closed(uv_handle_t *h)
{
    rx_exec *e = h->data;
    OPENSSL_cleanse(e->data, e->len);
    free(e->data);
    OPENSSL_cleanse(e->rbuf, e->rmax); /* raw output: it may hold a secret */
    free(e->rbuf);
    if (e->ibuf)
        OPENSSL_cleanse(e->ibuf, e->icap);
    free(e->ibuf);
    OPENSSL_cleanse(e, sizeof(*e));
    free(e);
}

static void exec_finish(rx_chan_user *u)
{
    rx_exec *e = (rx_exec *)u;
    if (e->finished)
        return;
    e->finished = 1;
    if (e->cb.on_done)
        e->cb.on_done(e->cb.ud, &e->res);
    uv_close((uv_handle_t *)&e->timer, on_exec_closed);
}

static const rx_chan_ops exec_ops = {.step = exec_step, .pending = exec_pending,
                                     .holds_channel = exec_holds_channel, .fail = exec_fail,
                                     .finish = exec_finish, .paused = exec_paused,
                                     .hung = exec_hung};

int rx_exec_start(rx_session *s, const rx_exec_opts *opts, const rx_exec_cb *cb, rx_exec **out)
{
    rx_exec *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return REXEC_ENOMEM;
    e->len = opts->script_len + (opts->stdin_data ? opts->stdin_len : 0);
    e->data = malloc(e->len ? e->len : 1);
    e->rbuf = malloc(RX_EXEC_READ);
    if (opts->stdin_pull && !opts->stdin_data && (opts->stdin_len > 0 || opts->stdin_framed)) {
        e->pull = opts->stdin_pull;
        e->pull_ud = opts->stdin_ud;
        e->framed = opts->stdin_framed;
        e->pull_left = e->framed ? 0 : opts->stdin_len;
        e->icap = e->framed ? EXEC_FRAME_HDR + RX_EXEC_FRAME : RX_EXEC_CHUNK;
        e->ibuf = malloc(e->icap);
    }
    if (e->data == NULL || e->rbuf == NULL || (e->pull && e->ibuf == NULL)) {
        free(e->data), free(e->rbuf), free(e->ibuf);
        free(e);
        return REXEC_ENOMEM;
    }
    memcpy(e->data, opts->script, opts->script_len);
    if (opts->stdin_data && opts->stdin_len)
        memcpy(e->data + opts->script_len, opts->stdin_data, opts->stdin_len);
    e->script_len = opts->script_len;
    rx_render_boot_cmd(e->cmd, sizeof(e->cmd), opts->script, opts->script_len);
    e->s = s;
    e->cb = *cb;
    e->backstop_s = opts->backstop_s;
    e->drain_s = opts->drain_s > 0 ? opts->drain_s : EXEC_DRAIN_DEFAULT_S;
    mf_init(&e->mf, opts->nonce);
    uv_timer_init(rx_session_loop(s), &e->timer);
    e->timer.data = e;
    e->setup_s = opts->setup_s;
    e->stdin_piped = opts->stdin_piped;
    if (e->setup_s > 0)
        arm(e, e->setup_s);
    if (out)
        *out = e;
    e->user.ops = &exec_ops;
    rx_session_attach(s, &e->user);
    return 0;
}

void rx_exec_pause(rx_exec *e, int on)
{
    if (e->finished || e->paused == on)
        return;
    e->paused = on;
    rx_session_kick(e->s); /* resumed: read what waits; paused: stop watching for it */
}

void rx_exec_cancel(rx_exec *e)
{
    if (e->finished || e->cancel_req)
        return;
    e->cancel_req = 1;
    rx_session_kick(e->s);
}
