/* Reloading the workspace under a running context (`rexec serve` on SIGHUP or {"op":"reload"}).
 *
 * A new rexec.json is loaded beside the current one; if it fails to load, nothing changes and the
 * error names the field at fault. Once loaded it serves every call that starts from then on. The
 * previous workspace is kept until the context closes: calls in flight hold pointers into it
 * (their host, action, parameters), serve requests borrow its host names, and the pool knows its
 * connections by the rx_host they were opened for. Its action catalog (most of its memory: the
 * compiled parameter patterns) and its secret set go once the last call that started under it
 * is released (secrets.c); what stays is its hosts, a few KiB a reload.
 *
 * A host whose entry in rexec.json is unchanged (the same JSON, field for field) keeps its warm
 * connections: calls to it reach the pool under the rx_host object the connections were opened
 * for (ctx->pool_hosts); a call resolves that object when it starts, so one that reaches the pool
 * after a reload still uses the connections of the host it started for. A changed or new host
 * gets fresh connections; the old ones close once idle. Pool-wide settings
 * (known_hosts, limits.connect_timeout_s, keepalive_s, max_channels) apply from the start only. */
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "err.h"
#include "fsutil.h"
#include "metrics.h"

#define RELOAD_MAX_FILE (4u << 20)

/* The "hosts" object of dir/rexec.json, to compare entries at the next reload; NULL if the file
 * cannot be read again (then every host counts as changed). */
static cJSON *hosts_doc(const char *dir)
{
    rexec_error e;
    char *path = rx_fs_join(dir, "rexec.json"), *text = NULL;
    size_t len = 0;
    cJSON *doc = NULL, *hosts = NULL;
    if (path && rx_fs_read_file(path, RELOAD_MAX_FILE, &text, &len, REXEC_ECONFIG, &e) == 0)
        doc = cJSON_ParseWithLength(text, len);
    hosts = cJSON_DetachItemFromObjectCaseSensitive(doc, "hosts");
    cJSON_Delete(doc);
    free(text);
    free(path);
    return hosts;
}

void rx_ctx_reload_init(rexec_ctx *ctx)
{
    ctx->hosts_doc = hosts_doc(ctx->ws->dir);
}

void rx_ctx_reload_free(rexec_ctx *ctx)
{
    for (size_t i = 0; i < ctx->n_retired; i++)
        rx_ws_free(ctx->retired[i]);
    free(ctx->retired);
    free(ctx->pool_hosts);
    cJSON_Delete(ctx->hosts_doc);
}

void rx_call_ws_pin(rexec_call *c)
{
    c->ws_pin = c->ctx->ws;
    c->ws_pin->users++;
}

/* A workspace a reload replaced keeps its hosts (warm connections are known by them), but its
 * catalog goes with the last call that started under it. */
void rx_call_ws_unpin(rexec_call *c)
{
    rx_ws *ws = c->ws_pin;
    c->ws_pin = NULL;
    if (ws != NULL && --ws->users == 0 && ws != c->ctx->ws)
        rx_ws_release_actions(ws);
}

const rx_host *rx_ctx_pool_host(const rexec_ctx *ctx, const rx_host *h)
{
    const rx_ws *ws = ctx->ws;
    if (ctx->pool_hosts && h >= ws->hosts && h < ws->hosts + ws->n_hosts)
        return ctx->pool_hosts[h - ws->hosts];
    return h;
}

/* For each host of the new workspace, the rx_host its calls go to the pool as: the old one when
 * the entry did not change, else its own. */
static const rx_host **map_hosts(const rexec_ctx *ctx, const rx_ws *nw, const cJSON *new_doc,
                                 size_t *warm)
{
    const rx_host **map = calloc(nw->n_hosts + 1, sizeof(*map));
    *warm = 0;
    for (size_t i = 0; map && i < nw->n_hosts; i++) {
        const rx_host *h = &nw->hosts[i], *old = rx_ws_host(ctx->ws, h->name);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(ctx->hosts_doc, h->name);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(new_doc, h->name);
        map[i] = h;
        if (old && a && b && cJSON_Compare(a, b, 1)) {
            map[i] = rx_ctx_pool_host(ctx, old);
            (*warm)++;
        }
    }
    return map;
}

/* The pool hosts of the current workspace that the new map no longer uses: their connections
 * close once idle (rx_pool_retire_host); calls that started before the reload still reach them. */
static void retire_unmapped(rexec_ctx *ctx, const rx_host **map, size_t n_new)
{
    const rx_ws *ws = ctx->ws;
    for (size_t i = 0; ctx->pool && i < ws->n_hosts; i++) {
        const rx_host *old = rx_ctx_pool_host(ctx, &ws->hosts[i]);
        size_t k = 0;
        while (k < n_new && map[k] != old)
            k++;
        if (k == n_new)
            rx_pool_retire_host(ctx->pool, old);
    }
}

static int ctx_reload(rexec_ctx *ctx, size_t *kept_warm, rexec_error *err)
{
    rx_ws *nw = NULL;
    size_t warm = 0;
    int r;
    if (ctx->closing)
        return rx_fail(err, REXEC_ECANCELLED, "rexec is shutting down");
    if ((r = rx_ws_load(&nw, ctx->ws->dir, err)) != 0)
        return r; /* the old configuration stays */
    if (ctx->ws_check != NULL && (r = ctx->ws_check(nw, err)) != 0) {
        rx_ws_free(nw);
        return r;
    }
    cJSON *doc = hosts_doc(nw->dir);
    const rx_host **map = map_hosts(ctx, nw, doc, &warm);
    rx_ws **retired = realloc(ctx->retired, (ctx->n_retired + 1) * sizeof(*retired));
    if (map == NULL || retired == NULL) {
        free(map);
        if (retired)
            ctx->retired = retired;
        cJSON_Delete(doc);
        rx_ws_free(nw);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    ctx->retired = retired;
    if ((r = rx_ctx_secrets_reload(ctx, nw, err)) != 0) { /* the old configuration stays */
        free(map);
        cJSON_Delete(doc);
        rx_ws_free(nw);
        return r;
    }
    retire_unmapped(ctx, map, nw->n_hosts);
    ctx->retired[ctx->n_retired++] = ctx->ws;
    if (ctx->ws->users == 0) /* no call uses its catalog: only its hosts stay (map_hosts) */
        rx_ws_release_actions(ctx->ws);
    ctx->ws = nw;
    free(ctx->pool_hosts);
    ctx->pool_hosts = map;
    cJSON_Delete(ctx->hosts_doc);
    ctx->hosts_doc = doc;
    ctx->reloads++;
    if (kept_warm)
        *kept_warm = warm;
    return 0;
}

/* Every reload counts in the metrics, applied or refused (the shutdown's refusal too). */
int rexec_ctx_reload(rexec_ctx *ctx, size_t *kept_warm, rexec_error *err)
{
    int r = ctx_reload(ctx, kept_warm, err);
    rx_metrics_count_reload(r == 0);
    return r;
}
