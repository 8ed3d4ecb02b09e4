/* The lifecycle test's seam (tests/lifecycle/): what the fake session (fake_session.c), the fake
 * libssh2 with its scripted peer (fake_libssh2.c), the PRNG, byte queues and virtual clock
 * (fake_base.c) and the test (lifecycle_test.c) share. Nothing here is part of rexec: the real
 * pool.c, runner.c, exec.c and marker.c (with buf.c, err.c and the embedded remote/ fragments)
 * are compiled into the test against these fakes instead of session.c, libssh2 and render.c
 * (whose two functions runner.c calls, rx_render_runner_start and rx_nonce_new, are at the end
 * of fake_libssh2.c). CMakeLists.txt builds it as lifecycle_fake, CTest lifecycle/fake.
 *
 * The model: one fake server connection (lc_conn) per rx_session, holding fake channels. Every
 * byte the controller writes sits "in flight" until the scheduler delivers a prefix of it to the
 * channel's peer; every byte the peer writes sits in flight until the scheduler makes it
 * readable; channel opens, exec requests and closes wait for a "reply" the same way. The
 * scheduler (lifecycle_test.c) picks, from a seeded PRNG, which of the enabled events happens
 * next, so a seed is one interleaving, and the same seed is the same run. */
#ifndef LC_FAKE_H
#define LC_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "session.h"

/* ---- the seeded PRNG (the only source of randomness in a run) -------------------------------- */
void lc_rng_seed(uint64_t seed);
uint64_t lc_rand(void);
unsigned lc_below(unsigned n);   /* 0..n-1 (0 when n is 0) */
int lc_permille(unsigned p);     /* 1 with probability p/1000 */

/* ---- the fake clock (fake_clock.c): CLOCK_MONOTONIC* is virtual, moved only by the test ------ */
void lc_clock_reset(void);
void lc_clock_advance_ms(uint64_t ms);
uint64_t lc_clock_ms(void);

/* ---- a byte queue ------------------------------------------------------------------------------ */
typedef struct lc_bytes {
    unsigned char *p;
    size_t len, cap;
} lc_bytes;
void lc_bytes_add(lc_bytes *b, const void *p, size_t n);
void lc_bytes_adds(lc_bytes *b, const char *s);
void lc_bytes_drop(lc_bytes *b, size_t n); /* removes the first n bytes */
void lc_bytes_free(lc_bytes *b);

/* ---- the trace (printed with a violation) ------------------------------------------------------ */
void lc_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- fault rates for one seed (per mille, per opportunity) ------------------------------------ */
typedef struct lc_faults {
    unsigned eagain;         /* any libssh2 call answers EAGAIN */
    unsigned short_io;       /* a write takes fewer bytes than it could */
    unsigned open_refuse;    /* a channel open refused (LIBSSH2_ERROR_CHANNEL_FAILURE) */
    unsigned exec_refuse;    /* an exec request refused */
    unsigned runner_none;    /* a runner answers ":none setup" */
    unsigned runner_die;     /* a runner, or a call's bash -s, dies (SIGKILL) at a peer step */
    unsigned hang;           /* a command does not end by itself */
    int max_sessions;        /* the server's MaxSessions per connection */
    int connect_fail;        /* per mille: a connection attempt fails (in a random state) */
    unsigned stray;          /* a call that ran on a runner leaves a process behind that writes
                              * to the channel after the call's end markers (an escapee; only
                              * with REXEC_LIFECYCLE_ESCAPEES=1: outside the runner's contract
                              * under pid-namespace containment) */
    unsigned desync;         /* a runner's slot reports desync (phase desync): nothing ran */
    unsigned pull_other;     /* a read of one channel pulls another channel's packets into
                              * libssh2's queue, with no poll event for them (lost wake-ups) */
    unsigned huge;           /* a command writes 300-700 KB at once (more than one read of an
                              * exec takes: RX_EXEC_CHUNK): KNOWN (d) only */
    int loss_prefix;         /* on a connection loss, a random prefix of the bytes in flight to
                              * the peer still reaches it (else none does) */
} lc_faults;
extern lc_faults lc_f;

/* ---- what the peer tells the test (lifecycle_test.c) ----------------------------------------- */
/* The command of call `token` started on the VM (the peer saw that nonce with it). */
void lc_peer_ran(int token, const char *nonce, const char *how);
/* The command of call `token` wrote these bytes (markers excluded) on stream 0/1. */
void lc_peer_output(int token, int stream, const unsigned char *p, size_t n);
/* Bytes for call `token` were in flight when the clock jumped: its output may be cut short. */
void lc_peer_lagged(int token);

/* A channel open is now waiting for its reply: a cancel now reaches a call in that window. */
void lc_hint_open_pending(void);

/* ---- the fake server side, for the scheduler ---------------------------------------------------- */
typedef struct lc_conn lc_conn;
lc_conn *lc_conn_new(rx_session *s);
void lc_conn_free(lc_conn *c);
void lc_conn_lost(lc_conn *c, int code); /* the TCP connection is gone: every channel fails */
int lc_conn_dead(const lc_conn *c);
int lc_conn_last_error(lc_conn *c, const char **msg);
void lc_conn_set_error(lc_conn *c, int code, const char *msg);
/* One network or peer event on this connection, chosen by the PRNG: returns 1 if something moved
 * towards the controller (the session should run its drive loop, as on a poll event), 0 if
 * something moved only on the server side, -1 if there was nothing to do. */
int lc_conn_event(lc_conn *c);
int lc_conn_has_work(const lc_conn *c);
void lc_conn_lag(lc_conn *c); /* the clock jumps: note the calls whose output is in flight */

/* fake_session.c, for the scheduler */
int lc_sessions_alive(void);
int lc_session_event(void); /* one event on a random live session; -1 if none had any */
int lc_session_fault(void); /* loses a random READY connection; -1 if none */
void lc_sessions_reset(void);

#endif
