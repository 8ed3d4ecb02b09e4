/* The inventory and the catalog as JSON, for `rexec hosts`, `rexec actions` and serve. */
#include <stdlib.h>
#include <string.h>

#include "approve_tty.h"
#include "call.h"
#include "err.h"
#include "request.h"

static const char *const hostkey_names[] = {"strict", "accept-new", "pinned"};

static cJSON *host_json(const rx_host *h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", h->name);
    cJSON_AddStringToObject(o, "address", h->address);
    cJSON_AddNumberToObject(o, "port", h->port);
    cJSON_AddStringToObject(o, "user", h->user);
    cJSON_AddStringToObject(o, "host_key", h->hostkey == RX_HK_PINNED ? h->fingerprint
                                                                       : hostkey_names[h->hostkey]);
    cJSON_AddStringToObject(o, "allow", rx_risk_name(h->allow));
    cJSON_AddStringToObject(o, "approve", rx_risk_name(h->approve));
    return o;
}

static cJSON *param_json(const rx_param_spec *ps)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", ps->name);
    cJSON_AddStringToObject(o, "type", rx_ptype_name(ps->type));
    cJSON_AddBoolToObject(o, "required", ps->required);
    if (ps->pattern)
        cJSON_AddStringToObject(o, "pattern", ps->pattern);
    if (ps->default_value)
        cJSON_AddStringToObject(o, "default", ps->default_value);
    if (ps->in_scope)
        cJSON_AddBoolToObject(o, "in_scope", 1);
    if (ps->description)
        cJSON_AddStringToObject(o, "description", ps->description);
    return o;
}

static cJSON *action_json(const rx_action *a)
{
    cJSON *o = cJSON_CreateObject(), *params = cJSON_CreateArray(), *secrets = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "name", a->name);
    cJSON_AddStringToObject(o, "risk", rx_risk_name(a->risk));
    cJSON_AddStringToObject(o, "declared_risk", rx_risk_name(a->declared_risk));
    if (a->risk_floor_reason)
        cJSON_AddStringToObject(o, "risk_floor", a->risk_floor_reason);
    cJSON_AddBoolToObject(o, "network", a->network);
    cJSON_AddBoolToObject(o, "state_changing", a->state_changing);
    cJSON_AddStringToObject(o, "stdin", a->stdin_piped ? "piped" : "staged");
    cJSON_AddStringToObject(o, "command", a->command);
    for (size_t i = 0; i < a->n_params; i++)
        cJSON_AddItemToArray(params, param_json(&a->params[i]));
    for (size_t i = 0; i < a->n_secrets; i++)
        cJSON_AddItemToArray(secrets, cJSON_CreateString(a->secrets[i]));
    cJSON_AddItemToObject(o, "params", params);
    cJSON_AddItemToObject(o, "secrets", secrets);
    if (a->description)
        cJSON_AddStringToObject(o, "description", a->description);
    return o;
}

static cJSON *group_json(const rx_group *g)
{
    cJSON *o = cJSON_CreateObject(), *hosts = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "name", g->name);
    for (size_t i = 0; i < g->n_hosts; i++)
        cJSON_AddItemToArray(hosts, cJSON_CreateString(g->hosts[i]));
    cJSON_AddItemToObject(o, "hosts", hosts);
    return o;
}

char *rexec_ctx_list_json(const rexec_ctx *ctx, const char *what)
{
    const rx_ws *ws = ctx->ws;
    cJSON *a = cJSON_CreateArray();
    if (a == NULL)
        return NULL;
    if (strcmp(what, "hosts") == 0)
        for (size_t i = 0; i < ws->n_hosts; i++)
            cJSON_AddItemToArray(a, host_json(&ws->hosts[i]));
    else if (strcmp(what, "actions") == 0)
        for (size_t i = 0; i < ws->n_actions; i++)
            cJSON_AddItemToArray(a, action_json(&ws->actions[i]));
    else if (strcmp(what, "groups") == 0)
        for (size_t i = 0; i < ws->n_groups; i++)
            cJSON_AddItemToArray(a, group_json(&ws->groups[i]));
    else {
        cJSON_Delete(a);
        return NULL;
    }
    char *text = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return text;
}

struct rexec_request_doc {
    rx_request req;
    rexec_param *params;
};

int rexec_request_doc_parse(const char *text, size_t len, rexec_request_doc **doc,
                            rexec_request *view, rexec_error *err)
{
    rexec_request_doc *d = calloc(1, sizeof(*d));
    int r;
    if (d == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    if ((r = rx_request_parse(text, len, &d->req, err)) != 0 ||
        (r = rx_request_view(&d->req, view, &d->params)) != 0) {
        if (r == REXEC_ENOMEM)
            rx_fail(err, r, "out of memory");
        rexec_request_doc_free(d);
        return r;
    }
    *doc = d;
    return 0;
}

void rexec_request_doc_free(rexec_request_doc *doc)
{
    if (doc == NULL)
        return;
    rx_request_free(&doc->req);
    free(doc->params);
    free(doc);
}

int rexec_ctx_targets(const rexec_ctx *ctx, const char *targets, const char ***hosts, size_t *n,
                      rexec_error *err)
{
    return rx_ws_targets(ctx->ws, targets, hosts, n, err);
}

int rexec_approve_tty(rexec_ctx *ctx, const char *challenge_id, rexec_error *err)
{
    return rx_approve_tty(ctx->ws, challenge_id, err);
}

int rexec_ctx_parallel(const rexec_ctx *ctx)
{
    return ctx->ws->limits.parallel;
}
