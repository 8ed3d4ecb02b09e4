/* A call's stdin from a pipe, FIFO, socket or character device (`rexec run --stdin -` fed by a
 * pipe): its length is known only at its end, so it is never loaded whole. Without an approval
 * or a grant binding it, it goes as it is read, in frames (rx_exec_opts.stdin_framed), in flat
 * memory: one frame buffer. With one, the gate needs its sha256 before anything is sent: it is
 * spooled into an unlinked 0600 file first, hashed, and sent from there like a --stdin FILE.
 * Either way a pause longer than stdin_timeout_s, or more than limits.max_stdin_bytes, ends the
 * call with REXEC_EREQUEST (docs/cli.md, "--stdin"). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "call.h"
#include "err.h"
#include "serve_stdin.h"

/* With bytes in hand, how long a pull waits for more before it sends a smaller frame: a fast
 * producer (cat of a file) refills the pipe within microseconds, so frames stay large (the VM
 * starts one dd per frame); a slow one (lines now and then) sees its bytes go within 5 ms. */
#define STREAM_GATHER_MS 5
/* ... and at most this long in all: a producer that trickles (a byte every few ms) must neither
 * hold the loop nor have its bytes wait for a full frame. */
#define STREAM_GATHER_MAX_S 0.05
/* With none, how long one pull waits before the exec asks again on its next step. The loop is
 * held meanwhile: this path is `rexec run`'s (serve spools what it streams), whose loop has
 * nothing else to do but its signals and timers, which then wait at most this long. */
#define STREAM_IDLE_MS 50
#define STREAM_TIMEOUT_DEFAULT_S 60.0
#define SPOOL_SLICE_MS 100

int rx_call_stdin_is_stream(mode_t mode)
{
    return S_ISFIFO(mode) || S_ISCHR(mode) || S_ISSOCK(mode);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double stream_timeout(const rexec_call *c)
{
    return c->stdin_timeout_s > 0 ? c->stdin_timeout_s : STREAM_TIMEOUT_DEFAULT_S;
}

/* Waits up to ms for the stream to be readable: 1 readable (or at its end), 0 not, -1 error. */
static int stream_ready(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        return r;
    }
}

long rx_call_stdin_stream_pull(void *ud, unsigned char *buf, size_t n, char *msg, size_t cap)
{
    rexec_call *c = ud;
    uint64_t max = c->ctx->ws->limits.max_stdin_bytes;
    size_t got = 0;
    double t0 = mono_now();
    if (c->stdin_last == 0)
        c->stdin_last = t0; /* the pause counts from the first pull */
    if (c->stdin_eof) { /* a put's trailer, in a frame of its own, before the end frame */
        rx_put_finish(c);
        return (long)rx_put_trailer_next(c, buf, n);
    }
    while (!c->stdin_eof && got < n) {
        if (got && mono_now() - t0 > STREAM_GATHER_MAX_S)
            break;
        int r = stream_ready(c->stdin_fd, got ? STREAM_GATHER_MS : STREAM_IDLE_MS);
        if (r == 0 && got)
            break;
        if (r == 0) {
            if (mono_now() - c->stdin_last < stream_timeout(c))
                return RX_EXEC_PULL_WAIT;
            snprintf(msg, cap, "%s sent nothing for %.10g s and did not end (--stdin-timeout): "
                               "stopped after %llu bytes", c->stdin_path, stream_timeout(c),
                     (unsigned long long)c->stdin_sent);
            return -1;
        }
        ssize_t k = r < 0 ? -1 : read(c->stdin_fd, buf + got, n - got);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k < 0) {
            snprintf(msg, cap, "%s: %s", c->stdin_path, strerror(errno));
            return -1;
        }
        if (k == 0)
            c->stdin_eof = 1;
        rx_put_hashed(c, buf + got, (size_t)k);
        got += (size_t)k;
        c->stdin_sent += (uint64_t)k;
        c->stdin_last = mono_now();
        if (c->stdin_sent > max) {
            snprintf(msg, cap, "%s: more than limits.max_stdin_bytes (%llu bytes)",
                     c->stdin_path, (unsigned long long)max);
            return -1;
        }
    }
    if (got == 0 && c->stdin_eof) { /* the end: a put's trailer first (call_put.c) */
        rx_put_finish(c);
        return (long)rx_put_trailer_next(c, buf, n);
    }
    return (long)got; /* 0: the end (the exec sends the end frame) */
}

int rx_call_stdin_spool(rexec_call *c, rexec_error *err)
{
    rx_spool sp;
    double pause = stream_timeout(c);
    int r = 0;
    if (!c->stdin_stream)
        return 0;
    unsigned char *buf = malloc(RX_EXEC_CHUNK);
    if (buf == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if ((r = rx_spool_open(&sp, c->ctx->ws->dir, c->ctx->ws->limits.max_stdin_bytes, err)) != 0) {
        free(buf);
        return r;
    }
    double last = mono_now();
    for (;;) {
        /* in slices, so that a cancel (Ctrl-C) is seen within one */
        int w = stream_ready(c->stdin_fd, SPOOL_SLICE_MS);
        if (atomic_load(&c->stdin_stop)) {
            r = rx_fail(err, REXEC_ECANCELLED, "%s: cancelled before it started", c->host->name);
            break;
        }
        if (w == 0 && mono_now() - last < pause)
            continue;
        ssize_t k = w > 0 ? read(c->stdin_fd, buf, RX_EXEC_CHUNK) : -1;
        if (k < 0 && (errno == EINTR || errno == EAGAIN) && w > 0)
            continue;
        if (w == 0) {
            r = rx_fail(err, REXEC_EREQUEST, "stdin: %s sent nothing for %.10g s and did not end "
                        "(--stdin-timeout): nothing ran", c->stdin_path, pause);
            break;
        }
        last = mono_now();
        if (k < 0) {
            r = rx_fail(err, REXEC_EREQUEST, "stdin: %s: %s", c->stdin_path, strerror(errno));
            break;
        }
        if (k == 0 || (r = rx_spool_add(&sp, buf, (size_t)k, err)) != 0)
            break;
    }
    OPENSSL_cleanse(buf, RX_EXEC_CHUNK);
    free(buf);
    if (r == 0 && lseek(sp.fd, 0, SEEK_SET) != 0)
        r = rx_fail(err, REXEC_EAUDIT, "stdin: cannot read back its spool: %s", strerror(errno));
    if (r != 0) {
        rx_spool_close(&sp);
        return r;
    }
    close(c->stdin_fd); /* the pipe is read to its end: the spool is the call's stdin now */
    c->stdin_fd = sp.fd;
    c->stdin_len = (size_t)sp.len;
    c->stdin_stream = 0;
    return 0;
}
