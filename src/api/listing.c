/* The inventory and the catalog as JSON, for `rexec hosts`, `rexec actions` and serve. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "approve_tty.h"
#include "call.h"
#include "err.h"
#include "transfer.h"
#include "fsutil.h"
#include "jsonx.h"
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
    if (a->transfer != RX_XFER_NONE) { /* a file action: what it moves, and where */
        cJSON *t = cJSON_AddObjectToObject(o, rx_transfer_name(a->transfer));
        cJSON_AddStringToObject(t, "path", a->xfer_path);
        if (a->transfer == RX_XFER_GET)
            cJSON_AddBoolToObject(t, "binary", a->binary);
    }
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

/* ---- redaction of a front end's own text ------------------------------------------------ */

/* text after r (shapes only when r is NULL), malloc'd and NUL-terminated; NULL on ENOMEM. */
static char *redact_text(const rx_redactor *r, const char *text, size_t len, size_t *out_len)
{
    rx_redactor *own = NULL;
    rx_buf b;
    rexec_error e;
    char *out = NULL;
    if (r == NULL && rx_redactor_new(&own, NULL, 0, &e) != 0)
        return NULL;
    rx_buf_init(&b, len * 2 + 4096);
    if (rx_redact_buf(r ? r : own, text ? text : "", text ? len : 0, &b) == 0 &&
        (out = malloc(b.len + 1)) != NULL) {
        if (b.len)
            memcpy(out, b.data, b.len);
        out[b.len] = 0;
        if (out_len)
            *out_len = b.len;
    }
    rx_buf_free(&b);
    rx_redactor_free(own);
    return out;
}

char *rexec_ctx_redact(const rexec_ctx *ctx, const char *text, size_t len, size_t *out_len)
{
    return redact_text(ctx ? rx_ctx_redactor(ctx) : NULL, text, len, out_len);
}

/* A rexec_redactor is an rx_redactor of its own (the values are copied into it). */
int rexec_redactor_open(const char *workspace_dir, rexec_redactor **out, rexec_error *err)
{
    rx_ws *ws = NULL;
    rx_secret *secrets = NULL;
    rx_buf *values = NULL;
    rx_redactor *r = NULL;
    size_t n = 0;
    int rc;
    *out = NULL;
    if (workspace_dir == NULL) { /* the shapes only */
        if ((rc = rx_redactor_new(&r, NULL, 0, err)) == 0)
            *out = (rexec_redactor *)r;
        return rc;
    }
    if ((rc = rx_ws_load(&ws, workspace_dir, err)) != 0)
        return rc;
    secrets = calloc(ws->n_secrets + 1, sizeof(*secrets));
    values = calloc(ws->n_secrets + 1, sizeof(*values));
    if (secrets == NULL || values == NULL) {
        rc = rx_fail(err, REXEC_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ws->n_secrets; i++) {
        rexec_error e;
        if (rx_ws_secret_value(ws, ws->secrets[i].name, &values[n], &e) != 0) {
            rx_buf_free(&values[n]); /* unresolved: it cannot be redacted (rexec check names it) */
            continue;
        }
        secrets[n] = (rx_secret){ws->secrets[i].name, values[n].data, values[n].len};
        n++;
    }
    if ((rc = rx_redactor_new(&r, secrets, n, err)) == 0)
        *out = (rexec_redactor *)r;
out:
    for (size_t i = 0; values && i < n; i++)
        rx_buf_free(&values[i]);
    free(values);
    free(secrets);
    rx_ws_free(ws);
    return rc;
}

char *rexec_redact(const rexec_redactor *r, const char *text, size_t len, size_t *out_len)
{
    return redact_text((const rx_redactor *)r, text, len, out_len);
}

void rexec_redactor_close(rexec_redactor *r)
{
    rx_redactor_free((rx_redactor *)r);
}

/* ---- targets -------------------------------------------------------------------------------- */

/* The message names the host or group as given, redacted: TARGETS is the caller's text and may
 * hold anything (docs/redaction.md, "Messages"). */
int rexec_ctx_targets(const rexec_ctx *ctx, const char *targets, const char ***hosts, size_t *n,
                      rexec_error *err)
{
    int r = rx_ws_targets(ctx->ws, targets, hosts, n, err);
    if (r != 0) {
        char *t = redact_text(rx_ctx_redactor(ctx), err->msg, strlen(err->msg), NULL);
        snprintf(err->msg, sizeof(err->msg), "%s", t ? t : "[REDACTED:UNAVAILABLE]");
        free(t);
    }
    return r;
}

/* ---- the catalog's templates (`rexec actions --lint`) ----------------------------------------- */

static const char *const lint_ptypes[] = {"string", "int", "enum", "url",
                                          "host",   "cidr", "path", "shell"};

/* The one problem of action a (its name, command and parameters' names and types are all the
 * template check reads), as {"action","line","column","why","error"}, or NULL when it has none. */
static cJSON *lint_action(const char *name, const cJSON *o)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(o, "command");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(o, "params"), *p;
    rx_action a = {0};
    rexec_error e;
    cJSON *out = NULL;
    if (!cJSON_IsString(cmd))
        return NULL; /* not a template problem: the loader's own message says it */
    a.name = (char *)name;
    a.command = cmd->valuestring;
    a.params = calloc((size_t)cJSON_GetArraySize(params) + 1, sizeof(*a.params));
    if (a.params == NULL)
        return NULL;
    if (cJSON_IsObject(params))
        cJSON_ArrayForEach(p, params) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
            rx_param_spec *ps = &a.params[a.n_params++];
            ps->name = p->string; /* borrowed: a is never freed as an action */
            for (int i = 0; cJSON_IsString(t) && i < 8; i++)
                if (strcmp(t->valuestring, lint_ptypes[i]) == 0)
                    ps->type = (rx_ptype)i;
        }
    if (rx_ws_check_template(&a, &e) != 0 && (out = cJSON_CreateObject()) != NULL) {
        unsigned char *forms = NULL;
        size_t nf = 0;
        rx_tmpl_diag d = {0};
        int r = rx_template_forms(a.command, rx_ws_param_kind, &a, &forms, &nf, &d);
        free(forms);
        cJSON_AddStringToObject(out, "action", name);
        if (r > 0) {
            cJSON_AddNumberToObject(out, "line", (double)d.line);
            cJSON_AddNumberToObject(out, "column", (double)d.col);
            cJSON_AddStringToObject(out, "why", d.why);
        } else { /* a {name} that is no parameter: the walk, not the reader, refused it */
            cJSON_AddNullToObject(out, "line");
            cJSON_AddNullToObject(out, "column");
            cJSON_AddStringToObject(out, "why", "names no declared parameter");
        }
        cJSON_AddStringToObject(out, "error", e.msg);
    }
    free(a.params);
    return out;
}

int rexec_catalog_lint(const char *workspace_dir, char **json, rexec_error *err)
{
    char real[PATH_MAX], *path = NULL, *text = NULL;
    size_t len = 0;
    cJSON *root = NULL, *o = cJSON_CreateObject(), *problems = cJSON_CreateArray();
    rx_ws *ws = NULL;
    rexec_error le, re;
    int loads, readable;
    *json = NULL;
    if (o == NULL || problems == NULL) {
        cJSON_Delete(o), cJSON_Delete(problems);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    loads = rx_ws_load(&ws, workspace_dir, &le) == 0;
    rx_ws_free(ws);
    readable = realpath(workspace_dir, real) != NULL && (path = rx_fs_join(real, "rexec.json")) &&
               rx_fs_read_file(path, 4 * 1024 * 1024, &text, &len, REXEC_ECONFIG, &re) == 0 &&
               rx_json_parse_strict(text, len, 4 * 1024 * 1024, REXEC_ECONFIG, &root, &re) == 0;
    const cJSON *actions = readable ? cJSON_GetObjectItemCaseSensitive(root, "actions") : NULL, *a;
    cJSON_AddNumberToObject(o, "actions", cJSON_IsObject(actions) ? cJSON_GetArraySize(actions) : 0);
    if (cJSON_IsObject(actions))
        cJSON_ArrayForEach(a, actions) {
            cJSON *p = cJSON_IsObject(a) ? lint_action(a->string, a) : NULL;
            if (p)
                cJSON_AddItemToArray(problems, p);
        }
    cJSON_AddBoolToObject(o, "loads", loads);
    if (loads)
        cJSON_AddNullToObject(o, "error");
    else
        cJSON_AddStringToObject(o, "error", le.msg);
    cJSON_AddItemToObject(o, "problems", problems);
    *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    cJSON_Delete(root);
    free(text);
    free(path);
    return *json ? 0 : rx_fail(err, REXEC_ENOMEM, "out of memory");
}

int rexec_approve_tty(rexec_ctx *ctx, const char *challenge_id, rexec_error *err)
{
    return rx_approve_tty(ctx->ws, challenge_id, err);
}

int rexec_ctx_parallel(const rexec_ctx *ctx)
{
    return ctx->ws->limits.parallel;
}
