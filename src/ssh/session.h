/* One SSH connection to one host, driven by libuv: a named state machine
 *   RESOLVE -> CONNECT -> HANDSHAKE -> HOSTKEY -> AUTH -> READY -> (FAILED | CLOSED)
 * with non-blocking libssh2 on a uv_poll_t. In READY it runs any number of exec channels
 * (src/ssh/exec.c, through rx_chan_user) at once, up to its channel budget. */
#ifndef RX_SESSION_H
#define RX_SESSION_H

#include <uv.h>

#include "err.h"
#include "rexec.h"
#include "workspace.h"

typedef struct rx_session rx_session;

/* Unanswered keepalive probes before a READY connection is declared dead (ServerAliveCountMax). */
#define RX_KEEPALIVE_COUNT 3

/* Fairness on the loop: one stream must not hold the loop (every serve client and every other
 * connection waits while it does). A user's step reads at most RX_READ_BUDGET times per stream
 * (as libuv's uv__read stops after 32 reads) and returns RX_STEP_PROGRESS with the rest left
 * pending; a drive steps its users at most RX_DRIVE_PASSES times. A drive that ends with a user
 * still making progress, or with data libssh2 holds for it (ops->pending), comes back from the
 * loop (an idle handle, session.c) after the other handles have run, socket readable or not.
 * One read of an exec is up to RX_EXEC_READ (64 KiB), and what follows it (redaction, sha256,
 * evidence, serve's JSON) is most of a step's cost. scripts/bench.d/fairness.sh (a ping every
 * ms on one serve connection while another streams 300 MiB): p99 1.6-6.8 ms with 1 read of
 * 64 KiB, 17-70 ms when a drive read until EAGAIN (docs/architecture.md, "Fairness"). */
#define RX_READ_BUDGET 1
#define RX_DRIVE_PASSES 1

/* A user of the connection's channels (an exec today, any channel-driving module): the session
 * keeps a list of attached users and, whenever the socket may have moved, steps each through
 * its ops until none makes progress. The session knows users only through this, so modules
 * above it (exec.c) depend on the session and never the other way round. */
typedef struct rx_chan_user rx_chan_user;
enum { RX_STEP_AGAIN = 0, RX_STEP_PROGRESS = 1, RX_STEP_DONE = 2 };
typedef struct rx_chan_ops {
    int (*step)(rx_chan_user *u);    /* runs its channel as far as it goes: RX_STEP_* */
    int (*pending)(rx_chan_user *u); /* libssh2 holds data or an EOF this user has not seen */
    int (*holds_channel)(const rx_chan_user *u); /* counts against the channel budget */
    void (*fail)(rx_chan_user *u, int code, const char *msg); /* the session died */
    void (*finish)(rx_chan_user *u); /* reports and frees (after a DONE step or a fail) */
    /* Optional (NULL: never). paused: its consumer holds its output back, so the socket is not
     * read for it and its silence says nothing about the peer; hung: it ended because the
     * connection stopped answering mid-request, so the connection must go. */
    int (*paused)(const rx_chan_user *u);
    int (*hung)(const rx_chan_user *u);
} rx_chan_ops;
struct rx_chan_user {
    const rx_chan_ops *ops;
    rx_chan_user *next; /* the session's list; owned by session.c */
};

typedef enum rx_session_state {
    RX_SS_RESOLVE = 0,
    RX_SS_CONNECT,
    RX_SS_HANDSHAKE,
    RX_SS_HOSTKEY,
    RX_SS_AUTH,
    RX_SS_READY,
    RX_SS_FAILED,
    RX_SS_CLOSED
} rx_session_state;

/* What the owner (the pool) hears from a session. */
typedef struct rx_session_events {
    void (*on_ready)(void *ud, rx_session *s);                          /* READY reached */
    void (*on_failed)(void *ud, rx_session *s, const rexec_error *err); /* connection is unusable */
    void (*on_freed)(void *ud);                                          /* memory released */
    void (*on_exec_slot)(void *ud, rx_session *s); /* a channel closed: a queued call may start */
    void *ud;
} rx_session_events;

/* The origin of a socket handed over already connected (proxy_jump, jump.c), shared with the
 * session (reference counted): when it failed, why; the session then reports that reason. */
typedef struct rx_tunnel_link {
    int refs;
    int failed;
    rexec_error err;
} rx_tunnel_link;
void rx_tunnel_link_unref(rx_tunnel_link *l); /* NULL is fine */

typedef struct rx_session_opts {
    const rx_host *host;
    const char *known_hosts; /* file path */
    double connect_timeout_s; /* covers resolve, connect, handshake, host key and auth */
    double keepalive_s;       /* 0: none */
    const rx_logger *log;     /* state transitions at REXEC_LOG_DEBUG; may be NULL */
    rx_tunnel_link *tunnel;   /* non-NULL: tunnel_fd is connected already (the session owns it
                                 and this reference): no RESOLVE/CONNECT */
    int tunnel_fd;
} rx_session_opts;

/* Starts connecting. Returns NULL only on ENOMEM. Events arrive from the loop, never from here. */
rx_session *rx_session_new(uv_loop_t *loop, const rx_session_opts *opts,
                           const rx_session_events *ev);

/* Fails every exec on it with err (REXEC_ECANCELLED if NULL), tears the connection down and frees
 * the session from the loop (on_freed). Safe to call once; further use of s is invalid. */
void rx_session_close(rx_session *s, const rexec_error *err);

rx_session_state rx_session_get_state(const rx_session *s);
rx_session_state rx_session_failed_in(const rx_session *s); /* valid in on_failed */
const char *rx_session_state_name(rx_session_state st);
const rx_host *rx_session_host(const rx_session *s);
int rx_session_channels(const rx_session *s); /* channels open or opening */
/* 1 once a channel open was refused for lack of room (sshd MaxSessions): the pool should not
 * put more than the current number of channels on this connection. */
int rx_session_full(const rx_session *s);

/* For the modules of src/ssh/: the loop, a request to run the drive loop soon, attaching. */
uv_loop_t *rx_session_loop(rx_session *s);
void rx_session_kick(rx_session *s);
const rx_logger *rx_session_logger(const rx_session *s);
void rx_session_attach(rx_session *s, rx_chan_user *u);

#endif
