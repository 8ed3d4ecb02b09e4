/* Approval records (approval_record.h). The record's run_id is the challenge id: every record
 * of the log names its run, and a challenge's records (the refusals that made it, the decision,
 * the calls that ran on the grant with grant_id) are found by that id. */
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "approval_record.h"
#include "audit.h"
#include "call.h"
#include "err.h"

static void record_now(char out[32])
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(tv.tv_usec / 1000));
}

static void add_opt(cJSON *o, const char *key, const char *v)
{
    if (v != NULL)
        cJSON_AddStringToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static void add_uid(cJSON *o, const char *key, long uid)
{
    if (uid >= 0)
        cJSON_AddNumberToObject(o, key, (double)uid);
    else
        cJSON_AddNullToObject(o, key);
}

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
    char ts[32];
    int approved = c->state == RX_AP_APPROVED;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    record_now(ts);
    cJSON_AddStringToObject(o, "ts", ts);
    cJSON_AddStringToObject(o, "run_id", c->id);
    cJSON_AddStringToObject(o, "phase", "approval");
    cJSON_AddStringToObject(o, "challenge_id", c->id);
    cJSON_AddStringToObject(o, "decision", rx_approval_state_name(c->state));
    add_hosts(o, c);
    add_opt(o, "action", c->action);
    add_opt(o, "request_hash", c->request_hash);
    add_opt(o, "by", approved ? c->approved_by : c->denied_by);
    add_uid(o, "uid", approved ? c->approved_uid : c->denied_uid);
    add_opt(o, "via", approved ? c->approved_via : c->denied_via);
    add_opt(o, "tty", approved ? c->approved_tty : NULL);
    add_opt(o, approved ? "comment" : "reason", approved ? c->comment : c->deny_reason);
    if (c->requester_uid >= 0) {
        cJSON *r = cJSON_AddObjectToObject(o, "requester");
        if (r != NULL) {
            add_uid(r, "uid", c->requester_uid);
            add_opt(r, "user", c->requester_user);
        }
    } else {
        cJSON_AddNullToObject(o, "requester");
    }
    return o;
}

int rx_ctx_audit_approval(rexec_ctx *ctx, const rx_challenge *c, rexec_error *err)
{
    char *text = NULL;
    cJSON *rec = rx_approval_record(c);
    int r = rec ? rx_ctx_audit_ready(ctx, err) : rx_fail(err, REXEC_ENOMEM, "out of memory");
    if (r == 0)
        r = rx_audit_render(rec, rx_ctx_redactor(ctx), &text, err);
    cJSON_Delete(rec);
    return r ? r : rx_recorder_append_now(ctx->rec, text, err);
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
