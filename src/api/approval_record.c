/* Approval records (approval_record.h). The record's run_id is the challenge id: every record
 * of the log names its run, and a challenge's records (the refusals that made it, the decision,
 * the calls that ran on the grant with grant_id) are found by that id. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "approval_record.h"
#include "audit.h"
#include "call.h"
#include "err.h"
#include "jsonx.h"

static void add_hosts(cJSON *o, const rx_challenge *c)
{
    cJSON *a = cJSON_AddArrayToObject(o, "hosts");
    if (a == NULL)
        return;
    if (c->n_targets == 0)
        cJSON_AddItemToArray(a, cJSON_CreateString(c->host ? c->host : "?"));
    for (size_t i = 0; i < c->n_targets; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(c->targets[i].host));
}

cJSON *rx_approval_record(const rx_challenge *c)
{
    char ts[RX_AUDIT_TS_LEN];
    int approved = c->state == RX_AP_APPROVED;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    rx_audit_timestamp(ts);
    cJSON_AddStringToObject(o, "ts", ts);
    cJSON_AddStringToObject(o, "run_id", c->id);
    cJSON_AddStringToObject(o, "phase", "approval");
    cJSON_AddStringToObject(o, "challenge_id", c->id);
    cJSON_AddStringToObject(o, "decision", rx_approval_state_name(c->state));
    add_hosts(o, c);
    rx_json_add_str_or_null(o, "action", c->action);
    rx_json_add_str_or_null(o, "request_hash", c->request_hash);
    rx_json_add_str_or_null(o, "by", approved ? c->approved_by : c->denied_by);
    rx_json_add_id_or_null(o, "uid", approved ? c->approved_uid : c->denied_uid);
    rx_json_add_str_or_null(o, "via", approved ? c->approved_via : c->denied_via);
    rx_json_add_str_or_null(o, "tty", approved ? c->approved_tty : NULL);
    rx_json_add_str_or_null(o, approved ? "comment" : "reason",
                            approved ? c->comment : c->deny_reason);
    if (c->requester_uid >= 0) {
        cJSON *r = cJSON_AddObjectToObject(o, "requester");
        if (r != NULL) {
            rx_json_add_id_or_null(r, "uid", c->requester_uid);
            rx_json_add_str_or_null(r, "user", c->requester_user);
        }
    } else {
        cJSON_AddNullToObject(o, "requester");
    }
    return o;
}

/* The record goes through the recorder's queue: in order with the calls' records (a call that
 * runs on the grant is recorded after it) and sharing their fsync, without holding the loop.
 * The decision itself is already durable in its challenge file. */
typedef struct approval_job {
    rx_record_job job; /* first: the recorder hands it back */
    rx_ctx_obj obj;    /* the context waits for it before it closes (and its recorder) */
    rexec_ctx *ctx;
    char id[RX_APPROVAL_ID_LEN + 1];
} approval_job;

static void on_recorded(rx_record_job *j)
{
    approval_job *a = (approval_job *)j;
    rexec_ctx *ctx = a->ctx;
    if (j->rc != 0)
        fprintf(stderr, "rexec serve: the audit record of the decision on %s could not be "
                "written: %s\n", a->id, j->err.msg);
    rx_ctx_untrack(ctx, &a->obj);
    free(a);
    rx_ctx_released(ctx);
}

static void job_cancel(rx_ctx_obj *o)
{
    (void)o; /* a record being written is not stopped: it reports when it is durable */
}

int rx_ctx_audit_approval(rexec_ctx *ctx, const rx_challenge *c, rexec_error *err)
{
    char *text = NULL;
    approval_job *a = NULL;
    cJSON *rec = rx_approval_record(c);
    int r = rec ? rx_ctx_audit_ready(ctx, err) : rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (r == 0)
        r = rx_audit_render(rec, rx_ctx_redactor(ctx), &text, err);
    cJSON_Delete(rec);
    if (r == 0 && (a = calloc(1, sizeof(*a))) == NULL)
        return rx_recorder_append_now(ctx->rec, text, err); /* no memory for a job: now */
    if (r != 0)
        return r;
    snprintf(a->id, sizeof(a->id), "%s", c->id);
    a->ctx = ctx;
    a->job.text = text;
    a->job.done = on_recorded;
    rx_ctx_track(ctx, &a->obj, job_cancel);
    rx_recorder_submit(ctx->rec, &a->job);
    return 0;
}

int rx_ws_audit_approval(const rx_ws *ws, const rx_challenge *c, rexec_error *err)
{
    rx_audit *a = NULL;
    cJSON *rec = rx_approval_record(c);
    int r = rec ? rx_audit_open(&a, ws->dir, ws->audit_key_file, err)
                : rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (r == 0)
        r = rx_audit_append(a, rec, NULL, err);
    rx_audit_close(a);
    cJSON_Delete(rec);
    return r;
}
