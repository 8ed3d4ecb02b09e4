/* serve's fan-out keys into a rexec_fanout (serve_fanout.h). */
#include <stdio.h>

#include "err.h"
#include "jsonx.h"
#include "serve_fanout.h"

/* "batch" / "max_failures": a whole number, or a string "N" / "P%"; *out points at the text. */
static int count_key(const cJSON *root, const char *key, const char **out, char buf[32],
                     rexec_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    long long n;
    int r;
    *out = NULL;
    if (v == NULL)
        return 0;
    if (cJSON_IsString(v))
        return *out = v->valuestring, 0;
    if (!cJSON_IsNumber(v))
        return rx_fail(err, REXEC_EREQUEST, "%s: wants a whole number or a string \"N\" or "
                       "\"P%%\"", key);
    if ((r = rx_json_get_int(root, key, "", 1, -1000000000LL, 1000000000LL, &n, REXEC_EREQUEST,
                             err)) != 0)
        return r;
    snprintf(buf, 32, "%lld", n); /* a negative one is refused by the plan, naming the key */
    *out = buf;
    return 0;
}

int rx_serve_fanout_new(rexec_ctx *ctx, const cJSON *root, const rx_fanout_who *who,
                        rexec_fanout **out, rexec_error *err)
{
    rexec_fanout_spec spec = {0};
    char batch[32], maxf[32];
    long long canary = 0, retries = 0;
    int r;
    *out = NULL;
    if ((r = count_key(root, "batch", &spec.batch, batch, err)) != 0 ||
        (r = count_key(root, "max_failures", &spec.max_failures, maxf, err)) != 0 ||
        (r = rx_json_get_int(root, "canary", "", 0, 0, 1000000, &canary, REXEC_EREQUEST,
                             err)) != 0 ||
        (r = rx_json_get_int(root, "retry_unavailable", "", 0, 0, 10, &retries, REXEC_EREQUEST,
                             err)) != 0)
        return r;
    spec.canary = (long)canary;
    spec.retry_unavailable = (long)retries;
    if (!rexec_fanout_wanted(&spec))
        return 0;
    if ((r = rexec_fanout_new(&spec, who->n, 0, out, err)) != 0)
        return r;
    r = rexec_fanout_record_plan(ctx, *out, who->hosts, who->action, who->batch_id,
                                 who->client_user, who->client_uid, err);
    if (r != 0) {
        rexec_fanout_free(*out);
        *out = NULL;
    }
    return r;
}
