/* A call's result as the JSON object of `rexec run --json` and of serve's "result" replies. */
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "call.h"
#include "jsonx.h"


void rx_json_add_str(cJSON *o, const char *k, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

void rx_json_add_bytes(cJSON *o, const char *key, const unsigned char *p, size_t n)
{
    char k64[64];
    if (p == NULL) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    if (rx_utf8_check(p, n, NULL) == 0 && memchr(p, 0, n) == NULL) {
        char *s = strndup((const char *)p, n);
        rx_json_add_str(o, key, s ? s : "");
        free(s);
        return;
    }
    /* Not text: null under the name, and the bytes in base64 beside it (not through libcrypto:
     * the light front, src/cli/front.c, prints results without loading it). */
    char *b = malloc(4 * ((n + 2) / 3) + 1);
    if (b)
        rexec_base64_encode(b, p, n);
    cJSON_AddNullToObject(o, key);
    snprintf(k64, sizeof(k64), "%s_base64", key);
    rx_json_add_str(o, k64, b ? (char *)b : "");
    free(b);
}

void rx_result_json_outcome(cJSON *o, const rexec_result *r)
{
    cJSON_AddBoolToObject(o, "executed", r->executed);
    if (r->exit_code >= 0)
        cJSON_AddNumberToObject(o, "exit_code", r->exit_code);
    else
        cJSON_AddNullToObject(o, "exit_code");
    rx_json_add_str(o, "signal", r->signal);
    cJSON_AddBoolToObject(o, "timed_out", r->timed_out);
    cJSON_AddBoolToObject(o, "truncated", r->truncated);
    cJSON_AddNumberToObject(o, "stdout_bytes", (double)r->stdout_bytes);
    cJSON_AddNumberToObject(o, "stderr_bytes", (double)r->stderr_bytes);
    rx_json_add_str(o, "stdout_sha256", r->stdout_sha256);
    cJSON_AddNumberToObject(o, "duration_ms", (double)r->duration_ms);
    rx_json_add_str(o, "containment", r->containment);
    rx_json_add_str(o, "evidence", r->evidence);
}

cJSON *rx_result_json(const rexec_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    rx_json_add_str(o, "run_id", r->run_id);
    if (r->batch_id)
        rx_json_add_str(o, "batch_id", r->batch_id);
    if (r->traceparent)
        rx_json_add_str(o, "traceparent", r->traceparent);
    rx_json_add_str(o, "host", r->host);
    rx_json_add_str(o, "action", r->action);
    rx_json_add_str(o, "decision", r->decision);
    rx_json_add_str(o, "reason", r->reason);
    rx_json_add_str(o, "effective_risk", r->effective_risk);
    rx_result_json_outcome(o, r);
    rx_json_add_bytes(o, "stdout", r->stdout_data, r->stdout_len);
    rx_json_add_bytes(o, "stderr", r->stderr_data, r->stderr_len);
    cJSON_AddBoolToObject(o, "stdout_truncated_in_result", r->stdout_truncated_in_result);
    cJSON_AddBoolToObject(o, "stderr_truncated_in_result", r->stderr_truncated_in_result);
    cJSON_AddBoolToObject(o, "cap_killed", r->cap_killed);
    rx_json_add_str(o, "challenge_id", r->challenge_id);
    rx_json_add_str(o, "rendered", r->rendered);
    rx_json_add_str(o, "error", r->error);
    cJSON_AddNumberToObject(o, "exit_status", r->exit_status);
    if (r->put_sha256) /* a put that sent all of its file */
        rx_json_add_str(o, "put_sha256", r->put_sha256);
    if (r->tries > 0) /* a fan-out with retries counts every host's calls */
        cJSON_AddNumberToObject(o, "tries", r->tries);
    return o;
}

rexec_result rexec_result_not_started(const char *host, const char *action, int err,
                                      const char *msg)
{
    rexec_result r = {.host = host, .action = action, .exit_code = -1, .err = err,
                      .error = msg, .exit_status = rexec_err_exit_code(err)};
    if (err == REXEC_ESTOPPED) /* a fan-out's failure threshold kept it from starting */
        r.reason = "STOPPED_FAILURE_THRESHOLD";
    return r;
}

char *rexec_result_to_json(const rexec_result *r)
{
    cJSON *o = rx_result_json(r);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}
