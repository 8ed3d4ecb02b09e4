/* The fake libssh2 of the lifecycle test, and the scripted peer behind its channels (fake.h).
 *
 * It defines the libssh2_* functions that src/ssh/exec.c and src/ssh/runner.c call, on channels
 * of a fake connection (lc_conn, one per fake rx_session). Nothing reaches a socket:
 *   controller write -> to_peer (in flight) -> [network event] -> in (the peer reads it)
 *   peer output      -> fl[stream] (in flight) -> [network event] -> rd[stream] (read_ex)
 * Channel opens, exec requests and closes wait for a reply that a network event delivers. Writes,
 * EOFs and closes may answer EAGAIN (then a poll comes later) and writes may be short; a read
 * takes what libssh2's queue holds for the stream, and may pull another channel's packets into
 * that queue with no poll for them (lost wake-ups); opens may be refused
 * (LIBSSH2_ERROR_CHANNEL_FAILURE, also at the server's MaxSessions), exec requests refused; a
 * lost connection fails every call with a socket error, a random prefix of what was in flight
 * may still reach the peers, and they read EOF.
 *
 * The peer of a channel is what `bash -s` would run on the VM:
 * - a channel-per-call wrapper (exec.c): the test's script is "#LC nonce=N token=T stdin=L
 *   timeout_ms=M", padding, "__rx_main; exit"; then L stdin bytes. Like remote/wrapper.sh: EOF
 *   before the whole script: nothing runs; EOF before the stdin bytes: end "stdin"; input
 *   readable when the command would start: end "cancel" (nothing runs); else the command starts
 *   ("start" marker), writes its output, and ends by itself, by its timeout (rc 124, timed_out),
 *   or on EOF (the watchdog: rc 143, cancelled); then the end line, the exit status, EOF.
 * - a runner (runner.c, remote/runner.sh): the start text (__rx_rnonce=...), answered by
 *   "\036rexec-runner:<rnonce>:ready pid-namespace" (or ":none setup"); then frames
 *   "C nonce min_rank stdin_len code_len\n" code stdin, acknowledged by "start" on stderr as soon
 *   as the header is read; "K\n" kills the running call (rc 137, killed 1); a kill that comes
 *   before the slot started the call stops it before it runs (started 0); stdin followed by
 *   readable input is a cancel (phase cancel, nothing runs); EOF kills the call and the runner
 *   exits; a slot may report desync (nothing ran). A runner, or a call's bash -s, may also die
 *   (SIGKILL). With REXEC_LIFECYCLE_ESCAPEES=1 a call's leftover process writes after its end.
 * The test's code carries "CALLTOKEN-<n>": when a command starts, the peer reports which call
 * it is (lc_peer_ran) and every byte the command writes (lc_peer_output). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libssh2.h>

#include "fake.h"
#include "render.h"
#include "ssh_int.h"

lc_faults lc_f;

#define LC_WINDOW 65536u
#define LC_NONCE_MAX 40

typedef enum { PEER_NEW = 0, PEER_WRAPPER, PEER_RUNNER, PEER_GONE } peer_kind;
/* wrapper */
typedef enum { W_SCRIPT = 0, W_STDIN, W_READY, W_RUN } w_state;
/* runner */
typedef enum { R_START = 0, R_FRAMES, R_CODE, R_STDIN } r_state;
/* the runner's current call */
typedef enum { CALL_NONE = 0, CALL_SLOT, CALL_RUN } call_state;

typedef struct lc_cmd {
    int token;
    char nonce[LC_NONCE_MAX];
    int chunks_left, seq;
    int hang;
    uint64_t start_ms, done_at_ms, timeout_at_ms; /* timeout_at 0: none */
} lc_cmd;

struct _LIBSSH2_SESSION {
    lc_conn *conn;
};

struct _LIBSSH2_CHANNEL {
    lc_conn *conn;
    int id;
    int exec_state;  /* 0 none, 1 requested, 2 accepted, 3 refused (reply arrived) */
    int closing, close_done, counted;
    lc_bytes to_peer, accepted;
    int eof_queued;  /* the controller sent EOF (after to_peer) */
    lc_bytes in;
    int in_eof;
    lc_bytes fl[2], rd[2];
    int fl_eof, rd_eof, fl_close, rd_close;
    int exit_code, exit_sig_kill, exit_fl, exit_rd;
    peer_kind kind;
    /* the wrapper */
    w_state ws;
    long long stdin_len;
    uint64_t timeout_ms;
    lc_cmd cmd; /* wrapper: its one command; runner: the current call */
    int running;
    /* the runner */
    r_state rs;
    char rnonce[LC_NONCE_MAX];
    call_state cs;
    long long code_len;
    int frame_token;
    int stray_token; /* an escapee of this call will write after its markers */
    int cur_token; /* the call whose bytes this channel carries now (lag notes) */
    long long boot_n; /* `bash -c 'read -r -N <n> ...'`: the script's length; -1 (bash -s) or done */
    struct _LIBSSH2_CHANNEL *next;
};
typedef struct _LIBSSH2_CHANNEL lc_chan;

struct lc_conn {
    struct _LIBSSH2_SESSION ssh;
    rx_session *s;
    int dead, dead_code;
    int last_err;
    char last_msg[160];
    int open_state; /* 0 none, 1 requested, 2 reply: open, 3 reply: refused */
    int want_poll;  /* a spurious EAGAIN was answered: the socket turns ready later (a poll) */
    lc_chan *chans;
    int next_id;
    int id;
    struct lc_conn *next;
};

static lc_conn *lc_conns;
/* Bytes a write was asked to send but answered EAGAIN for: libssh2 may have taken the start of
 * them into its outgoing packet already (the caller must then write the same bytes again), so
 * for lc_world_touched a unit whose head was among them may have left. */
static lc_bytes eagain_seen;
static int chan_ids; /* channel numbers, unique in a run (for the trace) */

/* memmem/memchr on a queue that may be empty (p NULL) */
static unsigned char *find(const unsigned char *p, size_t n, const void *needle, size_t k)
{
    return n ? memmem(p, n, needle, k) : NULL;
}

static unsigned char *find_byte(const unsigned char *p, size_t n, int c)
{
    return n ? memchr(p, c, n) : NULL;
}

static void set_err(lc_conn *c, int code, const char *msg)
{
    c->last_err = code;
    snprintf(c->last_msg, sizeof(c->last_msg), "%s", msg);
}

void lc_conn_set_error(lc_conn *c, int code, const char *msg) { set_err(c, code, msg); }

int lc_conn_last_error(lc_conn *c, const char **msg)
{
    *msg = c->last_msg;
    return c->last_err;
}

int lc_conn_dead(const lc_conn *c) { return c->dead; }

lc_conn *lc_conn_new(rx_session *s)
{
    lc_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        abort();
    static int conn_ids;
    c->ssh.conn = c;
    c->s = s;
    c->id = lc_conns ? ++conn_ids : (conn_ids = 1);
    if (c->id == 1)
        chan_ids = 0;
    c->next = lc_conns;
    lc_conns = c;
    return c;
}

LIBSSH2_SESSION *lc_conn_ssh(lc_conn *c) { return &c->ssh; }

static int open_channels(const lc_conn *c)
{
    int n = 0;
    for (const lc_chan *ch = c->chans; ch; ch = ch->next)
        n += ch->counted;
    return n;
}

/* ---- the peer: output ------------------------------------------------------------------------- */

static void peer_emit(lc_chan *ch, int stream, const void *p, size_t n) { lc_bytes_add(&ch->fl[stream], p, n); }

static void peer_marker(lc_chan *ch, int stream, const char *nonce, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void peer_marker(lc_chan *ch, int stream, const char *nonce, const char *fmt, ...)
{
    char body[200], line[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof(line), "\036rexec:%s:%s\n", nonce, body);
    peer_emit(ch, stream, line, (size_t)n);
}

static void peer_exit(lc_chan *ch, int code, int killed)
{
    ch->kind = PEER_GONE;
    ch->exit_code = code;
    ch->exit_sig_kill = killed;
    ch->fl_eof = 1;
    ch->exit_fl = 1;
    ch->fl_close = 1;
    ch->running = 0;
    ch->cs = CALL_NONE;
}

/* One piece of a command's output: its call's token first, then filler that now and then looks
 * like the start of a status line (a marker filter must pass it through untouched). */
static void cmd_chunk(lc_chan *ch, lc_cmd *cmd)
{
    static const char alpha[] = "abcdefrexc:0123456789\n\036 ";
    unsigned char buf[512];
    int stream = (int)lc_below(2);
    int n = snprintf((char *)buf, sizeof(buf), "<%d.%d.%d>", cmd->token, cmd->seq++, stream);
    if (lc_permille(150)) {
        n += snprintf((char *)buf + n, sizeof(buf) - (size_t)n, "\036rexec:%.*s", (int)lc_below(9),
                      "0123456789abcdef");
    }
    int extra = (int)lc_below(60);
    for (int i = 0; i < extra && n < (int)sizeof(buf); i++)
        buf[n++] = (unsigned char)alpha[lc_below(sizeof(alpha) - 1)];
    peer_emit(ch, stream, buf, (size_t)n);
    lc_peer_output(cmd->token, stream, buf, (size_t)n);
    int huge = lc_permille(lc_f.huge);
    if (huge || lc_permille(20)) { /* now and then a big piece: several reads of each buffer */
        size_t big = huge ? 300000 + lc_below(400000) : 20000 + lc_below(60000);
        unsigned char *b = malloc(big);
        if (b == NULL)
            abort();
        for (size_t i = 0; i < big; i++)
            b[i] = (unsigned char)('a' + (i + (size_t)cmd->token) % 26);
        peer_emit(ch, stream, b, big);
        lc_peer_output(cmd->token, stream, b, big);
        free(b);
    }
}

static void cmd_start(lc_chan *ch, lc_cmd *cmd, const char *how)
{
    lc_peer_ran(cmd->token, cmd->nonce, how);
    cmd->start_ms = lc_clock_ms();
    cmd->chunks_left = (int)lc_below(6);
    cmd->hang = lc_permille(lc_f.hang);
    cmd->done_at_ms = cmd->start_ms + (lc_permille(300) ? lc_below(3000) : 0);
    ch->running = 1;
}

static int token_of(const unsigned char *p, size_t n)
{
    const unsigned char *t = find(p, n, "CALLTOKEN-", 10);
    if (t == NULL)
        return -1;
    int v = 0;
    for (t += 10; t < p + n && *t >= '0' && *t <= '9'; t++)
        v = v * 10 + (*t - '0');
    return v;
}

/* The first line of b as a C string (at most cap - 1 bytes). */
static void first_line(const lc_bytes *b, char *out, size_t cap)
{
    size_t i = 0;
    while (i < b->len && i + 1 < cap && b->p[i] != '\n') {
        out[i] = (char)b->p[i];
        i++;
    }
    out[i] = 0;
}

/* ---- the peer: wrapper ------------------------------------------------------------------------ */

static void wrapper_end(lc_chan *ch, const char *phase, int rc, int to, int cancelled)
{
    peer_marker(ch, 1, ch->cmd.nonce, "end %s %d %d pid-namespace %d", phase, rc, to, cancelled);
    peer_exit(ch, rc, 0);
}

/* 1 if it did something */
static int wrapper_step(lc_chan *ch)
{
    lc_cmd *cmd = &ch->cmd;
    switch (ch->ws) {
    case W_SCRIPT: {
        static const char tail[] = "__rx_main; exit\n";
        unsigned char *end = find(ch->in.p, ch->in.len, tail, sizeof(tail) - 1);
        if (end == NULL) {
            if (!ch->in_eof)
                return 0;
            peer_exit(ch, 0, 0); /* bash read a script cut short: definitions only, then EOF */
            return 1;
        }
        char nonce[LC_NONCE_MAX] = "", l1[200];
        int token = -1;
        first_line(&ch->in, l1, sizeof(l1));
        if (sscanf(l1, "#LC nonce=%39s token=%d stdin=%lld timeout_ms=%llu",
                   nonce, &token, &ch->stdin_len, (unsigned long long *)&ch->timeout_ms) != 4)
            abort();
        if (token_of(ch->in.p, (size_t)(end - ch->in.p)) != token)
            abort();
        snprintf(cmd->nonce, sizeof(cmd->nonce), "%s", nonce);
        cmd->token = token;
        ch->cur_token = token;
        lc_trace("peer: chan %d: bash -s has the script of call %d", ch->id, token);
        lc_bytes_drop(&ch->in, (size_t)(end - ch->in.p) + sizeof(tail) - 1);
        ch->ws = W_STDIN;
        return 1;
    }
    case W_STDIN:
        if (ch->stdin_len >= 0 && ch->in.len < (size_t)ch->stdin_len) {
            if (!ch->in_eof)
                return 0;
            wrapper_end(ch, "stdin", 1, 0, 0);
            return 1;
        }
        if (ch->stdin_len > 0)
            lc_bytes_drop(&ch->in, (size_t)ch->stdin_len);
        ch->ws = W_READY;
        return 1;
    case W_READY:
        if (ch->in.len > 0 || ch->in_eof) { /* readable before the start: cancelled, never run */
            wrapper_end(ch, "cancel", 1, 0, 1);
            return 1;
        }
        peer_marker(ch, 1, cmd->nonce, "start");
        cmd_start(ch, cmd, "wrapper");
        cmd->timeout_at_ms = cmd->start_ms + ch->timeout_ms;
        ch->ws = W_RUN;
        return 1;
    case W_RUN:
        if (ch->in.len > 0 || ch->in_eof) { /* the watchdog: TERM to the command */
            wrapper_end(ch, "cmd", 143, 0, 1);
            return 1;
        }
        if (cmd->chunks_left > 0) {
            cmd->chunks_left--;
            cmd_chunk(ch, cmd);
            return 1;
        }
        if (lc_clock_ms() >= cmd->timeout_at_ms) {
            wrapper_end(ch, "cmd", 124, 1, 0);
            return 1;
        }
        if (!cmd->hang && lc_clock_ms() >= cmd->done_at_ms) {
            wrapper_end(ch, "cmd", (int)lc_below(3), 0, 0);
            return 1;
        }
        return 0;
    }
    return 0;
}

static uint64_t wrapper_deadline(const lc_chan *ch)
{
    if (ch->ws != W_RUN || ch->cmd.chunks_left > 0)
        return 0;
    uint64_t d = ch->cmd.timeout_at_ms;
    if (!ch->cmd.hang && ch->cmd.done_at_ms < d)
        d = ch->cmd.done_at_ms;
    return d;
}

/* ---- the peer: runner ------------------------------------------------------------------------- */

static void runner_call_end(lc_chan *ch, const char *phase, int rc, int killed, int started)
{
    peer_marker(ch, 0, ch->cmd.nonce, "end");
    /* desync 0: remote/runner.sh's 7th field (a runner.c that reads 6 ignores it) */
    peer_marker(ch, 1, ch->cmd.nonce, "end %s %d 0 pid-namespace %d %d 0", phase, rc, killed, started);
    if (started && lc_permille(lc_f.stray))
        ch->stray_token = ch->cmd.token;
    ch->cs = CALL_NONE;
    ch->running = 0;
}

static void runner_kill(lc_chan *ch)
{
    if (ch->cs == CALL_SLOT)
        runner_call_end(ch, "setup", 137, 1, 0); /* the slot found the kill first */
    else if (ch->cs == CALL_RUN)
        runner_call_end(ch, "cmd", 137, 1, 1);
}

static void runner_gone(lc_chan *ch)
{
    runner_kill(ch);
    peer_exit(ch, 0, 0);
}

/* Reads one item of the runner's input; 1 if it did something. */
static int runner_input(lc_chan *ch)
{
    switch (ch->rs) {
    case R_START: {
        static const char tail[] = "__rx_runner; exit\n";
        unsigned char *end = find(ch->in.p, ch->in.len, tail, sizeof(tail) - 1);
        if (end == NULL) {
            if (!ch->in_eof)
                return 0;
            peer_exit(ch, 0, 0);
            return 1;
        }
        char l1[200];
        first_line(&ch->in, l1, sizeof(l1));
        if (sscanf(l1, "__rx_rnonce=%39s", ch->rnonce) != 1)
            abort();
        lc_bytes_drop(&ch->in, (size_t)(end - ch->in.p) + sizeof(tail) - 1);
        char line[200];
        if (lc_permille(lc_f.runner_none)) {
            int n = snprintf(line, sizeof(line), "\036rexec-runner:%s:none setup\n", ch->rnonce);
            peer_emit(ch, 0, line, (size_t)n);
            peer_exit(ch, 0, 0);
            return 1;
        }
        lc_trace("peer: chan %d: the runner is ready", ch->id);
        int n = snprintf(line, sizeof(line), "\036rexec-runner:%s:ready pid-namespace\n", ch->rnonce);
        peer_emit(ch, 0, line, (size_t)n);
        ch->rs = R_FRAMES;
        return 1;
    }
    case R_FRAMES: {
        unsigned char *nl = find_byte(ch->in.p, ch->in.len, '\n');
        if (nl == NULL) {
            if (!ch->in_eof)
                return 0;
            lc_trace("peer: chan %d: the runner reads EOF", ch->id);
            runner_gone(ch); /* EOF: stop the call and go */
            return 1;
        }
        char hdr[200];
        size_t hl = (size_t)(nl - ch->in.p);
        if (hl >= sizeof(hdr)) {
            runner_gone(ch);
            return 1;
        }
        memcpy(hdr, ch->in.p, hl);
        hdr[hl] = 0;
        lc_bytes_drop(&ch->in, hl + 1);
        if (strcmp(hdr, "K") == 0) {
            lc_trace("peer: chan %d: K (call %s)", ch->id,
                     ch->cs == CALL_SLOT ? "in its slot" : ch->cs == CALL_RUN ? "running" : "none");
            runner_kill(ch);
            return 1;
        }
        char nonce[LC_NONCE_MAX];
        int min;
        long long inlen, clen;
        if (sscanf(hdr, "C %39s %d %lld %lld", nonce, &min, &inlen, &clen) != 4) {
            runner_gone(ch); /* out of step: the runner breaks out and exits */
            return 1;
        }
        if (ch->cs != CALL_NONE) {
            lc_trace("peer: chan %d: a frame came while a call runs", ch->id);
            lc_peer_ran(-1, nonce, "frame during a call"); /* a violation in itself */
        }
        snprintf(ch->cmd.nonce, sizeof(ch->cmd.nonce), "%s", nonce);
        peer_marker(ch, 1, nonce, "start");
        ch->stdin_len = inlen;
        ch->code_len = clen;
        ch->rs = R_CODE;
        return 1;
    }
    case R_CODE:
        if (ch->in.len < (size_t)ch->code_len) {
            if (!ch->in_eof)
                return 0;
            runner_gone(ch);
            return 1;
        }
        ch->frame_token = token_of(ch->in.p, (size_t)ch->code_len);
        ch->cur_token = ch->frame_token;
        lc_trace("peer: chan %d: the runner has the frame of call %d (stdin %lld)", ch->id,
                 ch->frame_token, ch->stdin_len);
        lc_bytes_drop(&ch->in, (size_t)ch->code_len);
        ch->rs = R_STDIN;
        return 1;
    case R_STDIN:
        if (ch->stdin_len >= 0) {
            if (ch->in.len < (size_t)ch->stdin_len) {
                if (!ch->in_eof)
                    return 0;
                runner_gone(ch);
                return 1;
            }
            lc_bytes_drop(&ch->in, (size_t)ch->stdin_len);
            ch->rs = R_FRAMES;
            if (ch->in.len > 0 || ch->in_eof) { /* a kill line or EOF right behind: not started */
                ch->cmd.token = ch->frame_token;
                runner_call_end(ch, "cancel", 1, 0, 0);
                return 1;
            }
        }
        ch->rs = R_FRAMES;
        ch->cmd.token = ch->frame_token;
        ch->cmd.timeout_at_ms = 0;
        ch->cs = CALL_SLOT;
        return 1;
    }
    return 0;
}

static int runner_call_step(lc_chan *ch)
{
    lc_cmd *cmd = &ch->cmd;
    if (ch->cs == CALL_SLOT && lc_permille(lc_f.desync)) {
        /* the slot found bytes that are not this call's frame (remote/runner.sh): it runs
         * nothing and says so; runner.c then discards the runner */
        lc_trace("peer: chan %d: the slot reports desync for call %d", ch->id, cmd->token);
        peer_marker(ch, 0, cmd->nonce, "end");
        peer_marker(ch, 1, cmd->nonce, "end desync 125 0 pid-namespace 0 0 1");
        ch->cs = CALL_NONE;
        return 1;
    }
    if (ch->stray_token && (ch->cs == CALL_NONE || lc_below(2))) {
        char b[64];
        int n = snprintf(b, sizeof(b), "<stray output of call %d>", ch->stray_token);
        lc_trace("peer: chan %d: an escapee of call %d writes after its end", ch->id, ch->stray_token);
        peer_emit(ch, (int)lc_below(2), b, (size_t)n);
        ch->stray_token = 0;
        return 1;
    }
    if (ch->cs == CALL_SLOT) {
        cmd_start(ch, cmd, "runner");
        ch->cs = CALL_RUN;
        return 1;
    }
    if (ch->cs != CALL_RUN)
        return 0;
    if (cmd->chunks_left > 0) {
        cmd->chunks_left--;
        cmd_chunk(ch, cmd);
        return 1;
    }
    if (!cmd->hang && lc_clock_ms() >= cmd->done_at_ms) {
        runner_call_end(ch, "cmd", (int)lc_below(3), 0, 1);
        return 1;
    }
    return 0;
}

static int runner_input_ready(const lc_chan *ch)
{
    if (ch->in_eof)
        return 1;
    switch (ch->rs) {
    case R_START: return find(ch->in.p, ch->in.len, "__rx_runner; exit\n", 18) != NULL;
    case R_FRAMES: return find_byte(ch->in.p, ch->in.len, '\n') != NULL;
    case R_CODE: return ch->in.len >= (size_t)ch->code_len;
    case R_STDIN: return ch->stdin_len < 0 || ch->in.len >= (size_t)ch->stdin_len;
    }
    return 0;
}

static int runner_call_ready(const lc_chan *ch)
{
    if (ch->stray_token)
        return 1;
    if (ch->cs == CALL_SLOT)
        return 1;
    if (ch->cs != CALL_RUN)
        return 0;
    return ch->cmd.chunks_left > 0 || (!ch->cmd.hang && lc_clock_ms() >= ch->cmd.done_at_ms);
}

/* ---- the peer: the script in one read ----------------------------------------------------------- */

/* With `bash -c 'read -r -N <n> ...'` nothing runs until n bytes are in, and EOF before them
 * makes bash exit 255. 0: wait; 1: go on (classify the script); 2: EOF came first. */
static int boot_state(const lc_chan *ch)
{
    if (ch->boot_n < 0)
        return 1;
    if (ch->in.len >= (size_t)ch->boot_n)
        return 1;
    return ch->in_eof ? 2 : 0;
}

/* The whole script is in: it must end, at the byte the count names, with the line that runs
 * it (the count is the script's length, not more, not less). 0: wait; 1: go on. */
static int boot_take(lc_chan *ch)
{
    switch (boot_state(ch)) {
    case 0: return 0;
    case 2:
        lc_trace("peer: chan %d: the script was cut short (read -N failed): exit 255", ch->id);
        peer_exit(ch, 255, 0);
        return 0;
    }
    if (ch->boot_n >= 0) {
        static const char *tails[] = {"__rx_main; exit\n", "__rx_runner; exit\n"};
        size_t n = (size_t)ch->boot_n;
        int ok = 0;
        for (int i = 0; i < 2; i++) {
            size_t t = strlen(tails[i]);
            ok |= n >= t && memcmp(ch->in.p + n - t, tails[i], t) == 0;
        }
        if (!ok)
            abort(); /* the count is not the script's length */
        ch->boot_n = -1;
    }
    return 1;
}

/* ---- the peer: dispatch ----------------------------------------------------------------------- */

static int peer_has_work(const lc_chan *ch)
{
    switch (ch->kind) {
    case PEER_NEW:
        switch (boot_state(ch)) {
        case 0: return 0;
        case 2: return 1;
        }
        return (ch->exec_state == 2 && ch->in.len >= 12) || ch->in_eof;
    case PEER_WRAPPER: {
        /* as wrapper_step would find it (a dry run of its conditions) */
        switch (ch->ws) {
        case W_SCRIPT: return ch->in_eof || find(ch->in.p, ch->in.len, "__rx_main; exit\n", 16);
        case W_STDIN: return ch->in_eof || ch->stdin_len < 0 || ch->in.len >= (size_t)ch->stdin_len;
        case W_READY: return 1;
        case W_RUN: {
            uint64_t d = wrapper_deadline(ch);
            return ch->in.len > 0 || ch->in_eof || ch->cmd.chunks_left > 0 || (d && lc_clock_ms() >= d);
        }
        }
        return 0;
    }
    case PEER_RUNNER: return runner_input_ready(ch) || runner_call_ready(ch);
    case PEER_GONE: return 0;
    }
    return 0;
}

static int peer_step(lc_chan *ch)
{
    if (ch->kind == PEER_NEW) {
        if (!boot_take(ch))
            return ch->kind == PEER_GONE;
        if (ch->in.len >= 12 && memcmp(ch->in.p, "__rx_rnonce=", 12) == 0)
            ch->kind = PEER_RUNNER;
        else if (ch->in.len >= 4 && memcmp(ch->in.p, "#LC ", 4) == 0)
            ch->kind = PEER_WRAPPER;
        else if (ch->in_eof) {
            peer_exit(ch, 0, 0);
            return 1;
        } else if (ch->in.len >= 12)
            abort(); /* not a script of this test */
        else
            return 0;
    }
    if (ch->kind == PEER_WRAPPER) {
        if (ch->ws == W_RUN && lc_permille(lc_f.runner_die)) {
            lc_trace("peer: chan %d: bash -s is killed (SIGKILL)", ch->id);
            peer_exit(ch, 0, 1);
            return 1;
        }
        return wrapper_step(ch);
    }
    if (ch->kind == PEER_RUNNER) {
        if (lc_permille(lc_f.runner_die)) {
            lc_trace("peer: chan %d: the runner is killed (SIGKILL)", ch->id);
            peer_exit(ch, 0, 1);
            return 1;
        }
        int a = runner_input_ready(ch), b = runner_call_ready(ch);
        if (a && (!b || lc_below(2)))
            return runner_input(ch);
        if (b)
            return runner_call_step(ch);
    }
    return 0;
}

static uint64_t peer_deadline(const lc_chan *ch)
{
    if (ch->kind == PEER_WRAPPER)
        return wrapper_deadline(ch);
    if (ch->kind == PEER_RUNNER && ch->cs == CALL_RUN && ch->cmd.chunks_left == 0 && !ch->cmd.hang)
        return ch->cmd.done_at_ms;
    return 0;
}

/* ---- the network ------------------------------------------------------------------------------ */

static size_t some(size_t n)
{
    if (n <= 1 || lc_below(2))
        return n;
    return 1 + lc_below((unsigned)(n < 100000 ? n : 100000));
}

/* Bytes and EOF towards the peer. */
static int net_to_peer(lc_chan *ch)
{
    if (ch->to_peer.len > 0) {
        size_t n = some(ch->to_peer.len);
        if (ch->kind != PEER_GONE)
            lc_bytes_add(&ch->in, ch->to_peer.p, n);
        lc_bytes_drop(&ch->to_peer, n);
        return 1;
    }
    if (ch->eof_queued && !ch->in_eof) {
        ch->in_eof = 1;
        return 1;
    }
    return 0;
}

static int net_to_ctrl(lc_chan *ch)
{
    int s = (int)lc_below(2);
    if (ch->fl[s].len == 0)
        s = 1 - s;
    if (ch->fl[s].len > 0) {
        size_t n = some(ch->fl[s].len);
        lc_bytes_add(&ch->rd[s], ch->fl[s].p, n);
        lc_bytes_drop(&ch->fl[s], n);
        return 1;
    }
    if (ch->fl_eof && !ch->rd_eof) {
        ch->rd_eof = 1;
        return 1;
    }
    if (ch->exit_fl && !ch->exit_rd) {
        ch->exit_rd = 1;
        return 1;
    }
    if (ch->fl_close && !ch->rd_close) {
        ch->rd_close = 1;
        return 1;
    }
    return 0;
}

static int chan_net_work(const lc_chan *ch, int dead)
{
    if (dead)
        return 0;
    return ch->to_peer.len > 0 || (ch->eof_queued && !ch->in_eof) || ch->fl[0].len > 0 ||
           ch->fl[1].len > 0 || (ch->fl_eof && !ch->rd_eof) || (ch->exit_fl && !ch->exit_rd) ||
           (ch->fl_close && !ch->rd_close) || ch->exec_state == 1;
}

int lc_conn_has_work(const lc_conn *c)
{
    if (!c->dead && (c->open_state == 1 || c->want_poll))
        return 1;
    for (const lc_chan *ch = c->chans; ch; ch = ch->next)
        if (chan_net_work(ch, c->dead) || peer_has_work(ch))
            return 1;
    return 0;
}

int lc_conn_event(lc_conn *c)
{
    lc_chan *cand[64];
    int n = 0;
    if (!c->dead && c->want_poll && lc_below(3) == 0) {
        c->want_poll = 0;
        return 1;
    }
    if (!c->dead && c->open_state == 1 && lc_below(3) == 0) {
        int refuse = open_channels(c) >= lc_f.max_sessions || lc_permille(lc_f.open_refuse);
        c->open_state = refuse ? 3 : 2;
        return 1;
    }
    for (lc_chan *ch = c->chans; ch && n < 64; ch = ch->next)
        if (chan_net_work(ch, c->dead) || peer_has_work(ch))
            cand[n++] = ch;
    if (n == 0) {
        if (!c->dead && c->want_poll) {
            c->want_poll = 0;
            return 1;
        }
        if (!c->dead && c->open_state == 1) {
            int refuse = open_channels(c) >= lc_f.max_sessions || lc_permille(lc_f.open_refuse);
            c->open_state = refuse ? 3 : 2;
            return 1;
        }
        return -1;
    }
    lc_chan *ch = cand[lc_below((unsigned)n)];
    for (int tries = 0; tries < 4; tries++) {
        switch (lc_below(4)) {
        case 0:
            if (!c->dead && ch->exec_state == 1) {
                ch->exec_state = lc_permille(lc_f.exec_refuse) ? 3 : 2;
                return 1;
            }
            break;
        case 1:
            if (!c->dead && net_to_peer(ch))
                return 1; /* the window opens, too: the controller may write again */
            break;
        case 2:
            if (!c->dead && net_to_ctrl(ch))
                return 1;
            break;
        case 3:
            if (peer_has_work(ch) && peer_step(ch))
                return 0;
            break;
        }
    }
    return 0;
}

uint64_t lc_conn_deadline(const lc_conn *c)
{
    uint64_t best = 0;
    for (const lc_chan *ch = c->chans; ch; ch = ch->next) {
        uint64_t d = peer_deadline(ch);
        if (d && d > lc_clock_ms() && (best == 0 || d < best))
            best = d;
    }
    return best;
}

void lc_conn_lag(lc_conn *c)
{
    for (lc_chan *ch = c->chans; ch; ch = ch->next)
        if (ch->cur_token > 0 && (ch->fl[0].len || ch->fl[1].len || (ch->fl_eof && !ch->rd_eof)))
            lc_peer_lagged(ch->cur_token);
}

/* The connection is gone. A prefix of what was in flight to each peer may still have reached it
 * (TCP delivers a prefix, or nothing); then every peer reads EOF. */
void lc_conn_lost(lc_conn *c, int code)
{
    if (c->dead)
        return;
    c->dead = 1;
    c->dead_code = code;
    set_err(c, code, "connection lost (fake)");
    for (lc_chan *ch = c->chans; ch; ch = ch->next) {
        if (ch->to_peer.len > 0 && lc_f.loss_prefix) {
            size_t n = lc_below((unsigned)ch->to_peer.len + 1);
            if (ch->kind != PEER_GONE)
                lc_bytes_add(&ch->in, ch->to_peer.p, n);
        }
        lc_bytes_free(&ch->to_peer);
        ch->in_eof = 1;
        ch->counted = 0;
    }
}

/* The session is freed: its channels live on (as the VM's processes would) until their peers
 * have nothing more to do; lc_world_drain frees them. */
void lc_conn_free(lc_conn *c)
{
    lc_conn_lost(c, LIBSSH2_ERROR_SOCKET_DISCONNECT);
    c->s = NULL;
}

static void chan_free(lc_chan *ch)
{
    lc_bytes_free(&ch->to_peer);
    lc_bytes_free(&ch->accepted);
    lc_bytes_free(&ch->in);
    for (int i = 0; i < 2; i++) {
        lc_bytes_free(&ch->fl[i]);
        lc_bytes_free(&ch->rd[i]);
    }
    free(ch);
}

/* ---- the world: every connection, for the scheduler ------------------------------------------ */

void lc_session_poll(rx_session *s); /* fake_session.c */

int lc_world_event(void)
{
    lc_conn *cand[256];
    int n = 0;
    for (lc_conn *c = lc_conns; c && n < 256; c = c->next)
        if (lc_conn_has_work(c))
            cand[n++] = c;
    if (n == 0)
        return -1;
    lc_conn *c = cand[lc_below((unsigned)n)];
    int r = lc_conn_event(c);
    if (r == 1 && c->s && !c->dead)
        lc_session_poll(c->s);
    return r < 0 ? 0 : 1;
}

uint64_t lc_world_deadline(void)
{
    uint64_t best = 0;
    for (lc_conn *c = lc_conns; c; c = c->next) {
        uint64_t d = lc_conn_deadline(c);
        if (d && (best == 0 || d < best))
            best = d;
    }
    return best;
}

void lc_world_lag(void)
{
    for (lc_conn *c = lc_conns; c; c = c->next)
        lc_conn_lag(c);
}

/* Whether a byte of a unit starting with `head` may have been accepted by a channel write: the
 * head is in what a channel accepted, or what it accepted ends with a prefix of the head. */
int lc_world_touched(const char *head)
{
    size_t hl = strlen(head);
    if (find(eagain_seen.p, eagain_seen.len, head, hl))
        return 1;
    for (lc_conn *c = lc_conns; c; c = c->next)
        for (lc_chan *ch = c->chans; ch; ch = ch->next) {
            if (find(ch->accepted.p, ch->accepted.len, head, hl))
                return 1;
            for (size_t k = 1; k < hl && k <= ch->accepted.len; k++)
                if (memcmp(ch->accepted.p + ch->accepted.len - k, head, k) == 0)
                    return 1;
        }
    return 0;
}

/* A channel of a live connection holding data or an EOF that libssh2 has queued and nobody
 * reads, while the controller has nothing left to do: a lost wake-up. Returns the channel's
 * number (0: none); *token says whose call it carries. held(token): that call's consumer
 * paused it (its output is left unread on purpose). */
int lc_world_unread(int (*held)(int token), int *token)
{
    for (lc_conn *c = lc_conns; c; c = c->next) {
        if (c->s == NULL || c->dead)
            continue;
        for (lc_chan *ch = c->chans; ch; ch = ch->next)
            if (!ch->closing && (ch->rd[0].len || ch->rd[1].len || ch->rd_eof) &&
                !held(ch->cur_token)) {
                *token = ch->cur_token;
                return ch->id;
            }
    }
    return 0;
}

/* Ends the run: the peers finish what they can (with EOF: every session is closed by now), and
 * everything is freed. */
void lc_world_drain(void)
{
    for (int guard = 0; guard < 100000; guard++) {
        int any = 0;
        for (lc_conn *c = lc_conns; c; c = c->next) {
            if (c->s)
                continue;
            for (lc_chan *ch = c->chans; ch; ch = ch->next)
                if (peer_has_work(ch)) {
                    peer_step(ch);
                    any = 1;
                }
        }
        if (!any)
            break;
    }
    lc_bytes_free(&eagain_seen);
    while (lc_conns) {
        lc_conn *c = lc_conns;
        lc_conns = c->next;
        while (c->chans) {
            lc_chan *ch = c->chans;
            c->chans = ch->next;
            chan_free(ch);
        }
        free(c);
    }
}

/* ---- libssh2 ---------------------------------------------------------------------------------- */

static lc_conn *conn_of_ssh(LIBSSH2_SESSION *s) { return s->conn; }

static int dead_err(lc_conn *c)
{
    set_err(c, c->dead_code, "connection lost (fake)");
    return c->dead_code;
}

static int again(lc_conn *c);

/* EAGAIN that no pending reply explains (the socket buffer was full, a packet half read): the
 * socket becomes ready later, and the poll then runs the drive loop again. */
static int spurious(lc_conn *c)
{
    c->want_poll = 1;
    return again(c);
}

static int again(lc_conn *c)
{
    set_err(c, LIBSSH2_ERROR_EAGAIN, "would block");
    return LIBSSH2_ERROR_EAGAIN;
}

LIBSSH2_CHANNEL *libssh2_channel_open_ex(LIBSSH2_SESSION *session, const char *type,
                                         unsigned int type_len, unsigned int window,
                                         unsigned int packet, const char *msg, unsigned int msg_len)
{
    lc_conn *c = conn_of_ssh(session);
    (void)type_len, (void)window, (void)packet, (void)msg, (void)msg_len;
    if (strcmp(type, "session") != 0)
        abort();
    if (c->dead) {
        dead_err(c);
        return NULL;
    }
    /* libssh2 keeps one channel open in progress per session: whoever calls next continues it */
    if (c->open_state == 0) {
        c->open_state = 1;
        lc_hint_open_pending();
        again(c);
        return NULL;
    }
    if (c->open_state == 1) {
        again(c);
        return NULL;
    }
    if (c->open_state == 3) {
        lc_trace("fake: channel open refused on connection %d", c->id);
        c->open_state = 0;
        set_err(c, LIBSSH2_ERROR_CHANNEL_FAILURE, "Channel open failure (connect failed) (fake)");
        return NULL;
    }
    c->open_state = 0;
    lc_chan *ch = calloc(1, sizeof(*ch));
    if (ch == NULL)
        abort();
    ch->conn = c;
    ch->boot_n = -1; /* no exec yet */
    ch->id = ++chan_ids;
    ch->counted = 1;
    ch->next = c->chans;
    c->chans = ch;
    lc_trace("fake: chan %d opened on connection %d", ch->id, c->id);
    return ch;
}

int libssh2_channel_process_startup(LIBSSH2_CHANNEL *ch, const char *request, unsigned int rlen,
                                    const char *message, unsigned int mlen)
{
    lc_conn *c = ch->conn;
    /* rexec runs its scripts with `bash -c 'LC_ALL=C IFS= read -r -N <n> __rx_s || exit 255;
     * eval ...'` (render.h, rx_render_boot_cmd), or `bash -s` */
    char m[RX_BOOT_CMD_MAX];
    unsigned long long n;
    if (rlen != 4 || memcmp(request, "exec", 4) != 0 || mlen >= sizeof(m))
        abort();
    memcpy(m, message, mlen);
    m[mlen] = 0;
    if (strcmp(m, "bash -s") == 0)
        ch->boot_n = -1;
    else if (sscanf(m, "bash -c 'LC_ALL=C IFS= read -r -N %llu __rx_s || exit 255; ", &n) == 1)
        ch->boot_n = (long long)n;
    else
        abort();
    if (c->dead)
        return dead_err(c);
    if (ch->exec_state == 0) {
        ch->exec_state = 1;
        return again(c);
    }
    if (ch->exec_state == 1)
        return again(c);
    if (ch->exec_state == 3) {
        set_err(c, LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED, "Unable to complete request for channel-process-startup (fake)");
        return LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED;
    }
    return 0;
}


static int write_again(lc_conn *c, const char *buf, size_t n, int spur)
{
    size_t k = n < 32768 ? n : 32768; /* one packet (RX_EXEC_PACKET) */
    lc_bytes_add(&eagain_seen, buf, k);
    lc_bytes_adds(&eagain_seen, "\n\001\n"); /* no head spans two attempts */
    return spur ? spurious(c) : again(c);
}

ssize_t libssh2_channel_write_ex(LIBSSH2_CHANNEL *ch, int stream, const char *buf, size_t n)
{
    lc_conn *c = ch->conn;
    if (stream != 0)
        abort();
    if (c->dead)
        return dead_err(c);
    if (ch->rd_close) {
        set_err(c, LIBSSH2_ERROR_CHANNEL_CLOSED, "channel closed (fake)");
        return LIBSSH2_ERROR_CHANNEL_CLOSED;
    }
    if (ch->eof_queued)
        abort(); /* a write after EOF */
    if (n == 0)
        return 0;
    if (ch->to_peer.len >= LC_WINDOW)
        return write_again(c, buf, n, 0); /* the window opens when the peer reads */
    if (lc_permille(lc_f.eagain))
        return write_again(c, buf, n, 1);
    size_t room = LC_WINDOW - ch->to_peer.len, k = n < room ? n : room;
    if (k > 1 && lc_permille(lc_f.short_io))
        k = 1 + lc_below((unsigned)k - 1);
    lc_bytes_add(&ch->to_peer, buf, k);
    lc_bytes_add(&ch->accepted, buf, k);
    return (ssize_t)k;
}

/* libssh2 reads the socket for whichever channel asks: what it reads may be another channel's
 * packets (or EOF), which then wait in its queue while the socket is quiet: no poll comes for
 * them, and only the drive loop's pending() check finds them. */
static void pull_other(lc_chan *self)
{
    lc_chan *cand[64];
    int n = 0;
    for (lc_chan *o = self->conn->chans; o && n < 64; o = o->next)
        if (o != self && (o->fl[0].len || o->fl[1].len || (o->fl_eof && !o->rd_eof)))
            cand[n++] = o;
    if (n > 0) {
        lc_chan *o = cand[lc_below((unsigned)n)];
        lc_trace("fake: a read of chan %d pulls chan %d's packets into libssh2's queue", self->id,
                 o->id);
        net_to_ctrl(o);
    }
}

ssize_t libssh2_channel_read_ex(LIBSSH2_CHANNEL *ch, int stream, char *buf, size_t n)
{
    lc_conn *c = ch->conn;
    if (stream != 0 && stream != 1)
        abort();
    if (c->dead)
        return dead_err(c);
    if (lc_permille(lc_f.pull_other))
        pull_other(ch);
    lc_bytes *rd = &ch->rd[stream];
    if (rd->len == 0) {
        if (ch->rd_eof && ch->fl[stream].len == 0)
            return 0;
        return again(c);
    }
    /* libssh2 hands over what its queue holds for the stream, up to n: never EAGAIN nor a
     * short read while it has more (short reads come from the network's pieces instead) */
    size_t k = rd->len < n ? rd->len : n;
    memcpy(buf, rd->p, k);
    lc_bytes_drop(rd, k);
    return (ssize_t)k;
}

int libssh2_poll_channel_read(LIBSSH2_CHANNEL *ch, int extended)
{
    if (ch->conn->dead)
        return 0;
    return ch->rd[extended ? 1 : 0].len > 0;
}

int libssh2_channel_eof(LIBSSH2_CHANNEL *ch)
{
    return ch->rd_eof && ch->rd[0].len == 0 && ch->rd[1].len == 0;
}

int libssh2_channel_send_eof(LIBSSH2_CHANNEL *ch)
{
    lc_conn *c = ch->conn;
    if (c->dead)
        return dead_err(c);
    if (lc_permille(lc_f.eagain))
        return spurious(c);
    ch->eof_queued = 1;
    return 0;
}

int libssh2_channel_close(LIBSSH2_CHANNEL *ch)
{
    lc_conn *c = ch->conn;
    if (c->dead)
        return dead_err(c);
    if (!ch->closing) {
        ch->closing = 1;
        ch->eof_queued = 1; /* libssh2 sends EOF, then CLOSE */
    }
    if (!ch->rd_close)
        return again(c);
    if (lc_permille(lc_f.eagain))
        return spurious(c);
    ch->close_done = 1;
    ch->counted = 0;
    return 0;
}

int libssh2_channel_free(LIBSSH2_CHANNEL *ch)
{
    ch->counted = 0;
    ch->closing = 1;
    ch->eof_queued = 1;
    return 0; /* the memory goes with the world (lc_world_drain): the peer may still run */
}

int libssh2_channel_get_exit_status(LIBSSH2_CHANNEL *ch)
{
    return ch->exit_rd && !ch->exit_sig_kill ? ch->exit_code : 0;
}

int libssh2_channel_get_exit_signal(LIBSSH2_CHANNEL *ch, char **sig, size_t *siglen, char **msg,
                                    size_t *msglen, char **lang, size_t *langlen)
{
    if (sig)
        *sig = NULL;
    if (siglen)
        *siglen = 0;
    if (msg)
        *msg = NULL;
    if (msglen)
        *msglen = 0;
    if (lang)
        *lang = NULL;
    if (langlen)
        *langlen = 0;
    if (ch->exit_rd && ch->exit_sig_kill && sig) {
        *sig = strdup("KILL");
        if (*sig == NULL)
            abort();
        if (siglen)
            *siglen = 4;
    }
    return 0;
}

void libssh2_free(LIBSSH2_SESSION *session, void *ptr)
{
    (void)session;
    free(ptr);
}

/* ---- render.c's two functions that runner.c calls ------------------------------------------- */
/* src/shell/render.c is not linked (it pulls the workspace in): the runner's start text is built
 * as render.c builds it, from the embedded fragments, and nonces come from the seeded PRNG, so a
 * seed replays the same bytes. */

int rx_render_runner_start(rx_buf *out, const char *rnonce, int max_rank)
{
    int r = rx_buf_addf(out, "__rx_rnonce=%s __rx_max_rank=%d\n", rnonce, max_rank);
    if (r == 0)
        r = rx_buf_add(out, rx_remote_wrapper, rx_remote_wrapper_len);
    if (r == 0)
        r = rx_buf_add(out, rx_remote_runner, rx_remote_runner_len);
    return r ? r : rx_buf_adds(out, "__rx_runner; exit\n");
}

int rx_nonce_new(char out[RX_NONCE_LEN + 1])
{
    snprintf(out, RX_NONCE_LEN + 1, "%016llx%016llx", (unsigned long long)lc_rand(),
             (unsigned long long)lc_rand());
    return 0;
}

/* The state of every connection and channel, for a run that got stuck. */
void lc_world_dump(void)
{
    for (lc_conn *c = lc_conns; c; c = c->next) {
        fprintf(stderr, "    conn %p: session %p dead %d open_state %d last_err %d\n", (void *)c,
                (void *)c->s, c->dead, c->open_state, c->last_err);
        for (lc_chan *ch = c->chans; ch; ch = ch->next)
            fprintf(stderr, "      chan %d: kind %d exec %d closing %d close_done %d to_peer %zu eofq %d "
                    "in %zu in_eof %d fl %zu/%zu rd %zu/%zu fl_eof %d rd_eof %d close %d/%d ws %d rs %d cs %d token %d\n",
                    ch->id, ch->kind, ch->exec_state, ch->closing, ch->close_done, ch->to_peer.len,
                    ch->eof_queued, ch->in.len, ch->in_eof, ch->fl[0].len, ch->fl[1].len,
                    ch->rd[0].len, ch->rd[1].len, ch->fl_eof, ch->rd_eof, ch->fl_close,
                    ch->rd_close, ch->ws, ch->rs, ch->cs, ch->cur_token);
    }
}
