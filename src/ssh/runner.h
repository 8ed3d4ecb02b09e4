/* A runner: one long-lived shell on a channel (remote/runner.sh) that runs call after call,
 * one at a time, each sent as one frame; see docs/remote-contract.md ("The runner").
 *   OPEN -> EXEC -> START (definitions sent, waiting for "ready") -> IDLE <-> CALL -> CLOSE -> DONE
 * A runner is a channel user of its session (session.h) and holds one channel for its life.
 * Its owner (the pool) hears when it can take a call and when it is gone. */
#ifndef RX_RUNNER_H
#define RX_RUNNER_H

#include "exec.h"
#include "session.h"

typedef struct rx_runner rx_runner;

/* Attaches a new runner to s (READY). max_rank is the host's containment cap. idle_s: an idle
 * runner closes after this long (counted from the end of its last call), unless *held (when
 * held is not NULL) is above 0 when the time is up: then it stays until
 * rx_runner_idle_restart. NULL on ENOMEM. A runner that goes away is a channel user that is
 * done: the session's on_exec_slot tells the owner. */
rx_runner *rx_runner_new(rx_session *s, int max_rank, double idle_s, const int *held);

/* The idle runners on s count their idle time from now (their host's last hold ended). */
void rx_runner_idle_restart(rx_session *s);

/* A runner on s that takes a call now, or NULL. */
rx_runner *rx_runner_find_free(rx_session *s);

/* 1 when r takes a call now (starting or idle, and not closing). */
int rx_runner_free_for_call(const rx_runner *r);
rx_session *rx_runner_session(const rx_runner *r);

/* Runs one call (opts->runner_code must be set; opts' buffers must stay valid until on_done). cb->on_done is called once, from the loop;
 * res.no_runner says the runner could not start and nothing was sent. Returns 0, or
 * REXEC_ENOMEM / REXEC_EINTERNAL (r is busy) and then calls nothing. */
int rx_runner_call(rx_runner *r, const rx_exec_opts *opts, const rx_exec_cb *cb);

/* Closes r if it is idle (its channel is wanted for a call that cannot use a runner). */
void rx_runner_retire(rx_runner *r);

/* Stops (on = 1) or resumes reading the call's output, as rx_exec_pause: unread, the channel's
 * window fills and the command waits in its write; the backstop does not expire while paused.
 * The runner's acknowledgement of the call is read even while paused. */
void rx_runner_pause(rx_runner *r, int on);

/* Stops the call: before its frame is sent it is not run (ECANCELLED); after, a kill frame
 * stops it and its end is reported as usual (cancelled = 1). */
void rx_runner_cancel(rx_runner *r);

/* Adds s's runners by state to counts: [0] starting (open, exec, start), [1] idle, [2] in a
 * call, [3] closing (close, done). For the metrics; loop thread only. */
void rx_runner_count(rx_session *s, uint64_t counts[4]);

#endif
