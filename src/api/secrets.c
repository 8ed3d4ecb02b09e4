/* The workspace's redactor: every secret the workspace can resolve, built once when the context
 * is created, so every call's output and every record is redacted of all of them, whether or not
 * the action was handed the secret (a value left in a file by an earlier call, or typed into a
 * parameter, a rationale or a hypothesis id, is caught too). A call whose handed secrets changed
 * since the load (a rotated file) gets a redactor of its own with the old and the new values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "call.h"
#include "err.h"

/* Adds "name: why" to the list of secrets that could not be resolved (names, never values). */
static void note_unresolved(rexec_ctx *ctx, const char *msg)
{
    size_t old = ctx->unresolved ? strlen(ctx->unresolved) : 0, n = strlen(msg);
    char *s = realloc(ctx->unresolved, old + n + 2);
    if (s == NULL)
        return;
    memcpy(s + old, msg, n);
    s[old + n] = '\n';
    s[old + n + 1] = 0;
    ctx->unresolved = s;
}

int rx_ctx_secrets_load(rexec_ctx *ctx, rexec_error *err)
{
    const rx_ws *ws = ctx->ws;
    ctx->ws_values = calloc(ws->n_secrets + 1, sizeof(rx_buf));
    ctx->ws_secrets = calloc(ws->n_secrets + 1, sizeof(rx_secret));
    if (ctx->ws_values == NULL || ctx->ws_secrets == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    for (size_t i = 0; i < ws->n_secrets; i++) {
        rexec_error e;
        rx_buf *v = &ctx->ws_values[ctx->n_ws_secrets];
        if (rx_ws_secret_value(ws, ws->secrets[i].name, v, &e) != 0) {
            rx_buf_free(v);
            note_unresolved(ctx, e.msg);
            continue;
        }
        ctx->ws_secrets[ctx->n_ws_secrets++] = (rx_secret){ws->secrets[i].name, v->data, v->len};
    }
    return rx_redactor_new(&ctx->redactor, ctx->ws_secrets, ctx->n_ws_secrets, err);
}

void rx_ctx_secrets_free(rexec_ctx *ctx)
{
    rx_redactor_free(ctx->redactor);
    for (size_t i = 0; ctx->ws_values && i < ctx->n_ws_secrets; i++)
        rx_buf_free(&ctx->ws_values[i]);
    free(ctx->ws_values);
    free(ctx->ws_secrets);
    free(ctx->unresolved);
}

const char *rexec_ctx_unresolved_secrets(const rexec_ctx *ctx)
{
    return ctx->unresolved;
}

/* 1 when the workspace redactor already knows this value under this name. */
static int known(const rexec_ctx *ctx, const rx_secret *s)
{
    for (size_t i = 0; i < ctx->n_ws_secrets; i++) {
        const rx_secret *w = &ctx->ws_secrets[i];
        if (strcmp(w->name, s->name) == 0)
            return w->len == s->len && CRYPTO_memcmp(w->value, s->value, s->len) == 0;
    }
    return 0;
}

int rx_call_build_redactor(rexec_call *c, rexec_error *err)
{
    rexec_ctx *ctx = c->ctx;
    size_t n = 0, fresh = 0;
    for (size_t i = 0; i < c->n_secrets; i++)
        fresh += !known(ctx, &c->secrets[i]);
    if (fresh == 0)
        return 0; /* the common case: the workspace's redactor covers this call */
    rx_secret *all = calloc(ctx->n_ws_secrets + c->n_secrets + 1, sizeof(*all));
    if (all == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    for (size_t i = 0; i < ctx->n_ws_secrets; i++)
        all[n++] = ctx->ws_secrets[i];
    for (size_t i = 0; i < c->n_secrets; i++)
        all[n++] = c->secrets[i];
    int r = rx_redactor_new(&c->redactor, all, n, err);
    free(all);
    return r;
}

const rx_redactor *rx_call_redactor(const rexec_call *c)
{
    return c->redactor ? c->redactor : c->ctx->redactor;
}
