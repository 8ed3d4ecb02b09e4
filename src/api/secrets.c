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

typedef struct rx_secret_set {
    size_t users;   /* calls started while it was the context's set (rx_call_secrets_pin) */
    rx_redactor *redactor;
    rx_buf *values; /* wiped on free */
    rx_secret *secrets;
    size_t n;
    char *unresolved; /* "secret X: why" lines, or NULL */
} rx_secret_set;

/* Adds "name: why" to the list of secrets that could not be resolved (names, never values). */
static void note_unresolved(rx_secret_set *set, const char *msg)
{
    size_t old = set->unresolved ? strlen(set->unresolved) : 0, n = strlen(msg);
    char *s = realloc(set->unresolved, old + n + 2);
    if (s == NULL)
        return;
    memcpy(s + old, msg, n);
    s[old + n] = '\n';
    s[old + n + 1] = 0;
    set->unresolved = s;
}

static void set_free(rx_secret_set *set)
{
    if (set == NULL)
        return;
    rx_redactor_free(set->redactor);
    for (size_t i = 0; set->values && i < set->n; i++)
        rx_buf_free(&set->values[i]);
    free(set->values);
    free(set->secrets);
    free(set->unresolved);
    free(set);
}

/* Names point into ws, which must outlive the set. */
static int set_new(const rx_ws *ws, rx_secret_set **out, rexec_error *err)
{
    rx_secret_set *set = calloc(1, sizeof(*set));
    *out = NULL;
    if (set == NULL || (set->values = calloc(ws->n_secrets + 1, sizeof(rx_buf))) == NULL ||
        (set->secrets = calloc(ws->n_secrets + 1, sizeof(rx_secret))) == NULL) {
        set_free(set);
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < ws->n_secrets; i++) {
        rexec_error e;
        rx_buf *v = &set->values[set->n];
        if (rx_ws_secret_value(ws, ws->secrets[i].name, v, &e) != 0) {
            rx_buf_free(v);
            note_unresolved(set, e.msg);
            continue;
        }
        set->secrets[set->n++] = (rx_secret){ws->secrets[i].name, v->data, v->len};
    }
    int r = rx_redactor_new(&set->redactor, set->secrets, set->n, err);
    if (r != 0) {
        set_free(set);
        return r;
    }
    *out = set;
    return 0;
}

int rx_ctx_secrets_load(rexec_ctx *ctx, rexec_error *err)
{
    return set_new(ctx->ws, &ctx->sset, err);
}

int rx_ctx_secrets_reload(rexec_ctx *ctx, const rx_ws *nw, rexec_error *err)
{
    rx_secret_set *set;
    rx_secret_set **old = realloc(ctx->old_ssets, (ctx->n_old_ssets + 1) * sizeof(*old));
    if (old == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    ctx->old_ssets = old;
    int r = set_new(nw, &set, err);
    if (r != 0)
        return r;
    if (ctx->sset->users > 0)
        old[ctx->n_old_ssets++] = ctx->sset; /* calls in flight still scan with it */
    else
        set_free(ctx->sset);
    ctx->sset = set;
    return 0;
}

void rx_call_secrets_pin(rexec_call *c)
{
    c->sset = c->ctx->sset;
    c->sset->users++;
}

/* A set replaced by a reload goes once the last call that started under it is released: its
 * calls' streams and evidence scan with its redactor. (Until 2026-12-05 every set and every
 * catalog stayed until the context closed: serve grew by about 0.8 MiB at every reload here.) */
void rx_call_secrets_unpin(rexec_call *c)
{
    rexec_ctx *ctx = c->ctx;
    rx_secret_set *set = c->sset;
    c->sset = NULL;
    if (set == NULL || --set->users > 0 || set == ctx->sset)
        return;
    for (size_t i = 0; i < ctx->n_old_ssets; i++)
        if (ctx->old_ssets[i] == set) {
            ctx->old_ssets[i] = ctx->old_ssets[--ctx->n_old_ssets];
            set_free(set);
            return;
        }
}

void rx_ctx_secrets_free(rexec_ctx *ctx)
{
    set_free(ctx->sset);
    for (size_t i = 0; i < ctx->n_old_ssets; i++)
        set_free(ctx->old_ssets[i]);
    free(ctx->old_ssets);
}

const char *rexec_ctx_unresolved_secrets(const rexec_ctx *ctx)
{
    return ctx->sset->unresolved;
}

/* 1 when the workspace redactor already knows this value under this name. */
static int known(const rexec_ctx *ctx, const rx_secret *s)
{
    for (size_t i = 0; i < ctx->sset->n; i++) {
        const rx_secret *w = &ctx->sset->secrets[i];
        if (strcmp(w->name, s->name) == 0)
            return w->len == s->len && CRYPTO_memcmp(w->value, s->value, s->len) == 0;
    }
    return 0;
}

int rx_call_build_redactor(rexec_call *c, rexec_error *err)
{
    rexec_ctx *ctx = c->ctx;
    size_t n = 0, fresh = 0, mine = c->n_secrets + c->n_redact_only; /* + the key passphrase */
    for (size_t i = 0; i < mine; i++)
        fresh += !known(ctx, &c->secrets[i]);
    if (fresh == 0)
        return 0; /* the common case: the workspace's redactor covers this call */
    rx_secret *all = calloc(ctx->sset->n + mine + 1, sizeof(*all));
    if (all == NULL)
        return rx_fail(err, REXEC_ENOMEM, "out of memory");
    for (size_t i = 0; i < ctx->sset->n; i++)
        all[n++] = ctx->sset->secrets[i];
    for (size_t i = 0; i < mine; i++)
        all[n++] = c->secrets[i];
    int r = rx_redactor_new(&c->redactor, all, n, err);
    free(all);
    return r;
}

const rx_redactor *rx_ctx_redactor(const rexec_ctx *ctx)
{
    return ctx->sset->redactor;
}

/* The call's own redactor once built, before that the set it pinned at its start (not the
 * context's current one: a reload may replace that while the gate runs on another thread). */
const rx_redactor *rx_call_redactor(const rexec_call *c)
{
    return c->redactor ? c->redactor : (c->sset ? c->sset : c->ctx->sset)->redactor;
}
