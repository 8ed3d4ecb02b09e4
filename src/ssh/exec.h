/* One exec channel running one rendered wrapper script:
 *   OPEN -> EXEC -> SEND (script, then stdin bytes) -> RUN (read stdout/stderr) -> CLOSE -> DONE
 * The channel's stdin stays open while the command runs (EOF means "cancel" to the wrapper).
 * The wrapper's status lines (remote/wrapper.sh) are stripped from stderr and parsed here. */
#ifndef RX_EXEC_H
#define RX_EXEC_H

#include <stddef.h>

#include "rexec.h"
#include "session.h"

typedef struct rx_exec rx_exec;

/* How the remote side ended, as far as the controller knows. */
typedef struct rx_exec_result {
    int err;              /* REXEC_OK when the wrapper reported an end; else why not (HOST...) */
    char errmsg[1024];
    int sent;             /* the whole script reached the channel */
    int wrote_any;        /* a byte of the script went to the channel (fan-out retries: a call
                           * with nothing written provably did not start) */
    int started;          /* the wrapper said the command started */
    int ended;            /* the wrapper's end line arrived */
    char phase[16];       /* "cmd", "cd", "contain", "stdin" (when ended) */
    int rc;               /* the wrapper's view of the command's status (when ended) */
    int timed_out;
    int cancelled;
    char containment[32];
    int ssh_exit_status;  /* from the protocol: only meaningful when ssh_exit_signal is empty */
    char ssh_exit_signal[32];
    int channel_full;     /* the channel open was refused (MaxSessions): nothing was sent */
    int no_runner;        /* a runner could not start on this host: nothing was sent, and the
                           * call may run on a channel of its own (src/ssh/runner.c) */
} rx_exec_result;

typedef struct rx_exec_cb {
    void (*on_data)(void *ud, int stream, const unsigned char *data, size_t len); /* raw bytes */
    void (*on_done)(void *ud, const rx_exec_result *res); /* once; after it, e is gone */
    void *ud;
} rx_exec_cb;

/* Pulls the next stdin bytes into buf (at most n): returns how many (> 0), or -1 when the source
 * failed (msg then says why, redacted). Called only while stdin_len bytes are still due. */
typedef long (*rx_exec_stdin_pull)(void *ud, unsigned char *buf, size_t n, char *msg, size_t msgcap);

typedef struct rx_exec_opts {
    const unsigned char *script; /* copied */
    size_t script_len;
    const unsigned char *stdin_data; /* copied; sent after the script; NULL for none */
    size_t stdin_len;
    const char *nonce;   /* RX_NONCE_LEN hex chars, as rendered into the script */
    double backstop_s;   /* the controller's own limit: timeout + kill-after + slack */
    double drain_s;      /* after the end line: how long to wait for EOF from escapees */
    /* The same call for a runner (remote/runner.sh), or NULL when it can only run on a channel
     * of its own: the code the contained shell runs (exports, cwd, command), copied. */
    const unsigned char *runner_code;
    size_t runner_code_len;
    int runner_fork;     /* that code may run in a fork of the runner's slot (rx_render_runner_forks) */
    int min_rank;        /* containment the action requires (rx_containment) */
    double timeout_s;    /* the runner's deadline: the controller kills the call in-band */
    /* Instead of stdin_data (NULL then): stdin_len bytes pulled in RX_EXEC_CHUNK pieces as the
     * channel takes them, so that stdin of any size flows in flat memory. */
    rx_exec_stdin_pull stdin_pull;
    void *stdin_ud;
    double setup_s;      /* channel open + exec request + script sent within this (0: none);
                          * past it the call ends ETIMEDOUT and the connection is judged hung */
    /* The command reads its stdin as it arrives (the script says so, rx_render_in.stdin_piped):
     * it may run as soon as the script is sent, and once it has started, stdin that moves slowly
     * or not at all is its own business (the backstop, not the set-up deadline, applies). */
    int stdin_piped;
    /* stdin of unknown length (a pipe): stdin_pull fills frames of up to RX_EXEC_FRAME bytes,
     * sent as "LEN\n" + bytes and ended by "0\n" (the script has __rx_stdin_framed=1). The pull
     * then returns 0 at the end of the source and RX_EXEC_PULL_WAIT when it has nothing yet (it
     * may wait a little for it; the exec asks again on its next step and does not count the
     * wait against the connection's set-up deadline: the source keeps its own). */
    int stdin_framed;
} rx_exec_opts;

#define RX_EXEC_FRAME (4u * 1024 * 1024) /* one frame: the VM starts one dd per frame */
#define RX_EXEC_PULL_WAIT (-2L)

/* The channel's receive window and packet size (libssh2_channel_open_ex), and the size of the
 * per-exec buffer stdin is pulled into: fixed, allocated once per exec, whatever the size.
 * Chosen by measurement (docs/PERFORMANCE.md). */
#define RX_EXEC_WINDOW (2u * 1024 * 1024)
#define RX_EXEC_PACKET 32768u
#define RX_EXEC_CHUNK (256u * 1024)
/* One read of stdout/stderr takes at most this much (the exec's read buffer): with
 * RX_READ_BUDGET, what one step hands on to the redactor, the evidence and serve, whose cost
 * bounds how long other clients wait (session.h, "Fairness on the loop"). */
#define RX_EXEC_READ (64u * 1024)

/* Queues an exec on session s (it starts when s is READY and has room). Returns 0 or ENOMEM;
 * on success on_done will be called exactly once, from the loop. */
int rx_exec_start(rx_session *s, const rx_exec_opts *opts, const rx_exec_cb *cb, rx_exec **out);

/* Cancel: before the script is sent, nothing runs; after, EOF tells the wrapper to stop the
 * command, whose end is then reported as usual (cancelled = 1). */
void rx_exec_cancel(rx_exec *e);

/* Stops (on = 1) or resumes reading the channel: unread, the channel's window fills and the
 * remote command blocks in its write. The backstop does not expire while paused. */
void rx_exec_pause(rx_exec *e, int on);

#endif
