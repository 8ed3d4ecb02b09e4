/* The metrics registry and its Prometheus text (metrics.h; the list is docs/metrics.md). */
#include "metrics.h"

#include <stdatomic.h>
#include <string.h>

#define HIST_MAX_BUCKETS 16

typedef _Atomic uint64_t counter;

typedef struct histogram {
    const uint64_t *bounds_us; /* upper bounds in microseconds, ascending; +Inf is implied */
    size_t n;
    counter buckets[HIST_MAX_BUCKETS + 1]; /* not cumulative; [n] is above the last bound */
    counter sum_us;
} histogram;

/* A call takes milliseconds (a warm runner) to minutes (an action's timeout). */
static const uint64_t call_bounds[] = {5000,    10000,   25000,    50000,    100000,
                                       250000,  500000,  1000000,  2500000,  5000000,
                                       10000000, 30000000, 60000000, 300000000, 600000000};
/* An append or a commit: a write and an fsync, from tens of microseconds (tmpfs) to seconds. */
static const uint64_t write_bounds[] = {100,   250,   500,    1000,   2500,   5000,   10000,
                                        25000, 50000, 100000, 250000, 500000, 1000000, 2500000};

static struct {
    counter calls[RX_MDEC_N][RX_MEXIT_N];
    counter evals[RX_MDEC_N];
    histogram call_duration, audit_write, evidence_write;
    counter redacted_bytes;
    counter reloads[2]; /* refused, ok */
    counter notify_failures;
} reg = {
    .call_duration = {call_bounds, sizeof(call_bounds) / sizeof(*call_bounds), {0}, 0},
    .audit_write = {write_bounds, sizeof(write_bounds) / sizeof(*write_bounds), {0}, 0},
    .evidence_write = {write_bounds, sizeof(write_bounds) / sizeof(*write_bounds), {0}, 0},
};

static const char *const decision_names[RX_MDEC_N] = {"allowed", "refused", "needs_approval"};
static const char *const exit_names[RX_MEXIT_N] = {"ok", "failed", "timeout", "cancelled",
                                                   "unavailable"};

static void add(counter *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t get(counter *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static void observe(histogram *h, uint64_t us)
{
    size_t i = 0;
    while (i < h->n && us > h->bounds_us[i])
        i++;
    add(&h->buckets[i], 1);
    add(&h->sum_us, us);
}

int rx_metrics_decision(const char *decision)
{
    if (decision != NULL && strcmp(decision, "ALLOW") == 0)
        return RX_MDEC_ALLOWED;
    if (decision != NULL && strcmp(decision, "REQUIRES_APPROVAL") == 0)
        return RX_MDEC_NEEDS_APPROVAL;
    return RX_MDEC_REFUSED;
}

int rx_metrics_exit_class(int exit_status, int timed_out, int cancelled)
{
    if (exit_status == 0)
        return RX_MEXIT_OK;
    if (timed_out)
        return RX_MEXIT_TIMEOUT;
    if (cancelled || exit_status == 130)
        return RX_MEXIT_CANCELLED;
    if (exit_status == 255)
        return RX_MEXIT_UNAVAILABLE;
    return RX_MEXIT_FAILED;
}

void rx_metrics_count_call(int decision, int exit_class, uint64_t duration_us)
{
    if (decision < 0 || decision >= RX_MDEC_N || exit_class < 0 || exit_class >= RX_MEXIT_N)
        return;
    add(&reg.calls[decision][exit_class], 1);
    observe(&reg.call_duration, duration_us);
}

void rx_metrics_count_eval(int decision)
{
    if (decision >= 0 && decision < RX_MDEC_N)
        add(&reg.evals[decision], 1);
}

void rx_metrics_observe_audit_write(uint64_t duration_us)
{
    observe(&reg.audit_write, duration_us);
}

void rx_metrics_observe_evidence_write(uint64_t duration_us)
{
    observe(&reg.evidence_write, duration_us);
}

void rx_metrics_count_redacted_bytes(uint64_t n)
{
    add(&reg.redacted_bytes, n);
}

void rx_metrics_count_reload(int ok)
{
    add(&reg.reloads[ok ? 1 : 0], 1);
}

void rx_metrics_count_notify_failure(void)
{
    add(&reg.notify_failures, 1);
}

static void hist_reset(histogram *h)
{
    for (size_t i = 0; i <= HIST_MAX_BUCKETS; i++)
        atomic_store(&h->buckets[i], 0);
    atomic_store(&h->sum_us, 0);
}

void rx_metrics_reset(void)
{
    for (int d = 0; d < RX_MDEC_N; d++) {
        for (int e = 0; e < RX_MEXIT_N; e++)
            atomic_store(&reg.calls[d][e], 0);
        atomic_store(&reg.evals[d], 0);
    }
    hist_reset(&reg.call_duration);
    hist_reset(&reg.audit_write);
    hist_reset(&reg.evidence_write);
    atomic_store(&reg.redacted_bytes, 0);
    atomic_store(&reg.reloads[0], 0);
    atomic_store(&reg.reloads[1], 0);
    atomic_store(&reg.notify_failures, 0);
}

/* ---- rendering ------------------------------------------------------------------------------ */

int rx_metrics_escape_label(const char *value, rx_buf *out)
{
    int r = 0;
    for (const char *p = value; r == 0 && *p; p++) {
        if (*p == '\\')
            r = rx_buf_adds(out, "\\\\");
        else if (*p == '"')
            r = rx_buf_adds(out, "\\\"");
        else if (*p == '\n')
            r = rx_buf_adds(out, "\\n");
        else
            r = rx_buf_addc(out, (unsigned char)*p);
    }
    return r;
}

static int head(rx_buf *o, const char *name, const char *type, const char *help)
{
    return rx_buf_addf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{label="value"} n, or name n when label is NULL. */
static int sample(rx_buf *o, const char *name, const char *label, const char *value, uint64_t n)
{
    if (label == NULL)
        return rx_buf_addf(o, "%s %llu\n", name, (unsigned long long)n);
    int r = rx_buf_addf(o, "%s{%s=\"", name, label);
    if (r == 0)
        r = rx_metrics_escape_label(value, o);
    return r ? r : rx_buf_addf(o, "\"} %llu\n", (unsigned long long)n);
}

/* One unlabelled gauge or counter. */
static int single(rx_buf *o, const char *name, const char *type, const char *help, uint64_t n)
{
    int r = head(o, name, type, help);
    return r ? r : sample(o, name, NULL, NULL, n);
}

/* One labelled gauge or counter over a fixed list of label values. */
static int family(rx_buf *o, const char *name, const char *type, const char *help,
                  const char *label, const char *const values[], const uint64_t *n, size_t count)
{
    int r = head(o, name, type, help);
    for (size_t i = 0; r == 0 && i < count; i++)
        r = sample(o, name, label, values[i], n[i]);
    return r;
}

static int render_hist(rx_buf *o, const char *name, const char *help, histogram *h)
{
    uint64_t cum = 0, sum = get(&h->sum_us);
    int r = head(o, name, "histogram", help);
    for (size_t i = 0; r == 0 && i <= h->n; i++) {
        cum += get(&h->buckets[i]);
        if (i < h->n)
            r = rx_buf_addf(o, "%s_bucket{le=\"%g\"} %llu\n", name, (double)h->bounds_us[i] / 1e6,
                            (unsigned long long)cum);
        else
            r = rx_buf_addf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    }
    if (r == 0)
        r = rx_buf_addf(o, "%s_sum %llu.%06llu\n%s_count %llu\n", name,
                        (unsigned long long)(sum / 1000000), (unsigned long long)(sum % 1000000),
                        name, (unsigned long long)cum);
    return r;
}

static int render_calls(rx_buf *o)
{
    int r = head(o, "rexec_calls_total", "counter",
                 "Calls reported (run, not eval), by the gate's decision and how they ended.");
    for (int d = 0; r == 0 && d < RX_MDEC_N; d++)
        for (int e = 0; r == 0 && e < RX_MEXIT_N; e++)
            r = rx_buf_addf(o, "rexec_calls_total{decision=\"%s\",exit_class=\"%s\"} %llu\n",
                            decision_names[d], exit_names[e],
                            (unsigned long long)get(&reg.calls[d][e]));
    uint64_t evals[RX_MDEC_N];
    for (int d = 0; d < RX_MDEC_N; d++)
        evals[d] = get(&reg.evals[d]);
    return r ? r : family(o, "rexec_evals_total", "counter",
                          "Evals answered (the gate only, nothing ran), by decision.",
                          "decision", decision_names, evals, RX_MDEC_N);
}

static int render_counters(rx_buf *o)
{
    static const char *const outcomes[] = {"refused", "ok"};
    uint64_t reloads[2] = {get(&reg.reloads[0]), get(&reg.reloads[1])};
    int r = single(o, "rexec_redacted_bytes_total", "counter",
                   "Bytes of remote output that went through the redactor.",
                   get(&reg.redacted_bytes));
    if (r == 0)
        r = family(o, "rexec_reloads_total", "counter",
                   "Reloads of rexec.json (SIGHUP or the reload op), applied or refused.",
                   "result", outcomes, reloads, 2);
    if (r == 0)
        r = single(o, "rexec_notify_failures_total", "counter",
                   "Approval notifications that could not be delivered.",
                   get(&reg.notify_failures));
    return r;
}

static int render_gauges(rx_buf *o, const rx_metrics_gauges *g)
{
    static const char *const conn[RX_MCONN_N] = {"connecting", "ready", "failed", "closed"};
    static const char *const run[RX_MRUN_N] = {"starting", "idle", "busy", "closing"};
    static const char *const cli[RX_MCLI_N] = {"reading", "draining", "flushing", "closing"};
    int r = family(o, "rexec_ssh_connections", "gauge", "SSH connections to hosts, by state.",
                   "state", conn, g->ssh_connections, RX_MCONN_N);
    if (r == 0)
        r = family(o, "rexec_runners", "gauge", "Runners (warm shells on the hosts), by state.",
                   "state", run, g->runners, RX_MRUN_N);
    if (r == 0)
        r = single(o, "rexec_queued_calls", "gauge",
                   "Calls waiting in the hosts' queues for a connection or a channel.",
                   g->queued_calls);
    if (r == 0)
        r = single(o, "rexec_recorder_queue", "gauge",
                   "Audit and evidence jobs waiting for the recorder.", g->recorder_queue);
    if (r == 0)
        r = family(o, "rexec_serve_clients", "gauge", "Client connections of rexec serve, by state.",
                   "state", cli, g->serve_clients, RX_MCLI_N);
    if (r == 0)
        r = single(o, "rexec_serve_requests_in_flight", "gauge",
                   "Requests of rexec serve that have not ended.", g->requests_in_flight);
    return r;
}

int rx_metrics_render(const rx_metrics_gauges *g, rx_buf *out)
{
    int r = 0;
    if (g->version != NULL) {
        r = head(out, "rexec_build_info", "gauge", "Always 1; the version of rexec as a label.");
        if (r == 0)
            r = sample(out, "rexec_build_info", "version", g->version, 1);
    }
    if (r == 0)
        r = render_calls(out);
    if (r == 0)
        r = render_hist(out, "rexec_call_duration_seconds",
                        "Time of a call from its start to its report (run, not eval).",
                        &reg.call_duration);
    if (r == 0)
        r = render_hist(out, "rexec_audit_write_seconds",
                        "Time of one audit append (write and fsync of a batch of records).",
                        &reg.audit_write);
    if (r == 0)
        r = render_hist(out, "rexec_evidence_write_seconds",
                        "Time of one evidence commit (files fsynced and renamed into place).",
                        &reg.evidence_write);
    if (r == 0)
        r = render_counters(out);
    return r ? r : render_gauges(out, g);
}
