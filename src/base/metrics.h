/* Process-wide metrics and their Prometheus text rendering (exposition format 0.0.4); the list
 * of metrics and what each means is docs/metrics.md.
 *
 * Counters and histograms live in one registry per process (not per context: a scrape asks the
 * process). Threads: serve's loop counts calls, redacted bytes and reloads, the recorder's
 * drain on libuv's thread pool observes audit and evidence write times, and a gate on the pool
 * may append too; so every counter and bucket is a C11 atomic, added with relaxed order (a count
 * needs no ordering with other memory), and nothing here takes a lock. A render reads each
 * atomic once: a scrape that races an observation may see a histogram's _sum one observation
 * ahead of or behind its buckets, never buckets that disagree with each other or with _count
 * (_count is the +Inf bucket, from the same reads).
 *
 * Gauges (connections, runners, queues) are not kept here: the caller counts them at render
 * time, on the loop that owns them (serve.c, pool.c), and passes them in. */
#ifndef RX_METRICS_H
#define RX_METRICS_H

#include <stdint.h>

#include "buf.h"

/* The gate's answer, as a label. */
enum { RX_MDEC_ALLOWED = 0, RX_MDEC_REFUSED, RX_MDEC_NEEDS_APPROVAL, RX_MDEC_N };
/* How a call ended, as a label (rx_metrics_exit_class). */
enum {
    RX_MEXIT_OK = 0,
    RX_MEXIT_FAILED,
    RX_MEXIT_TIMEOUT,
    RX_MEXIT_CANCELLED,
    RX_MEXIT_UNAVAILABLE,
    RX_MEXIT_N
};

/* The decision label of a result's decision ("ALLOW", "REQUIRES_APPROVAL", "DENY" or NULL when
 * the call ended before the gate: refused). */
int rx_metrics_decision(const char *decision);
/* The exit class of a call's exit status: 0 ok; timed_out (or 124 that the timeout caused)
 * timeout; 130 cancelled; 255 unavailable; anything else failed. */
int rx_metrics_exit_class(int exit_status, int timed_out, int cancelled);

/* One call reported (a run; eval_only calls go to rx_metrics_count_eval). */
void rx_metrics_count_call(int decision, int exit_class, uint64_t duration_us);
void rx_metrics_count_eval(int decision);
/* One audit append (write + fsync of a batch of records), one evidence commit. */
void rx_metrics_observe_audit_write(uint64_t duration_us);
void rx_metrics_observe_evidence_write(uint64_t duration_us);
/* Bytes of remote output that went through the redactor. */
void rx_metrics_count_redacted_bytes(uint64_t n);
/* A reload of rexec.json (SIGHUP or the reload op): ok 1 applied, 0 refused. */
void rx_metrics_count_reload(int ok);
/* An approval notification that could not be delivered (for the notifier, from any thread). */
void rx_metrics_count_notify_failure(void);

/* Gauges, counted by the caller when it renders. Order of each array: the names in
 * docs/metrics.md (RX_MGAUGE_* below). */
enum { RX_MCONN_CONNECTING = 0, RX_MCONN_READY, RX_MCONN_FAILED, RX_MCONN_CLOSED, RX_MCONN_N };
enum { RX_MRUN_STARTING = 0, RX_MRUN_IDLE, RX_MRUN_BUSY, RX_MRUN_CLOSING, RX_MRUN_N };
enum { RX_MCLI_READING = 0, RX_MCLI_DRAINING, RX_MCLI_FLUSHING, RX_MCLI_CLOSING, RX_MCLI_N };
typedef struct rx_metrics_gauges {
    const char *version;              /* rexec_build_info's label; NULL: left out */
    uint64_t ssh_connections[RX_MCONN_N];
    uint64_t runners[RX_MRUN_N];
    uint64_t queued_calls;            /* waiting in the pool's host queues */
    uint64_t recorder_queue;          /* audit/evidence jobs waiting for the recorder */
    uint64_t serve_clients[RX_MCLI_N];
    uint64_t requests_in_flight;
} rx_metrics_gauges;

/* Appends the whole exposition (HELP, TYPE and samples of every metric) to out. Returns 0 or an
 * rx_buf error (the text in out is then incomplete). */
int rx_metrics_render(const rx_metrics_gauges *g, rx_buf *out);
/* A label value as the exposition format wants it between its quotes: \ " and newline
 * escaped. Returns 0 or an rx_buf error. */
int rx_metrics_escape_label(const char *value, rx_buf *out);

/* Every counter and histogram back to zero (unit tests). */
void rx_metrics_reset(void);

#endif
