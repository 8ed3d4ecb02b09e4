/* A fan-out's plan and its progress (fanout_plan.h): which host may start, when a batch is over,
 * when the failure threshold stops the rest, which failed call may be tried again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fanout_plan.h"

int rx_count_parse(const char *what, const char *text, long min, rx_count *out, rexec_error *err)
{
    size_t len = text ? strlen(text) : 0, digits = 0;
    int percent = len > 0 && text[len - 1] == '%';
    long max = percent ? 100 : RX_FANOUT_MAX_COUNT, v = 0;
    while (digits < len - (size_t)percent && text[digits] >= '0' && text[digits] <= '9' &&
           digits < 8)
        v = v * 10 + (text[digits++] - '0');
    if (len == 0 || digits == 0 || digits != len - (size_t)percent || v < min || v > max)
        return rx_fail(err, REXEC_EUSAGE, "%s wants N (a whole number from %ld to %ld) or P%% "
                       "(from %ld%% to 100%%), got \"%.40s\"", what, min, RX_FANOUT_MAX_COUNT,
                       min, text ? text : "");
    out->value = v;
    out->percent = percent;
    return 0;
}

size_t rx_count_of(const rx_count *c, size_t n, int round_up)
{
    if (!c->percent)
        return (size_t)c->value;
    size_t whole = n * (size_t)c->value;
    return whole / 100 + (round_up && whole % 100 != 0);
}

int rexec_fanout_wanted(const rexec_fanout_spec *spec)
{
    return spec && (spec->batch || spec->max_failures || spec->canary || spec->retry_unavailable);
}

/* The batch ends: the canary's, then one every batch_size hosts (the rest at once without). */
static int plan_batches(rexec_fanout *f)
{
    size_t at = 0;
    f->ends = calloc(f->n + 1, sizeof(*f->ends));
    if (f->ends == NULL)
        return -1;
    if (f->canary > 0) /* a canary of every host is one batch of them all */
        f->ends[f->n_batches++] = at = f->canary;
    while (at < f->n) {
        at = f->batch_size > 0 && f->n - at > f->batch_size ? at + f->batch_size : f->n;
        f->ends[f->n_batches++] = at;
    }
    return 0;
}

static int fanout_fields(rexec_fanout *f, const rexec_fanout_spec *spec, int cli,
                         rexec_error *err)
{
    rx_count c;
    int r;
    f->max_failures = -1;
    if (spec->batch) {
        if ((r = rx_count_parse(cli ? "--batch" : "batch", spec->batch, 1, &c, err)) != 0)
            return r;
        f->batch_size = rx_count_of(&c, f->n, 1);
        if (f->batch_size == 0)
            f->batch_size = 1;
    }
    if (spec->max_failures) {
        if ((r = rx_count_parse(cli ? "--max-failures" : "max_failures", spec->max_failures, 0,
                                &c, err)) != 0)
            return r;
        f->max_failures = (long)rx_count_of(&c, f->n, 0);
    }
    if (spec->canary < 0 || (size_t)spec->canary > f->n)
        return rx_fail(err, REXEC_EUSAGE, "%s %ld: the run has %zu host(s); a canary is 1 to %zu "
                       "of them", cli ? "--canary" : "canary", spec->canary, f->n, f->n);
    f->canary = (size_t)spec->canary;
    if (spec->retry_unavailable < 0 || spec->retry_unavailable > RX_FANOUT_MAX_RETRIES)
        return rx_fail(err, REXEC_EUSAGE, "%s wants 0 to %d, got %ld",
                       cli ? "--retry-unavailable" : "retry_unavailable", RX_FANOUT_MAX_RETRIES,
                       spec->retry_unavailable);
    f->retries = (unsigned)spec->retry_unavailable;
    return 0;
}

int rexec_fanout_new(const rexec_fanout_spec *spec, size_t n, int field_style, rexec_fanout **out,
                     rexec_error *err)
{
    rexec_fanout *f = calloc(1, sizeof(*f));
    int r;
    *out = NULL;
    if (f == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    f->n = n;
    if ((r = fanout_fields(f, spec, field_style, err)) != 0) {
        free(f);
        return r;
    }
    f->state = calloc(n + 1, 1);
    f->tries = calloc(n + 1, 1);
    if (f->state == NULL || f->tries == NULL || plan_batches(f) != 0) {
        rexec_fanout_free(f);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    *out = f;
    return 0;
}

void rexec_fanout_free(rexec_fanout *f)
{
    if (f == NULL)
        return;
    free(f->ends);
    free(f->state);
    free(f->tries);
    free(f);
}

int rexec_fanout_next(rexec_fanout *f, size_t i)
{
    if (f == NULL)
        return REXEC_FANOUT_START;
    if (i >= f->n || f->state[i] != RX_HOST_PENDING)
        return REXEC_FANOUT_WAIT; /* not a host this plan may start */
    if (f->stopped) {
        f->state[i] = RX_HOST_SKIPPED;
        f->skipped++;
        return REXEC_FANOUT_SKIP;
    }
    if (i >= f->ends[f->batch])
        return REXEC_FANOUT_WAIT;
    f->state[i] = RX_HOST_STARTED;
    f->tries[i] = 1;
    return REXEC_FANOUT_START;
}

int rexec_fanout_retry(rexec_fanout *f, size_t i, const rexec_result *res)
{
    if (f == NULL || i >= f->n || f->state[i] != RX_HOST_STARTED || f->stopped ||
        !res->nothing_sent || f->tries[i] > f->retries)
        return 0;
    f->tries[i]++;
    return 1;
}

/* Every host of the current batch is over: the next batch may start. */
static void batch_advance(rexec_fanout *f)
{
    while (f->batch + 1 < f->n_batches) {
        for (size_t k = f->batch ? f->ends[f->batch - 1] : 0; k < f->ends[f->batch]; k++)
            if (f->state[k] == RX_HOST_PENDING || f->state[k] == RX_HOST_STARTED)
                return;
        f->batch++;
    }
}

/* The batch (0-based) host i belongs to. */
static size_t batch_of(const rexec_fanout *f, size_t i)
{
    size_t k = 0;
    while (k + 1 < f->n_batches && f->ends[k] <= i)
        k++;
    return k;
}

int rexec_fanout_done(rexec_fanout *f, size_t i, const rexec_result *res)
{
    if (f == NULL || i >= f->n || f->state[i] != RX_HOST_STARTED)
        return 0;
    f->state[i] = res->exit_status != 0 ? RX_HOST_FAILED : RX_HOST_DONE;
    f->done++;
    if (res->exit_status != 0)
        f->failed++;
    batch_advance(f);
    if (f->stopped || f->max_failures < 0 || (long)f->failed <= f->max_failures)
        return 0;
    f->stopped = 1;
    f->stop_batch = batch_of(f, i); /* batch_advance may have moved past it already */
    snprintf(f->why, sizeof(f->why), "not started: %zu host(s) failed, more than the threshold "
             "(max_failures %ld); the fan-out stopped in batch %zu of %zu", f->failed,
             f->max_failures, f->stop_batch + 1, f->n_batches);
    return 1;
}

unsigned rexec_fanout_delay_ms(const rexec_fanout *f, size_t i)
{
    if (f == NULL || i >= f->n || f->tries[i] < 2)
        return 0;
    unsigned k = f->tries[i] - 2u;
    return k >= 4 ? 8000u : 500u << k;
}

unsigned rexec_fanout_tries(const rexec_fanout *f, size_t i)
{
    return f && f->retries > 0 && i < f->n ? f->tries[i] : 0; /* counted when retries are asked */
}

rexec_result rexec_fanout_skipped(rexec_fanout *f, size_t i, const char *host, const char *action)
{
    static char fallback[] = "not started: the fan-out stopped at its failure threshold";
    if (f == NULL || i >= f->n)
        return rexec_result_not_started(host, action, REXEC_ESTOPPED, fallback);
    snprintf(f->msg, sizeof(f->msg), "%s: %s", host ? host : "?", f->why);
    return rexec_result_not_started(host, action, REXEC_ESTOPPED, f->msg);
}

void rexec_fanout_get_progress(const rexec_fanout *f, rexec_fanout_progress *p)
{
    memset(p, 0, sizeof(*p));
    if (f == NULL)
        return;
    /* stopped: the batch it stopped in (the plan may have moved past it as that batch ended) */
    *p = (rexec_fanout_progress){f->n, (f->stopped ? f->stop_batch : f->batch) + 1, f->n_batches,
                                 f->done, f->failed, f->skipped, f->stopped};
}

int rexec_fanout_exit_status(const rexec_fanout *f, int worst)
{
    if (f == NULL || !f->stopped || worst == 130)
        return worst;
    return rexec_err_exit_code(REXEC_ESTOPPED);
}
