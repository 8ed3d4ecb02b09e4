/* A fan-out's own audit records (docs/audit.md, "Fan-out records"): its plan before any of its
 * calls, its stop when the failure threshold was crossed. Both carry the fan-out's batch_id as
 * their run_id, so `rexec audit verify` takes them as records that stand alone. */
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "err.h"
#include "fanout_plan.h"

static cJSON *fanout_record_new(const rexec_fanout *f, const char *phase, const char *action,
                                const char *batch_id)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    cJSON_AddStringToObject(o, "run_id", batch_id);
    cJSON_AddStringToObject(o, "batch_id", batch_id);
    cJSON_AddStringToObject(o, "phase", phase);
    rx_json_add_str(o, "action", action);
    cJSON_AddNumberToObject(o, "hosts", (double)f->n);
    if (f->max_failures >= 0)
        cJSON_AddNumberToObject(o, "max_failures", (double)f->max_failures);
    else
        cJSON_AddNullToObject(o, "max_failures");
    return o;
}

/* The names of the hosts i in [from, to) whose state is want (any state when want < 0). */
static cJSON *host_names(const rexec_fanout *f, const char *const *hosts, size_t from, size_t to,
                         int want)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = from; a && i < to; i++)
        if (want < 0 || f->state[i] == want)
            cJSON_AddItemToArray(a, cJSON_CreateString(hosts[i]));
    return a;
}

static int fanout_append(rexec_ctx *ctx, cJSON *o, const char *client_user, unsigned client_uid,
                         int now, rexec_error *err)
{
    int r = o ? rx_ctx_audit_record(ctx, o, client_user, client_uid, now, err)
              : rx_fail(err, REXEC_EAUDIT, "out of memory building the fan-out's audit record");
    cJSON_Delete(o);
    return r;
}

int rexec_fanout_record_plan(rexec_ctx *ctx, const rexec_fanout *f, const char *const *hosts,
                             const char *action, const char *batch_id, const char *client_user,
                             unsigned client_uid, rexec_error *err)
{
    if (f == NULL || batch_id == NULL)
        return 0; /* no controls, or one host: no plan to record */
    cJSON *o = fanout_record_new(f, "batch_plan", action, batch_id), *b = cJSON_CreateArray();
    for (size_t k = 0, from = 0; o && b && k < f->n_batches; from = f->ends[k++])
        cJSON_AddItemToArray(b, host_names(f, hosts, from, f->ends[k], -1));
    if (o) {
        cJSON_AddNumberToObject(o, "canary", (double)f->canary);
        cJSON_AddNumberToObject(o, "batch_size", (double)f->batch_size);
        cJSON_AddNumberToObject(o, "retry_unavailable", f->retries);
        cJSON_AddItemToObject(o, "batches", b);
    } else {
        cJSON_Delete(b);
    }
    /* now: on disk before any call of the fan-out is started, or none is */
    return fanout_append(ctx, o, client_user, client_uid, 1, err);
}

int rexec_fanout_record_stop(rexec_ctx *ctx, const rexec_fanout *f, const char *const *hosts,
                             const char *action, const char *batch_id, const char *client_user,
                             unsigned client_uid, rexec_error *err)
{
    if (f == NULL || batch_id == NULL || !f->stopped)
        return 0;
    cJSON *o = fanout_record_new(f, "batch_stop", action, batch_id);
    if (o) {
        cJSON_AddStringToObject(o, "reason", "STOPPED_FAILURE_THRESHOLD");
        cJSON_AddNumberToObject(o, "failed", (double)f->failed);
        cJSON_AddNumberToObject(o, "batch", (double)f->stop_batch + 1);
        cJSON_AddNumberToObject(o, "batches", (double)f->n_batches);
        cJSON_AddItemToObject(o, "failed_hosts", host_names(f, hosts, 0, f->n, RX_HOST_FAILED));
        /* hosts still pending now are never started: every later call is refused by the plan */
        cJSON_AddItemToObject(o, "not_started", host_names(f, hosts, 0, f->n, RX_HOST_PENDING));
    }
    /* queued: the calls still running in this batch write their outcomes in the same order */
    return fanout_append(ctx, o, client_user, client_uid, 0, err);
}
