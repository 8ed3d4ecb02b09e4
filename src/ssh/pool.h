/* The pool: warm SSH sessions by host on one libuv loop. Every call to a host reuses its
 * authenticated session; channels run side by side up to a budget below sshd's MaxSessions,
 * calls beyond it wait in a queue (or go to another connection where the host allows more).
 * A call whose connection turns out dead before anything was sent is moved to a fresh
 * connection; a call in flight when its connection dies is reported, never re-run. */
#ifndef RX_POOL_H
#define RX_POOL_H

#include <uv.h>

#include "exec.h"
#include "workspace.h"

typedef struct rx_pool rx_pool;
typedef struct rx_pool_job rx_pool_job;

typedef struct rx_pool_opts {
    const char *known_hosts;
    double connect_timeout_s;
    double keepalive_s;
    int default_channels; /* per connection, when the host does not say */
    double runner_idle_s; /* an idle runner closes after this long; 0: 30 s */
    const rx_logger *log; /* handed to every session; may be NULL */
} rx_pool_opts;

rx_pool *rx_pool_new(uv_loop_t *loop, const rx_pool_opts *opts); /* NULL on ENOMEM */

/* Runs one exec on host h (which must outlive the pool). cb->on_done is called exactly once,
 * from the loop. Returns 0 or REXEC_ENOMEM (and then calls nothing). */
int rx_pool_exec(rx_pool *p, const rx_host *h, const rx_exec_opts *opts, const rx_exec_cb *cb,
                 rx_pool_job **out);
/* Stops the job: a queued one is reported cancelled (from the loop) and never starts; one that
 * runs is stopped; the cancel is kept on the job, so one whose channel or runner turns out
 * never to have started is reported cancelled, not tried again. */
/* As rx_pool_exec, and on_start(cb->ud) runs each time the job leaves the queue for a channel or
 * a runner, before anything of it is sent: what a call needs only while it runs (its evidence
 * files) is opened there, not held while it waits. A nonzero return fails the job with err,
 * nothing sent. */
typedef int (*rx_pool_start_fn)(void *ud, rexec_error *err);
int rx_pool_exec_with_start(rx_pool *p, const rx_host *h, const rx_exec_opts *opts,
                            const rx_exec_cb *cb, rx_pool_start_fn on_start, rx_pool_job **out);
void rx_pool_cancel(rx_pool_job *j);

/* On (serve): a host's runner starts as soon as its first call ends, not with its second, so
 * that the second call is warm too (a long-lived process will make more). It closes after
 * runner_idle_s when no call comes, as any idle runner. Off by default: a one-shot `rexec run`
 * makes one call per host. */
void rx_pool_set_runner_prestart(rx_pool *p, int on);
/* A reload replaced h's entry (calls go to another rx_host from now on): h's connections close
 * once no call of theirs runs or waits. Calls that still come for h are served as before. */
void rx_pool_retire_host(rx_pool *p, const rx_host *h);
/* A request that includes h started (on = 1) or ended (on = 0; one per start). While one is
 * open, h's idle runners stay: a fan-out whose other hosts take longer than runner_idle_s
 * finds them warm at its next round. When the last ends, their idle time counts from then. */
void rx_pool_hold(rx_pool *p, const rx_host *h, int on);
/* Stops (on = 1) or resumes reading the job's output; a queued job starts paused. */
void rx_pool_pause(rx_pool_job *j, int on);

/* Fails what is queued, cancels what runs, closes every session; on_closed runs from the loop
 * once all memory is released. */
void rx_pool_close(rx_pool *p, void (*on_closed)(void *ud), void *ud);

/* What the pool holds now, for the metrics (loop thread only): its connections by state
 * ([0] connecting, [1] ready, [2] failed, [3] closed), their runners (rx_runner_count) and the
 * calls waiting in the hosts' queues. p may be NULL (all zeros). */
typedef struct rx_pool_counts {
    uint64_t conns[4];
    uint64_t runners[4];
    uint64_t queued;
} rx_pool_counts;
void rx_pool_count(const rx_pool *p, rx_pool_counts *out);

#endif
